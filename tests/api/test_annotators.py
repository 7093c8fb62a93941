"""GET /projects/{pid}/annotators: answered, accepted, retracted and refused per annotator."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem, label, new_project

CHAIN = ["limit", "derivative", "integral"]


def _counts(client: TestClient, pid: int, **headers: str) -> dict[str | None, dict[str, int]]:
    response = client.get(f"/projects/{pid}/annotators", headers=headers)
    assert response.status_code == 200, response.text
    return {item.pop("annotator"): item for item in response.json()["items"]}


def test_counts_accepted_retracted_and_refused_answers_per_annotator(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    first = label(client, pid, "limit", "derivative", annotator="ana").json()["id"]
    label(client, pid, "derivative", "integral", annotator="ana")
    assert_problem(label(client, pid, "integral", "limit", annotator="bo"), 409, "contradiction")
    assert_problem(label(client, pid, "integral", "limit", annotator="bo"), 409, "contradiction")
    label(client, pid, "limit", "integral", "positive", annotator="bo")  # inferred: accepted
    label(client, pid, "limit", "derivative", annotator="ana")  # the same again: not an answer
    label(client, pid, "integral", "derivative", "negative")  # no annotator
    assert client.delete(f"/projects/{pid}/labels/{first}").status_code == 200

    assert _counts(client, pid) == {
        "ana": {"answered": 2, "accepted": 1, "retracted": 1, "refused": 0, "contested": 0,
                "excluded": 0},
        "bo": {"answered": 3, "accepted": 1, "retracted": 0, "refused": 2, "contested": 0,
               "excluded": 0},
        None: {"answered": 1, "accepted": 1, "retracted": 0, "refused": 0, "contested": 0,
               "excluded": 0},
    }
    assert list(_counts(client, new_project(client, CHAIN))) == []


def test_a_replayed_refusal_is_counted_once(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    label(client, pid, "limit", "derivative")
    body = {"a": "derivative", "b": "limit", "label": "positive", "annotator": "cy"}
    for _ in range(2):
        response = client.post(f"/projects/{pid}/labels", json=body,
                               headers={"Idempotency-Key": "retry-1"})
        assert_problem(response, 409, "contradiction")
    assert _counts(client, pid)["cy"]["refused"] == 1


def test_counts_need_the_project_key(make_client: Callable[..., TestClient]) -> None:
    keyed = make_client(admin_key=ADMIN_KEY)
    created = keyed.post("/projects", json={"name": "p"}, headers={"X-API-Key": ADMIN_KEY})
    pid, key = created.json()["id"], created.json()["api_key"]
    assert_problem(keyed.get(f"/projects/{pid}/annotators"), 401, "unauthorized")
    assert _counts(keyed, pid, **{"X-API-Key": key}) == {}
    assert_problem(keyed.get("/projects/999999/annotators",
                             headers={"X-API-Key": ADMIN_KEY}), 404, "project-not-found")


def test_another_annotators_agreeing_answer_is_kept_and_counted(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    first = label(client, pid, "limit", "derivative", annotator="ana")
    assert first.status_code == 201
    again = label(client, pid, "limit", "derivative", annotator="ana")
    agreeing = label(client, pid, "limit", "derivative", annotator="bo")
    assert again.status_code == 200 and again.json()["answer_id"] is None
    assert agreeing.status_code == 201, agreeing.text
    body = agreeing.json()
    assert body["id"] == first.json()["id"]  # the label it agrees with
    assert body["annotator"] == "bo" and body["answer_id"] > first.json()["answer_id"]
    repeated = label(client, pid, "limit", "derivative", annotator="bo")
    assert repeated.status_code == 200 and repeated.json()["answer_id"] is None
    counts = _counts(client, pid)
    assert counts["bo"]["accepted"] == 1 and counts["bo"]["answered"] == 1
    assert counts["ana"]["answered"] == 1
    # retracting the label retracts every answer behind it
    assert client.delete(f"/projects/{pid}/labels/{first.json()['id']}").status_code == 200
    counts = _counts(client, pid)
    assert counts["bo"]["retracted"] == 1 and counts["ana"]["retracted"] == 1
