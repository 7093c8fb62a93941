"""Projects: create, list, read with counts, update, delete; errors of the whole service."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import assert_problem, label, new_project


def test_create_returns_201_with_the_project_and_its_key_once(client: TestClient) -> None:
    response = client.post("/projects", json={"name": "Calculus", "description": "maths"})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Calculus" and body["description"] == "maths"
    assert body["api_key"] and body["prediction_model"] == "random_forest"
    read = client.get(f"/projects/{body['id']}").json()
    assert "api_key" not in read and read["name"] == "Calculus"


def test_list_shows_every_project_with_paging(client: TestClient) -> None:
    ids = [new_project(client) for _ in range(3)]
    body = client.get("/projects", params={"limit": 2}).json()
    assert body["total"] == 3 and [p["id"] for p in body["items"]] == ids[:2]
    body = client.get("/projects", params={"limit": 2, "offset": 2}).json()
    assert [p["id"] for p in body["items"]] == ids[2:]


def test_read_counts_concepts_pool_labels_and_bounds(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c", "d"],
                      [("a", "b", [1.0]), ("b", "c", [2.0]), ("a", "c", [3.0]),
                       ("c", "d", [4.0])])
    assert label(client, pid, "a", "b").status_code == 201
    assert label(client, pid, "b", "c").status_code == 201
    body = client.get(f"/projects/{pid}").json()
    assert body["counts"] == {
        "concepts": 4, "pool_pairs": 4, "asserted_labels": 2,
        "inferred_positive": 1,  # (a, c)
        "inferred_negative": 3,  # (b, a), (c, b), (c, a)
        "undecided_pool_pairs": 1,  # (c, d)
    }
    # Theorem 2: the cover pairs a→b, b→c must be asked; at most the 3 positive pairs.
    assert body["query_bounds"] == {"lower": 2, "upper": 3}
    assert body["feature_length"] == 1


def test_update_changes_fields_and_bumps_the_version(client: TestClient) -> None:
    pid = new_project(client)
    before = client.get(f"/projects/{pid}").json()["version"]
    response = client.patch(f"/projects/{pid}", json={"description": "new",
                                                      "prediction_model": "logistic_regression"})
    assert response.status_code == 200
    assert response.json()["description"] == "new"
    assert response.json()["prediction_model"] == "logistic_regression"
    assert response.json()["version"] > before


def test_delete_removes_the_project_and_everything_in_it(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"], [("a", "b", [0.5])])
    assert label(client, pid, "a", "b").status_code == 201
    assert client.delete(f"/projects/{pid}").status_code == 204
    assert_problem(client.get(f"/projects/{pid}"), 404, "project-not-found")
    assert_problem(client.delete(f"/projects/{pid}"), 404, "project-not-found")
    assert client.get("/projects").json()["total"] == 0


def test_unknown_project_is_404_on_every_project_route(client: TestClient) -> None:
    for method, path in [("GET", "/projects/999"), ("PATCH", "/projects/999"),
                         ("GET", "/projects/999/concepts"), ("GET", "/projects/999/pairs"),
                         ("GET", "/projects/999/labels"), ("GET", "/projects/999/next"),
                         ("GET", "/projects/999/predictions"),
                         ("GET", "/projects/999/export"), ("DELETE", "/projects/999/labels/1"),
                         ("POST", "/projects/999/api-key")]:
        body = {} if method == "PATCH" else None
        response = client.request(method, path, json=body)
        assert_problem(response, 404, "project-not-found")
    for path, body in [("/projects/999/concepts", {"concepts": []}),
                       ("/projects/999/pairs", {"pairs": []}),
                       ("/projects/999/labels", {"a": "x", "b": "y", "label": "positive"}),
                       ("/projects/999/labels/bulk", {"labels": []})]:
        assert_problem(client.post(path, json=body), 404, "project-not-found")


def test_project_ids_out_of_range_are_422_not_a_database_error(client: TestClient) -> None:
    for pid in ["0", "-1", str(2**31), str(10**30), "abc"]:
        assert_problem(client.get(f"/projects/{pid}"), 422, "validation-error")


def test_invalid_project_bodies_are_422_problems(client: TestClient) -> None:
    for body in [{}, {"name": ""}, {"name": "x" * 513}, {"name": "a\x00b"}, {"name": "a\nb"},
                 {"name": 5}, {"name": ["x"]}, {"name": "x", "color": "red"},
                 {"name": "x", "description": "nul\x00"},
                 {"name": "x", "prediction_model": "svm"}, [], "name"]:
        body_out = assert_problem(client.post("/projects", json=body), 422, "validation-error")
        assert body_out["errors"], body
    assert client.post("/projects", json={"name": "x" * 512}).status_code == 201
    assert client.post("/projects", json={"name": "ünïcødé / \"quoted\" name"}).status_code == 201


def test_unpaired_surrogate_in_a_name_is_422(client: TestClient) -> None:
    raw = b'{"name": "bad \\ud800 name"}'
    response = client.post("/projects", content=raw,
                           headers={"content-type": "application/json"})
    assert_problem(response, 422, "validation-error")


def test_malformed_json_is_a_422_problem(client: TestClient) -> None:
    for raw in [b'{"name": ', b"not json", b'{"name": "x",}', b"\xff\xfe"]:
        response = client.post("/projects", content=raw,
                               headers={"content-type": "application/json"})
        assert_problem(response, 422, "validation-error")


def test_unknown_path_and_method_are_problems(client: TestClient) -> None:
    assert_problem(client.get("/nowhere"), 404, "not-found")
    response = client.put("/projects")
    assert_problem(response, 405, "method-not-allowed")
    assert "allow" in response.headers
