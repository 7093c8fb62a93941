"""Concepts and the pool: registration, listing, validation (nothing of a rejected request kept)."""

from __future__ import annotations

import math

from fastapi.testclient import TestClient

from app.schemas import MAX_ITEMS
from tests.api.conftest import assert_problem, label, new_project


def test_posting_concepts_again_is_not_an_error(client: TestClient) -> None:
    pid = new_project(client)
    first = client.post(f"/projects/{pid}/concepts",
                        json={"concepts": [{"name": "limit"}, {"name": "derivative"}]})
    assert first.status_code == 201 and first.json()["created"] == 2
    again = client.post(f"/projects/{pid}/concepts",
                        json={"concepts": [{"name": "limit", "description": "a limit"},
                                           {"name": "integral"}]})
    assert again.status_code == 201 and again.json()["created"] == 1
    listed = client.get(f"/projects/{pid}/concepts").json()
    assert listed["total"] == 3
    assert [c["name"] for c in listed["items"]] == ["limit", "derivative", "integral"]
    assert listed["items"][0]["description"] == "a limit"
    ids = {c["name"]: c["id"] for c in again.json()["concepts"]}
    assert ids["limit"] == first.json()["concepts"][0]["id"]


def test_concept_listing_pages(client: TestClient) -> None:
    names = [f"c{i:02d}" for i in range(25)]
    pid = new_project(client, names)
    page = client.get(f"/projects/{pid}/concepts", params={"limit": 10, "offset": 20}).json()
    assert page["total"] == 25 and [c["name"] for c in page["items"]] == names[20:]
    for params in [{"limit": 10_001}, {"limit": 0}, {"offset": -1}, {"limit": "many"}]:
        assert_problem(client.get(f"/projects/{pid}/concepts", params=params), 422,
                       "validation-error")


def test_concept_names_are_validated(client: TestClient) -> None:
    pid = new_project(client)
    # U+FFFE and U+FFFF are refused too: no XML document (the GraphML export) can carry them.
    for name in ["", "x" * 513, "tab\there", "nul\x00", "del\x7f", "non\ufffe", "non\uffff",
                 12, None]:
        response = client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": name}]})
        assert_problem(response, 422, "validation-error")
    odd = ["a/b", 'say "hi"', "  spaced  ", "日本語", "emoji 🙂"]
    response = client.post(f"/projects/{pid}/concepts",
                           json={"concepts": [{"name": n} for n in odd]})
    assert response.status_code == 201
    assert [c["name"] for c in response.json()["concepts"]] == odd


def test_lists_longer_than_the_cap_are_422(client: TestClient) -> None:
    pid = new_project(client)
    body = {"concepts": [{"name": "x"}] * (MAX_ITEMS + 1)}
    assert_problem(client.post(f"/projects/{pid}/concepts", json=body), 422, "validation-error")
    assert client.get(f"/projects/{pid}/concepts").json()["total"] == 0


def test_pairs_register_and_the_same_pair_again_is_a_no_op(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"])
    body = {"pairs": [{"a": "a", "b": "b", "features": [0.5, 1]},
                      {"a": "b", "b": "c", "features": [1.5, -2]}]}
    response = client.post(f"/projects/{pid}/pairs", json=body)
    assert response.status_code == 201
    assert response.json() == {"created": 2, "unchanged": 0, "feature_length": 2}
    response = client.post(f"/projects/{pid}/pairs", json=body)
    assert response.json() == {"created": 0, "unchanged": 2, "feature_length": 2}
    listed = client.get(f"/projects/{pid}/pairs").json()
    assert listed["total"] == 2
    assert [(p["a"], p["b"], p["features"], p["status"]) for p in listed["items"]] == [
        ("a", "b", [0.5, 1.0], "undecided"), ("b", "c", [1.5, -2.0], "undecided")]


def _pair_count(client: TestClient, pid: int) -> int:
    return int(client.get(f"/projects/{pid}/pairs").json()["total"])


def test_rejected_pairs_are_named_and_nothing_is_stored(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", [1.0, 2.0])])
    body = {"pairs": [
        {"a": "b", "b": "c", "features": [0.0, 0.0]},  # fine, but must not be stored
        {"a": "a", "b": "a", "features": [0.0, 0.0]},  # self pair
        {"a": "a", "b": "c", "features": [0.0]},  # wrong length
        {"a": "a", "b": "b", "features": [9.0, 9.0]},  # registered with other features
    ]}
    problem = assert_problem(client.post(f"/projects/{pid}/pairs", json=body), 422,
                             "invalid-items")
    assert [e["index"] for e in problem["errors"]] == [1, 2, 3]
    assert "features" in problem["errors"][1]["reason"]
    assert _pair_count(client, pid) == 1


def test_unknown_concepts_in_pairs_are_422_naming_them(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    body = {"pairs": [{"a": "a", "b": "ghost", "features": [1.0]},
                      {"a": "phantom", "b": "b", "features": [1.0]},
                      {"a": "a", "b": "b", "features": [1.0]}]}
    problem = assert_problem(client.post(f"/projects/{pid}/pairs", json=body), 422,
                             "unknown-concept")
    assert problem["unknown_concepts"] == ["ghost", "phantom"]
    assert [e["index"] for e in problem["errors"]] == [0, 1]
    assert _pair_count(client, pid) == 0


def test_non_finite_or_mistyped_features_are_422(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    for raw in ['{"pairs": [{"a": "a", "b": "b", "features": [NaN]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": [Infinity]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": [-Infinity]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": [1e400]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": ["1.0"]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": [true]}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": []}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": 1.0}]}',
                '{"pairs": [{"a": "a", "b": "b", "features": [1.0], "label": 1}]}']:
        response = client.post(f"/projects/{pid}/pairs", content=raw.encode(),
                               headers={"content-type": "application/json"})
        assert_problem(response, 422, "validation-error")
    assert _pair_count(client, pid) == 0
    big = client.post(f"/projects/{pid}/pairs",
                      json={"pairs": [{"a": "a", "b": "b", "features": [10**300, -1e-300]}]})
    assert big.status_code == 201
    assert math.isclose(client.get(f"/projects/{pid}/pairs").json()["items"][0]["features"][0],
                        1e300)


def test_pair_status_gives_value_source_and_proof(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c", "d"], [("a", "c", [1.0]), ("c", "d", [2.0])])
    first = label(client, pid, "a", "b").json()["id"]
    second = label(client, pid, "b", "c").json()["id"]
    body = client.get(f"/projects/{pid}/pairs/status", params={"a": "a", "b": "c"}).json()
    assert body["status"] == "positive" and body["source"] == "inferred"
    assert sorted(p["id"] for p in body["proof"]) == sorted([first, second])
    assert body["chains"] == [["a", "b", "c"]] and body["in_pool"] is True
    body = client.get(f"/projects/{pid}/pairs/status", params={"a": "c", "b": "a"}).json()
    assert body["status"] == "negative" and body["source"] == "inferred"
    body = client.get(f"/projects/{pid}/pairs/status", params={"a": "a", "b": "b"}).json()
    assert body["source"] == "asserted" and [p["id"] for p in body["proof"]] == [first]
    body = client.get(f"/projects/{pid}/pairs/status", params={"a": "c", "b": "d"}).json()
    assert body["status"] == "undecided" and body["source"] is None and body["proof"] == []
    # One decided pool pair of one class: no model can be trained yet.
    assert body["prediction"] is None


def test_pair_status_errors(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    problem = assert_problem(
        client.get(f"/projects/{pid}/pairs/status", params={"a": "a", "b": "zz"}), 422,
        "unknown-concept")
    assert problem["unknown_concepts"] == ["zz"]
    assert_problem(client.get(f"/projects/{pid}/pairs/status", params={"a": "a", "b": "a"}),
                   422, "invalid-label")
    assert_problem(client.get(f"/projects/{pid}/pairs/status", params={"a": "a"}), 422,
                   "validation-error")
    assert_problem(client.get(f"/projects/{pid}/pairs/status", params={"a": "", "b": "a"}),
                   422, "validation-error")
