"""The rows of docs/teams.md's table of cases that involve the service's disagreements, over
HTTP: when an answer opens a disagreement, ties left undecided and asked, and the consensus as
a function of the live answers only."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.services.team import live_answers, votes
from reasoning.consensus import consensus
from tests.api.conftest import label, new_project

CONCEPTS = ["a", "b", "c", "d"]


def _open(client: TestClient, pid: int) -> list[tuple[str, str]]:
    response = client.get(f"/projects/{pid}/disagreements?state=open")
    assert response.status_code == 200, response.text
    return [(d["a"], d["b"]) for d in response.json()["items"]]


def _status(client: TestClient, pid: int, a: str, b: str) -> dict:
    response = client.get(f"/projects/{pid}/pairs/status?a={a}&b={b}")
    assert response.status_code == 200, response.text
    return response.json()


def _asserted(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    items = client.get(f"/projects/{pid}/labels?source=asserted").json()["items"]
    return {(i["a"], i["b"]): i["label"] for i in items}


def test_one_against_one_is_a_tie_open_undecided_and_asked(client: TestClient) -> None:
    names = [f"c{k}" for k in range(4)]
    pairs = [(x, y, [float(i), float(j)]) for i, x in enumerate(names)
             for j, y in enumerate(names) if i != j]
    pid = new_project(client, names, pairs, policy="consensus")
    label(client, pid, "c0", "c1", annotator="ann")
    answer = label(client, pid, "c0", "c1", "negative", annotator="bob").json()
    assert answer["disagreement"]["state"] == "opened"
    status = _status(client, pid, "c0", "c1")
    assert status["status"] == "undecided" and status["source"] is None  # not asserted
    assert _asserted(client, pid) == {} and _open(client, pid) == [("c0", "c1")]
    query = client.get(f"/projects/{pid}/next?strategy=Random&annotator=cy").json()
    assert (query["queries"][0]["a"], query["queries"][0]["b"]) == ("c0", "c1")
    assert query["queries"][0]["reason"] == "disagreement"
    closed = label(client, pid, "c0", "c1", "negative", annotator="cy").json()
    assert closed["disagreement"]["state"] == "closed"
    assert _asserted(client, pid) == {("c0", "c1"): "negative"} and _open(client, pid) == []


def test_a_no_against_two_yes_is_decided_and_opens_nothing(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "a", "b", annotator="bob")
    answer = label(client, pid, "a", "b", "negative", annotator="cy").json()
    assert answer["disagreement"] is None
    assert _asserted(client, pid) == {("a", "b"): "positive"} and _open(client, pid) == []
    mine = client.get(f"/projects/{pid}/answers?annotator=cy").json()["items"]
    assert [x["outcome"] for x in mine] == ["contested"]  # the minority answer, listed


def test_one_against_one_rated_less_reliable_is_decided_and_stays_open(
        client: TestClient) -> None:
    pid = new_project(client, CONCEPTS + [f"u{k}" for k in range(4)], policy="consensus")
    for k in range(3):  # bob's record: against ann and cy on two of three pairs
        pair = (f"u{k}", f"u{k + 1}")
        label(client, pid, *pair, annotator="ann")
        label(client, pid, *pair, annotator="cy")
        label(client, pid, *pair, "negative" if k < 2 else "positive", annotator="bob")
    label(client, pid, "a", "b", annotator="ann")
    answer = label(client, pid, "a", "b", "negative", annotator="bob").json()
    assert answer["disagreement"]["state"] == "opened"
    assert _asserted(client, pid)[("a", "b")] == "positive"
    assert ("a", "b") in _open(client, pid)


def test_after_a_tie_strict_accepts_the_next_answer_on_the_pair(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "a", "b", "negative", annotator="bob")
    switched = client.patch(f"/projects/{pid}", json={"policy": "strict"})
    assert switched.status_code == 200, switched.text
    assert _open(client, pid) == []
    for value in ("negative",):  # the correct annotator's answer: accepted, not 409
        response = label(client, pid, "a", "b", value, annotator="cy")
        assert response.status_code == 201, response.text
    assert _asserted(client, pid) == {("a", "b"): "negative"}


def test_the_asserted_labels_are_the_consensus_of_the_live_answers(
        client: TestClient, make_client) -> None:
    """Fast and full paths, a retraction and a resolution: the labels are what a fresh
    consensus of the stored live answers gives (no model, no earlier fit enters it)."""
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "b", "c", annotator="ann")
    label(client, pid, "a", "b", "negative", annotator="bob")
    gone = label(client, pid, "b", "c", "negative", annotator="bob").json()["answer_id"]
    label(client, pid, "c", "d", annotator="cy")
    label(client, pid, "a", "c", "negative", annotator="cy")
    client.delete(f"/projects/{pid}/answers/{gone}")
    did = next(d["id"] for d in client.get(f"/projects/{pid}/disagreements").json()["items"]
               if (d["a"], d["b"]) == ("a", "b"))
    client.post(f"/projects/{pid}/disagreements/{did}/resolve", json={"label": "positive"})
    runtime = client.app.state.runtime
    with runtime.database.sessions() as session:
        rows = live_answers(session, pid)
    ids = {c["name"]: c["id"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]}
    result = consensus(votes(rows), list(ids.values()))
    name = {v: k for k, v in ids.items()}
    expected = {(name[a], name[b]): "positive" if v else "negative"
                for (a, b), v in result.labels.items()}
    assert _asserted(client, pid) == expected
    # a fresh process (no cached fit) reads the same labels
    assert _asserted(make_client(), pid) == expected


def test_pair_status_says_how_sure_a_decided_pair_is_and_whether_it_is_contested(
        client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    for who in ("ann", "bob"):
        label(client, pid, "a", "b", annotator=who)
        label(client, pid, "b", "c", annotator=who)
    label(client, pid, "a", "c", annotator="cy")  # a tie the closure decides
    label(client, pid, "a", "c", "negative", annotator="dan")
    ab, ac = _status(client, pid, "a", "b"), _status(client, pid, "a", "c")
    assert ab["source"] == "asserted" and 0.9 < ab["confidence"] < 1.0
    assert not ab["contested"]
    assert ac["source"] == "inferred" and ac["contested"] is True
    bc = _status(client, pid, "b", "c")
    assert ac["confidence"] == min(ab["confidence"], bc["confidence"])  # its proof's weakest
    assert _status(client, pid, "c", "a")["confidence"] == ac["confidence"]
    # the map's listing carries the same numbers: contested edges marked
    edges = {(i["a"], i["b"]): i for i in client.get(
        f"/projects/{pid}/labels?source=all&label=positive").json()["items"]}
    assert (edges[("a", "c")]["confidence"], edges[("a", "c")]["contested"]) == (
        ac["confidence"], True)
    assert edges[("a", "b")]["confidence"] == ab["confidence"]
    undecided = _status(client, pid, "c", "d")
    assert (undecided["confidence"], undecided["contested"]) == (None, False)
    # strict: a label no live answer contradicts is trusted
    client.patch(f"/projects/{pid}", json={"policy": "strict"})
    label(client, pid, "c", "d", annotator="eve")
    cd = _status(client, pid, "c", "d")
    assert (cd["confidence"], cd["contested"]) == (1.0, False)
    assert _status(client, pid, "a", "c")["contested"] is False  # disagreements closed
