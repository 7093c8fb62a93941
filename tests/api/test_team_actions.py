"""A lead's actions on one annotator of a ``consensus`` project: exclude, include, re-ask.

A planted team: ``ann`` and ``bo`` answer a chain truthfully, ``bad`` says "no" to every pair
and answers two pairs nobody else did. Excluding ``bad`` must leave exactly the labels that
:func:`reasoning.consensus.consensus`, run offline on the live answers without ``bad``'s,
gives; including ``bad`` again, those of every live answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from reasoning.consensus import Vote, consensus
from tests.api.conftest import ADMIN_KEY, assert_problem, label, new_project

NAMES = [f"c{k}" for k in range(8)]
BOTH = [("c0", "c2"), ("c1", "c3"), ("c0", "c3")]  # ann yes, bo yes, bad no
ONE_ON_ONE = [("c0", "c1"), ("c1", "c2"), ("c2", "c3")]  # ann yes, bad no
BAD_ALONE = [("c5", "c6"), ("c6", "c7")]  # bad no, nobody else
BO_ALONE = [("c4", "c5")]  # bo yes


def _pool_project(client: TestClient, **fields: Any) -> int:
    pairs = [(x, y, [float(i), float(j)]) for i, x in enumerate(NAMES)
             for j, y in enumerate(NAMES) if i != j]
    return new_project(client, NAMES, pairs, policy="consensus", **fields)


def _planted(client: TestClient) -> int:
    pid = _pool_project(client)
    for a, b in BOTH:
        for who, value in (("ann", "positive"), ("bo", "positive"), ("bad", "negative")):
            assert label(client, pid, a, b, value, annotator=who).status_code == 201
    for a, b in ONE_ON_ONE:
        assert label(client, pid, a, b, annotator="ann").status_code == 201
        assert label(client, pid, a, b, "negative", annotator="bad").status_code == 201
    for a, b in BAD_ALONE:
        assert label(client, pid, a, b, "negative", annotator="bad").status_code == 201
    for a, b in BO_ALONE:
        assert label(client, pid, a, b, annotator="bo").status_code == 201
    return pid


def _answers(client: TestClient, pid: int) -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/answers?limit=1000")
    assert response.status_code == 200, response.text
    return [i for i in response.json()["items"] if i["retracted_at"] is None]


def _asserted(client: TestClient, pid: int) -> dict[tuple[str, str], bool]:
    items = client.get(f"/projects/{pid}/labels?source=asserted&limit=1000").json()["items"]
    return {(i["a"], i["b"]): i["label"] == "positive" for i in items}


def _offline(client: TestClient, pid: int, without: set[str]) -> dict[tuple[str, str], bool]:
    """The consensus of the live answers, ``without`` those annotators', run offline."""
    votes = [Vote(i["a"], i["b"], i["label"] == "positive", i["annotator"],
                  reviewer=i["role"] == "reviewer", order=i["id"])
             for i in _answers(client, pid) if i["annotator"] not in without]
    return dict(consensus(votes, NAMES).labels)


def _open(client: TestClient, pid: int) -> set[tuple[str, str]]:
    items = client.get(f"/projects/{pid}/disagreements").json()["items"]
    return {(i["a"], i["b"]) for i in items}


def _next(client: TestClient, pid: int, who: str, k: int = 1) -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/next?strategy=Random&k={k}&annotator={who}")
    assert response.status_code == 200, response.text
    return list(response.json()["queries"])


def test_excluding_recomputes_without_them_and_including_brings_them_back(
        client: TestClient) -> None:
    pid = _planted(client)
    before = _asserted(client, pid)
    assert before == _offline(client, pid, set())
    assert _open(client, pid) == set(ONE_ON_ONE)  # one against one: disputed
    response = client.post(f"/projects/{pid}/annotators/bad/exclude")
    assert response.status_code == 200, response.text
    body = response.json()
    after = _asserted(client, pid)
    assert after == _offline(client, pid, {"bad"}) != before
    assert not set(BAD_ALONE) & set(after)  # only bad's answers stood behind them
    assert body["changed"] and body["excluded"] and body["annotator"] == "bad"
    assert body["answers"] == len(BOTH) + len(ONE_ON_ONE) + len(BAD_ALONE)
    assert body["labels_retracted"] == len({p for p in before if after.get(p) != before[p]})
    assert body["labels_created"] == len({p for p in after if before.get(p) != after[p]})
    assert body["disagreements_closed"] == len(ONE_ON_ONE) and _open(client, pid) == set()
    closed = client.get(f"/projects/{pid}/disagreements?state=closed").json()["items"]
    assert {i["closed_reason"] for i in closed} == {"exclusion"}
    assert body["summary"].startswith("Excluded bad: 8 answers no longer count;")
    outcomes = {i["outcome"] for i in _answers(client, pid) if i["annotator"] == "bad"}
    assert outcomes == {"excluded"}  # kept, not counted
    rows = {r["annotator"]: r for r in client.get(f"/projects/{pid}/agreement").json()
            ["annotators"]}
    assert rows["bad"]["excluded"] and not rows["ann"]["excluded"]
    assert rows["bad"]["agreement"] == 0.0  # every answer against the others' consensus
    counts = {c["annotator"]: c for c in client.get(f"/projects/{pid}/annotators")
              .json()["items"]}
    assert counts["bad"]["excluded"] == 8 == counts["bad"]["answered"]

    again = client.post(f"/projects/{pid}/annotators/bad/exclude")
    assert again.status_code == 200 and not again.json()["changed"], again.text
    assert again.json()["summary"] == "bad was excluded already; nothing changed."
    assert _asserted(client, pid) == after

    back = client.delete(f"/projects/{pid}/annotators/bad/exclude")
    assert back.status_code == 200 and back.json()["changed"], back.text
    assert not back.json()["excluded"] and back.json()["answers"] == 8
    assert _asserted(client, pid) == _offline(client, pid, set()) == before
    assert _open(client, pid) == set(ONE_ON_ONE)
    assert "excluded" not in {i["outcome"] for i in _answers(client, pid)}
    assert not client.delete(f"/projects/{pid}/annotators/bad/exclude").json()["changed"]


def test_an_excluded_annotators_later_answers_are_kept_not_counted(client: TestClient) -> None:
    pid = _planted(client)
    assert client.post(f"/projects/{pid}/annotators/bad/exclude").status_code == 200
    labels = _asserted(client, pid)
    for a, b in (("c4", "c7"), ("c4", "c5")):  # a new pair, and one against bo's label
        response = label(client, pid, a, b, "negative", annotator="bad")
        assert response.status_code == 201, response.text
    assert _asserted(client, pid) == labels == _offline(client, pid, {"bad"})
    mine = [i for i in _answers(client, pid) if i["annotator"] == "bad"]
    assert len(mine) == 10 and {i["outcome"] for i in mine} == {"excluded"}
    assert _open(client, pid) == set()
    # included again, they count: (c4, c5) is one against one, (c4, c7) a label
    assert client.delete(f"/projects/{pid}/annotators/bad/exclude").status_code == 200
    assert _asserted(client, pid) == _offline(client, pid, set())
    assert ("c4", "c7") in _asserted(client, pid)
    assert _open(client, pid) == {*ONE_ON_ONE, ("c4", "c5")}


def test_an_excluded_annotator_gets_no_team_question(client: TestClient) -> None:
    pid = _planted(client)
    assert {q["reason"] for q in _next(client, pid, "cy")} == {"disagreement"}
    assert client.post(f"/projects/{pid}/annotators/bad/exclude").status_code == 200
    asked = _next(client, pid, "bad", k=5)
    assert asked and {q["reason"] for q in asked} == {"new"}
    answered = {(i["a"], i["b"]) for i in _answers(client, pid) if i["annotator"] == "bad"}
    assert not answered & {(q["a"], q["b"]) for q in asked}


def test_reask_serves_their_lone_pairs_to_the_others_as_second_opinions(
        client: TestClient) -> None:
    pid = _pool_project(client)
    for a, b in zip(NAMES[:4], NAMES[1:4], strict=False):
        assert label(client, pid, a, b, annotator="ann").status_code == 201
        assert label(client, pid, a, b, annotator="bo").status_code == 201
    for a, b in BAD_ALONE:
        assert label(client, pid, a, b, "negative", annotator="bad").status_code == 201
    assert label(client, pid, "c3", "c4", annotator="cy").status_code == 201
    response = client.post(f"/projects/{pid}/annotators/bad/reask")
    assert response.status_code == 200, response.text
    assert response.json()["pairs"] == len(BAD_ALONE) == response.json()["waiting"]
    assert response.json()["summary"].startswith("Re-asked 2 pairs only bad answered")
    assert client.post(f"/projects/{pid}/annotators/bad/reask").json()["pairs"] == 0
    # cy is excluded: no second opinion for cy; bad answered them: none for bad
    assert client.post(f"/projects/{pid}/annotators/cy/exclude").status_code == 200
    for who in ("bad", "cy"):
        assert not {(q["a"], q["b"]) for q in _next(client, pid, who, k=5)} & set(BAD_ALONE)
    [first] = _next(client, pid, "bo")
    assert (first["a"], first["b"]) == BAD_ALONE[0] and first["reason"] == "second-opinion"
    assert label(client, pid, *BAD_ALONE[0], "negative", annotator="bo").status_code == 201
    [second] = _next(client, pid, "ann")
    assert (second["a"], second["b"]) == BAD_ALONE[1] and second["reason"] == "second-opinion"
    assert label(client, pid, *BAD_ALONE[1], "negative", annotator="ann").status_code == 201
    asked = {(q["a"], q["b"]): q["reason"] for q in _next(client, pid, "dee", k=3)}
    assert "second-opinion" not in {asked.get(pair) for pair in BAD_ALONE}


def test_in_strict_both_are_409_and_an_unknown_annotator_404(client: TestClient) -> None:
    pid = new_project(client, NAMES)
    assert label(client, pid, "c0", "c1", annotator="ann").status_code == 201
    for method, action in (("POST", "exclude"), ("DELETE", "exclude"), ("POST", "reask")):
        response = client.request(method, f"/projects/{pid}/annotators/ann/{action}")
        body = assert_problem(response, 409, "consensus-only")
        assert "consensus" in body["detail"] and "strict" in body["detail"]
    pid = _pool_project(client)
    for method, action in (("POST", "exclude"), ("DELETE", "exclude"), ("POST", "reask")):
        response = client.request(method, f"/projects/{pid}/annotators/nobody/{action}")
        assert_problem(response, 404, "annotator-not-found")


def test_an_annotator_key_may_not_act_the_reviewer_key_may(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(admin_key=ADMIN_KEY)
    made = client.post("/projects", json={"name": "team", "policy": "consensus"},
                       headers={"X-API-Key": ADMIN_KEY})
    pid, own = made.json()["id"], {"X-API-Key": made.json()["api_key"]}
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": n} for n in NAMES]},
                headers=own)
    ana = client.post(f"/projects/{pid}/annotator-keys", json={"annotator": "ana"},
                      headers=own).json()["api_key"]
    reviewer = client.post(f"/projects/{pid}/reviewer-key", headers=own).json()["reviewer_key"]
    assert label_as(client, pid, {"X-API-Key": ana}).status_code == 201
    for action in ("exclude", "reask"):
        response = client.post(f"/projects/{pid}/annotators/ana/{action}",
                               headers={"X-API-Key": ana})
        assert_problem(response, 403, "forbidden")
    response = client.post(f"/projects/{pid}/annotators/ana/exclude",
                           headers={"X-API-Key": reviewer})
    assert response.status_code == 200 and response.json()["changed"], response.text


def label_as(client: TestClient, pid: int, key: dict[str, str]) -> Any:
    return client.post(f"/projects/{pid}/labels", json={"a": "c0", "b": "c1",
                                                        "label": "positive"}, headers=key)


def test_the_project_export_keeps_exclusions_and_reasks(client: TestClient) -> None:
    pid = _planted(client)
    assert client.post(f"/projects/{pid}/annotators/bad/reask").json()["pairs"] == 2
    assert client.post(f"/projects/{pid}/annotators/bad/exclude").status_code == 200
    exported = client.get(f"/projects/{pid}/export?format=project")
    assert exported.status_code == 200, exported.text
    kinds = [json.loads(line)["kind"] for line in exported.text.splitlines()]
    assert kinds.count("exclusion") == 1 and kinds.count("reask") == 2
    copy = new_project(client)
    response = client.post(f"/projects/{copy}/import", content=exported.content,
                           headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 200, response.text
    assert _asserted(client, copy) == _asserted(client, pid) == _offline(client, copy, {"bad"})
    rows = {r["annotator"]: r for r in client.get(f"/projects/{copy}/agreement").json()
            ["annotators"]}
    assert rows["bad"]["excluded"]
    [first] = _next(client, copy, "bo")
    assert (first["a"], first["b"]) in BAD_ALONE and first["reason"] == "second-opinion"
    again = client.get(f"/projects/{copy}/export?format=project").text.splitlines()
    assert [line for line in again if '"exclusion"' in line or '"reask"' in line] == [
        line for line in exported.text.splitlines()
        if '"exclusion"' in line or '"reask"' in line]
