"""Disagreements in a consensus project: opened by answers that disagree, closed by later
answers or by a reviewer; and the questions ``next`` asks a team."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import app.services.asking as asking
from reasoning.consensus.asking import AskPolicy
from tests.api.conftest import assert_problem, label, new_project

CONCEPTS = ["a", "b", "c", "d"]


def _disagreements(client: TestClient, pid: int, state: str = "open") -> list[dict]:
    response = client.get(f"/projects/{pid}/disagreements?state={state}")
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_a_disagreement_opens_and_later_answers_settle_it(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    assert label(client, pid, "a", "b", annotator="ann").json()["disagreement"] is None
    opened = label(client, pid, "a", "b", "negative", annotator="bob").json()["disagreement"]
    assert opened["state"] == "opened"
    [item] = _disagreements(client, pid)
    assert item["id"] == opened["id"] and (item["a"], item["b"]) == ("a", "b")
    assert [x["annotator"] for x in item["positive"]] == ["ann"]
    assert [x["annotator"] for x in item["negative"]] == ["bob"]
    assert item["state"] == "open" and item["closed_at"] is None
    closed = label(client, pid, "a", "b", annotator="cy").json()["disagreement"]
    assert closed == {"id": opened["id"], "state": "closed"}
    assert _disagreements(client, pid) == []
    [done] = _disagreements(client, pid, "closed")
    assert done["consensus"] == "positive" and done["closed_at"] is not None
    assert len(_disagreements(client, pid, "all")) == 1


def test_an_answer_against_the_closure_opens_one_with_the_proof(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "b", "c", annotator="ann")
    label(client, pid, "a", "b", annotator="bob")
    label(client, pid, "b", "c", annotator="bob")
    response = label(client, pid, "a", "c", "negative", annotator="cy")
    assert response.status_code == 201
    assert response.json()["disagreement"]["state"] == "opened"
    [item] = _disagreements(client, pid)
    assert (item["a"], item["b"], item["consensus"]) == ("a", "c", "positive")
    assert {(p["a"], p["b"]) for p in item["proof"]} == {("a", "b"), ("b", "c")}
    assert item["chains"] == [["a", "b", "c"]]


def test_a_reviewer_resolves_and_the_later_resolution_stands(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    did = label(client, pid, "a", "b", "negative", annotator="bob").json()["disagreement"]["id"]
    response = client.post(f"/projects/{pid}/disagreements/{did}/resolve",
                           json={"label": "negative", "annotator": "rev"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["state"] == "closed" and body["consensus"] == "negative"
    review = [x for x in body["negative"] if x["role"] == "reviewer"]
    assert review and review[0]["source"] == "review" and review[0]["annotator"] == "rev"
    # more answers do not overrule a reviewer
    for who in ("cy", "dan", "eve"):
        label(client, pid, "a", "b", annotator=who)
    assert _disagreements(client, pid) == []
    items = client.get(f"/projects/{pid}/labels?source=asserted").json()["items"]
    assert [(i["a"], i["b"], i["label"]) for i in items] == [("a", "b", "negative")]
    again = client.post(f"/projects/{pid}/disagreements/{did}/resolve",
                        json={"label": "positive"})
    assert again.json()["consensus"] == "positive"
    assert_problem(client.post(f"/projects/{pid}/disagreements/999/resolve",
                               json={"label": "positive"}), 404, "disagreement-not-found")
    assert client.post(f"/projects/{pid}/disagreements/{did}/resolve",
                       json={"label": "maybe"}).status_code == 422


def _pool_project(client: TestClient, n: int = 8) -> tuple[int, list[str]]:
    names = [f"c{k}" for k in range(n)]
    pairs = [(x, y, [float(i), float(j)]) for i, x in enumerate(names)
             for j, y in enumerate(names) if i != j]
    return new_project(client, names, pairs, policy="consensus"), names


def _next(client: TestClient, pid: int, who: str, k: int = 1) -> list[dict]:
    response = client.get(f"/projects/{pid}/next?strategy=Random&k={k}&annotator={who}")
    assert response.status_code == 200, response.text
    return response.json()["queries"]


def test_next_in_strict_always_says_new(client: TestClient) -> None:
    names = ["x", "y", "z"]
    pid = new_project(client, names, [("x", "y", [0.0]), ("y", "z", [1.0]), ("x", "z", [2.0])])
    assert {q["reason"] for q in _next(client, pid, "ann", k=3)} == {"new"}


def test_next_asks_disagreements_first_and_never_the_one_who_answered(
        client: TestClient) -> None:
    pid, names = _pool_project(client)
    label(client, pid, "c0", "c1", annotator="ann")
    label(client, pid, "c0", "c1", "negative", annotator="bob")
    [first] = _next(client, pid, "cy")
    assert (first["a"], first["b"], first["reason"]) == ("c0", "c1", "disagreement")
    for who in ("ann", "bob"):
        asked = _next(client, pid, who, k=5)
        assert ("c0", "c1") not in {(q["a"], q["b"]) for q in asked}
        assert all(q["reason"] != "disagreement" for q in asked)


def test_next_asks_second_opinions_where_an_answer_decides_much(client: TestClient) -> None:
    pid, names = _pool_project(client)
    for x, y in zip(names[1:], names[2:], strict=False):  # a chain c1 < ... < c7
        label(client, pid, x, y, annotator="ann")
    label(client, pid, "c0", "c1", annotator="ann")  # decides c0 before everything
    [query] = _next(client, pid, "bob")
    assert query["reason"] == "second-opinion"
    pair = (query["a"], query["b"])
    assert label(client, pid, *pair, annotator="bob").status_code == 201
    assert pair not in {(q["a"], q["b"]) for q in _next(client, pid, "bob", k=5)}
    # ann answered every asserted pair: no second opinion for ann
    assert all(q["reason"] == "new" for q in _next(client, pid, "ann", k=3))


def test_a_check_question_is_marked_and_a_no_fails_it(client: TestClient,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # every question a check, when one is left
    monkeypatch.setattr(asking, "POLICY", AskPolicy(check_rate=1.0, passed_rate=1.0))
    names = ["x", "y", "z"]
    pairs = [("x", "y", [0.0]), ("y", "z", [1.0]), ("x", "z", [2.0])]
    pid = new_project(client, names, pairs, policy="consensus")
    label(client, pid, "x", "y", annotator="ann")
    label(client, pid, "y", "z", annotator="ann")
    [check] = _next(client, pid, "dan")
    assert (check["a"], check["b"], check["reason"]) == ("x", "z", "new")
    failed = label(client, pid, "x", "z", "negative", annotator="dan")
    assert failed.status_code == 201 and failed.json()["check_failed"] is True
    [again] = _next(client, pid, "eve")
    assert (again["a"], again["b"]) == ("x", "z")
    passed = label(client, pid, "x", "z", annotator="eve")
    assert passed.json()["check_failed"] is False
    plain = label(client, pid, "x", "z", "negative", annotator="fay")  # never asked: no check
    assert plain.json()["check_failed"] is False
