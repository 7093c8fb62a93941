"""Review a lead can follow: every resolution listed (who, when, what), undone and reopened by
the reviewer; every closed disagreement says why and when it closed; a resolution or an answer
whose refit closes other disagreements says how many; an answer names every disagreement it
opened or closed on its pair and on the reverse pair."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem, label, new_project

CONCEPTS = ["a", "b", "c", "d"]


def _items(client: TestClient, pid: int, state: str = "all") -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/disagreements", params={"state": state})
    assert response.status_code == 200, response.text
    return response.json()["items"]


def _disputed(client: TestClient) -> tuple[int, int]:
    """A consensus project whose pair (a, b) is answered once each way: one open."""
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    opened = label(client, pid, "a", "b", "negative", annotator="bob").json()
    assert opened["disagreement"]["state"] == "opened"
    return pid, opened["disagreement"]["id"]


def _step(client: TestClient, pid: int, did: int, step: str, **body: Any) -> Any:
    return client.post(f"/projects/{pid}/disagreements/{did}/{step}", json=body or None)


def _asserted(client: TestClient, pid: int) -> list[tuple[str, str, str]]:
    items = client.get(f"/projects/{pid}/labels", params={"source": "asserted"}).json()
    return sorted((i["a"], i["b"], i["label"]) for i in items["items"])


def test_every_resolution_is_listed_with_who_when_and_what(client: TestClient) -> None:
    pid, did = _disputed(client)
    first = _step(client, pid, did, "resolve", label="negative", annotator="rev")
    assert first.status_code == 200, first.text
    assert (first.json()["state"], first.json()["closed_reason"]) == ("closed", "reviewer")
    second = _step(client, pid, did, "resolve", label="positive", annotator="lee").json()
    assert second["consensus"] == "positive"
    one = client.get(f"/projects/{pid}/disagreements/{did}")
    assert one.status_code == 200, one.text
    resolutions = one.json()["resolutions"]
    assert [(r["annotator"], r["label"], r["undone_at"]) for r in resolutions] == [
        ("rev", "negative", None), ("lee", "positive", None)]
    assert resolutions[0]["resolved_at"] <= resolutions[1]["resolved_at"]
    reviewers = {i["id"]: i for i in client.get(f"/projects/{pid}/answers").json()["items"]
                 if i["role"] == "reviewer"}
    assert [r["answer_id"] for r in resolutions] == sorted(reviewers)
    assert [r["resolved_at"] for r in resolutions] == \
        [reviewers[r["answer_id"]]["created_at"] for r in resolutions]
    [listed] = _items(client, pid, "closed")
    assert listed == one.json()
    assert_problem(client.get(f"/projects/{pid}/disagreements/999"), 404,
                   "disagreement-not-found")


def test_undo_retracts_the_latest_resolution_and_the_consensus_decides_again(
        client: TestClient) -> None:
    pid, did = _disputed(client)
    _step(client, pid, did, "resolve", label="negative", annotator="rev")
    _step(client, pid, did, "resolve", label="positive", annotator="rev")
    assert _asserted(client, pid) == [("a", "b", "positive")]
    undone = _step(client, pid, did, "undo")
    assert undone.status_code == 200, undone.text
    body = undone.json()
    # the earlier resolution stands again: the pair is negative, the disagreement closed
    assert [r["undone_at"] is not None for r in body["resolutions"]] == [False, True]
    assert (body["state"], body["closed_reason"], body["consensus"]) == \
        ("closed", "reviewer", "negative")
    assert _asserted(client, pid) == [("a", "b", "negative")]
    retracted = [i for i in client.get(f"/projects/{pid}/answers").json()["items"]
                 if i["retracted_at"] is not None]
    assert [(i["id"], i["role"]) for i in retracted] == \
        [(body["resolutions"][1]["answer_id"], "reviewer")]
    # no resolution left: it opens again, and the answers (one each way) keep it open
    again = _step(client, pid, did, "undo").json()
    assert (again["state"], again["closed_at"], again["closed_reason"]) == ("open", None, None)
    assert [x["id"] for x in _items(client, pid, "open")] == [did]
    assert_problem(_step(client, pid, did, "undo"), 409, "review-conflict")


def test_a_retraction_that_settles_the_pair_closes_it_as_retraction(
        client: TestClient) -> None:
    pid, did = _disputed(client)
    bob = next(i["id"] for i in client.get(f"/projects/{pid}/answers").json()["items"]
               if i["annotator"] == "bob")
    assert client.delete(f"/projects/{pid}/answers/{bob}").status_code == 200
    [item] = _items(client, pid)
    assert (item["id"], item["state"], item["closed_reason"]) == (did, "closed", "retraction")
    assert item["closed_at"] >= item["opened_at"]


def test_an_answer_names_the_disagreement_of_the_reverse_pair(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "b", "a", annotator="bob")
    opened = label(client, pid, "a", "b", annotator="ann").json()
    [ref] = opened["disagreements"]
    assert ref["state"] == "opened" and (ref["a"], ref["b"]) == ("a", "b")
    # a second "yes" on (a, b): its own dispute closes, and bob's (b, a) now gives way
    settling = label(client, pid, "a", "b", annotator="cy").json()
    assert settling["disagreement"] == {"id": ref["id"], "state": "closed"}  # its own pair only
    states = {(d["a"], d["b"]): d["state"] for d in settling["disagreements"]}
    assert states == {("a", "b"): "closed", ("b", "a"): "opened"}
    [done] = [i for i in _items(client, pid, "closed") if i["id"] == ref["id"]]
    assert done["closed_reason"] == "answers"
    assert settling["closed_others"] == 0


def test_reopened_it_stays_open_until_a_reviewer_resolves_it(client: TestClient) -> None:
    pid, did = _disputed(client)
    _step(client, pid, did, "resolve", label="positive", annotator="rev")
    reopened = _step(client, pid, did, "reopen")
    assert reopened.status_code == 200, reopened.text
    body = reopened.json()
    assert (body["state"], body["closed_at"], body["closed_reason"]) == ("open", None, None)
    assert body["reopened_at"] is not None and len(body["resolutions"]) == 1
    assert _asserted(client, pid) == [("a", "b", "positive")]  # the labels do not change
    for who in ("cy", "dan", "eve"):  # answers that would settle it do not close it
        label(client, pid, "a", "b", annotator=who)
    assert [x["id"] for x in _items(client, pid, "open")] == [did]
    assert _step(client, pid, did, "reopen").json() == body | {
        "positive": _items(client, pid, "open")[0]["positive"]}  # open: left as it is
    closed = _step(client, pid, did, "resolve", label="negative", annotator="rev").json()
    assert (closed["state"], closed["closed_reason"], closed["reopened_at"]) == \
        ("closed", "reviewer", None)
    label(client, pid, "a", "b", annotator="fay")
    assert _items(client, pid, "open") == []


def test_reopening_is_refused_while_another_is_open_on_the_pair(client: TestClient) -> None:
    pid, did = _disputed(client)
    bob = next(i["id"] for i in client.get(f"/projects/{pid}/answers").json()["items"]
               if i["annotator"] == "bob")
    client.delete(f"/projects/{pid}/answers/{bob}")
    newer = label(client, pid, "a", "b", "negative", annotator="dan").json()["disagreement"]
    assert newer["state"] == "opened" and newer["id"] != did
    assert_problem(_step(client, pid, did, "reopen"), 409, "review-conflict")
    assert [x["id"] for x in _items(client, pid, "open")] == [newer["id"]]


def test_a_switch_to_strict_closes_them_as_policy_and_review_steps_need_consensus(
        client: TestClient) -> None:
    pid, did = _disputed(client)
    assert client.patch(f"/projects/{pid}", json={"policy": "strict"}).status_code == 200
    [item] = _items(client, pid)
    assert (item["id"], item["state"], item["closed_reason"]) == (did, "closed", "policy")
    assert_problem(_step(client, pid, did, "reopen"), 409, "review-conflict")
    assert_problem(_step(client, pid, did, "undo"), 409, "review-conflict")
    assert _items(client, pid, "open") == []


def test_a_resolution_and_its_undo_say_how_many_others_their_refit_opened_and_closed(
        client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    for a, b, value, who in [("a", "b", "positive", "eve"),  # one answer: asserted
                             ("b", "c", "positive", "ann"), ("b", "c", "negative", "bob"),  # tie
                             ("a", "c", "negative", "cy")]:  # no path forces (a, c) yet
        label(client, pid, a, b, value, annotator=who)
    [tie] = _items(client, pid, "open")
    assert (tie["a"], tie["b"]) == ("b", "c")
    # once the reviewer says b < c, eve's a < b and cy's "no" on (a, c) cannot both stand:
    # one of them gives way and is disputed
    body = _step(client, pid, tie["id"], "resolve", label="positive").json()
    opened = [i for i in _items(client, pid, "open") if i["id"] != tie["id"]]
    assert body["opened_others"] == len(opened) == 1 and body["closed_others"] == 0
    assert (opened[0]["a"], opened[0]["b"]) in {("a", "b"), ("a", "c")}
    undone = _step(client, pid, tie["id"], "undo").json()
    closed = [i for i in _items(client, pid, "closed") if i["id"] == opened[0]["id"]]
    assert undone["closed_others"] == len(closed) == 1
    assert closed[0]["closed_reason"] == "retraction"


def test_an_answer_says_how_many_others_its_refit_closed(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "b", "c", annotator="ann")
    label(client, pid, "a", "c", "negative", annotator="cy")
    before = {i["id"] for i in _items(client, pid, "open")}
    counts = [label(client, pid, "a", "b", "negative", annotator=who).json()["closed_others"]
              for who in ("dan", "eve", "fay")]
    gone = [i for i in _items(client, pid, "closed") if i["id"] in before
            and (i["a"], i["b"]) not in {("a", "b"), ("b", "a")}]
    assert sum(counts) == len(gone) >= 1
    assert {i["closed_reason"] for i in gone} == {"answers"}


def test_undo_and_reopen_need_the_reviewer_or_the_admin_key(
        make_client: Callable[..., TestClient]) -> None:
    keyed = make_client(admin_key=ADMIN_KEY)
    admin = {"X-API-Key": ADMIN_KEY}
    made = keyed.post("/projects", json={"name": "p", "policy": "consensus"}, headers=admin)
    pid, own = made.json()["id"], {"X-API-Key": made.json()["api_key"]}
    keyed.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "a"}, {"name": "b"}]},
               headers=own)
    for value, who in (("positive", "ann"), ("negative", "bob")):
        keyed.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": value,
                                                    "annotator": who}, headers=own)
    did = keyed.get(f"/projects/{pid}/disagreements", headers=own).json()["items"][0]["id"]
    reviewer = {"X-API-Key": keyed.post(f"/projects/{pid}/reviewer-key",
                                        headers=own).json()["reviewer_key"]}
    base = f"/projects/{pid}/disagreements/{did}"
    assert keyed.post(f"{base}/resolve", json={"label": "positive"},
                      headers=reviewer).status_code == 200
    for step in ("undo", "reopen"):
        assert_problem(keyed.post(f"{base}/{step}"), 401, "unauthorized")
        assert_problem(keyed.post(f"{base}/{step}", headers=own), 403, "forbidden")
    assert keyed.post(f"{base}/undo", headers=reviewer).json()["state"] == "open"
    keyed.post(f"{base}/resolve", json={"label": "negative"}, headers=admin)
    assert keyed.post(f"{base}/reopen", headers=admin).json()["state"] == "open"
    assert keyed.get(base, headers=own).json()["reopened_at"] is not None
