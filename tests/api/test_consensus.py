"""The consensus policy: every answer kept and none refused; the asserted labels and the
closure follow the consensus of the team's answers."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import assert_problem, label, new_project

CONCEPTS = ["a", "b", "c", "d"]


def _consensus_project(client: TestClient, concepts: list[str] = CONCEPTS, **fields: Any) -> int:
    return new_project(client, concepts, policy="consensus", **fields)


def _asserted(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    items = client.get(f"/projects/{pid}/labels?source=asserted&limit=1000").json()["items"]
    return {(i["a"], i["b"]): i["label"] for i in items}


def _decided(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    items = client.get(f"/projects/{pid}/labels?source=all&limit=1000").json()["items"]
    return {(i["a"], i["b"]): i["label"] for i in items}


def test_a_contradicting_answer_is_kept_not_refused(client: TestClient) -> None:
    strict = new_project(client, CONCEPTS)
    assert label(client, strict, "a", "b", annotator="ann").status_code == 201
    assert_problem(label(client, strict, "a", "b", "negative", annotator="bob"), 409,
                   "contradiction")
    pid = _consensus_project(client)
    first = label(client, pid, "a", "b", annotator="ann")
    assert first.status_code == 201
    second = label(client, pid, "a", "b", "negative", annotator="bob")
    assert second.status_code == 201, second.text
    body = second.json()
    assert body["answer_id"] > first.json()["answer_id"]
    assert body["disagreement"]["state"] == "opened"
    # a repeat of one's own latest answer is no new answer
    again = label(client, pid, "a", "b", "negative", annotator="bob")
    assert again.status_code == 200 and again.json()["answer_id"] is None
    # an answer against the closure is kept too
    assert label(client, pid, "b", "c", annotator="ann").status_code == 201
    assert label(client, pid, "c", "a", annotator="cy").status_code == 201
    assert label(client, pid, "a", "x").status_code == 422  # invalid input still is


def test_the_majority_of_reliable_annotators_wins(client: TestClient) -> None:
    pid = _consensus_project(client)
    for who in ("ann", "bob", "cy"):
        assert label(client, pid, "a", "b", annotator=who).status_code == 201
        assert label(client, pid, "c", "d", "negative", annotator=who).status_code == 201
    # dan disagrees with everyone, twice: dan's weight drops
    label(client, pid, "a", "b", "negative", annotator="dan")
    label(client, pid, "c", "d", annotator="dan")
    assert _asserted(client, pid)[("a", "b")] == "positive"
    assert _asserted(client, pid)[("c", "d")] == "negative"
    # a pair where dan stands against one reliable annotator and one more agrees with dan
    label(client, pid, "b", "d", annotator="ann")
    label(client, pid, "b", "d", "negative", annotator="dan")
    label(client, pid, "b", "d", annotator="bob")
    assert _asserted(client, pid)[("b", "d")] == "positive"
    # flipping a decided pair: a majority against the first answer changes the label
    label(client, pid, "a", "c", annotator="ann")
    for who in ("bob", "cy", "dan"):
        label(client, pid, "a", "c", "negative", annotator=who)
    assert _asserted(client, pid)[("a", "c")] == "negative"


def _posets(n: int) -> list[set[tuple[int, int]]]:
    """Every strict partial order on ``range(n)`` as its set of pairs."""
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    out = []
    for mask in range(1 << len(pairs)):
        rel = {p for k, p in enumerate(pairs) if mask >> k & 1}
        if any((j, i) in rel for i, j in rel):
            continue
        if all((i, k) in rel for i, j in rel for j2, k in rel if j == j2):
            out.append(rel)
    return out


POSETS = _posets(4)


def _brute_force(labels: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """The pairs every strict partial order that satisfies ``labels`` agrees on."""
    index = {c: k for k, c in enumerate(CONCEPTS)}
    want = [((index[a], index[b]), value == "positive") for (a, b), value in labels.items()]
    models = [rel for rel in POSETS if all((p in rel) == v for p, v in want)]
    assert models, "the asserted labels are consistent"
    out = {}
    for a, b in itertools.permutations(CONCEPTS, 2):
        pair = (index[a], index[b])
        values = {pair in rel for rel in models}
        if len(values) == 1:
            out[(a, b)] = "positive" if values.pop() else "negative"
    return out


def test_the_closure_is_always_the_closure_of_the_asserted_labels(
        client: TestClient, make_client: Callable[..., TestClient]) -> None:
    rng = random.Random(7)
    pid = _consensus_project(client)
    truth = {("a", "b"), ("b", "c"), ("a", "c"), ("a", "d")}
    for step in range(40):
        a, b = rng.sample(CONCEPTS, 2)
        right = (a, b) in truth
        value = right if rng.random() > 0.3 else not right
        who = rng.choice(["ann", "bob", "cy", "dan", None])
        response = label(client, pid, a, b, "positive" if value else "negative", annotator=who)
        assert response.status_code in (200, 201), response.text
        if step % 5 == 4:
            asserted = _asserted(client, pid)
            assert _decided(client, pid) == _brute_force(asserted)
    # the stored closure (a fresh process reads it back) is the same
    again = make_client()
    assert _decided(again, pid) == _brute_force(_asserted(again, pid))
    assert _decided(again, pid) == _decided(client, pid)


def test_bulk_labels_in_consensus_are_answers_never_refused(client: TestClient) -> None:
    pid = _consensus_project(client)
    body = {"labels": [{"a": "a", "b": "b", "label": "positive", "annotator": "ann"},
                       {"a": "a", "b": "b", "label": "negative", "annotator": "bob"},
                       {"a": "a", "b": "b", "label": "negative", "annotator": "cy"},
                       {"a": "b", "b": "c", "label": "positive", "annotator": "ann"}]}
    response = client.post(f"/projects/{pid}/labels/bulk", json=body)
    assert response.status_code == 201, response.text
    assert _asserted(client, pid) == {("a", "b"): "negative", ("b", "c"): "positive"}
    counts = {c["annotator"]: c for c in client.get(f"/projects/{pid}/annotators").json()["items"]}
    assert counts["ann"]["answered"] == 2 and counts["bob"]["accepted"] == 1
    bad = client.post(f"/projects/{pid}/labels/bulk",
                      json={"labels": [{"a": "a", "b": "zz", "label": "positive"}]})
    assert_problem(bad, 422, "unknown-concept")


def _open(client: TestClient, pid: int) -> list[tuple[str, str]]:
    return [(d["a"], d["b"]) for d in client.get(
        f"/projects/{pid}/disagreements", params={"state": "open"}).json()["items"]]


def test_policy_change_both_ways(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS)
    assert label(client, pid, "a", "b", annotator="ann").status_code == 201
    for who in ("bob", "cy"):
        assert label(client, pid, "a", "b", "negative", annotator=who).status_code == 409
    assert _asserted(client, pid) == {("a", "b"): "positive"}
    switched = client.patch(f"/projects/{pid}", json={"policy": "consensus"})
    assert switched.status_code == 200 and switched.json()["policy"] == "consensus"
    assert _asserted(client, pid) == {("a", "b"): "negative"}  # the refused answers counted
    assert label(client, pid, "b", "c", annotator="eve").status_code == 201
    assert label(client, pid, "b", "c", "negative", annotator="fay").status_code == 201
    assert _open(client, pid) == [("b", "c")]  # one against one, alike: in dispute
    kept = _asserted(client, pid)
    back = client.patch(f"/projects/{pid}", json={"policy": "strict"})
    assert back.json()["policy"] == "strict"
    assert _asserted(client, pid) == kept and _open(client, pid) == []
    assert_problem(label(client, pid, "a", "b", annotator="dan"), 409, "contradiction")


def test_delete_an_answer_in_strict(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS)
    first = label(client, pid, "a", "b", annotator="ann").json()
    second = label(client, pid, "a", "b", annotator="bob").json()
    gone = client.delete(f"/projects/{pid}/answers/{first['answer_id']}")
    assert gone.status_code == 200, gone.text
    assert _asserted(client, pid) == {("a", "b"): "positive"}  # bob still stands behind it
    last = client.delete(f"/projects/{pid}/answers/{second['answer_id']}")
    assert last.status_code == 200 and last.json()["undecided"] >= 1
    assert _asserted(client, pid) == {}
    assert_problem(client.delete(f"/projects/{pid}/answers/{first['answer_id']}"), 404,
                   "answer-not-found")
    assert_problem(client.delete(f"/projects/{pid}/answers/9999"), 404, "answer-not-found")


def test_delete_an_answer_and_a_label_in_consensus(client: TestClient) -> None:
    pid = _consensus_project(client)
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "a", "b", annotator="bob")
    against = label(client, pid, "a", "b", "negative", annotator="cy").json()
    assert _asserted(client, pid) == {("a", "b"): "positive"}
    second = label(client, pid, "a", "b", "negative", annotator="dan").json()
    third = label(client, pid, "a", "b", "negative", annotator="eve").json()
    assert _asserted(client, pid) == {("a", "b"): "negative"}
    for answer in (second, third):
        assert client.delete(f"/projects/{pid}/answers/{answer['answer_id']}").status_code == 200
    assert _asserted(client, pid) == {("a", "b"): "positive"}
    # DELETE of the label retracts every answer behind it: cy's negative alone remains
    label_id = client.get(f"/projects/{pid}/labels?source=asserted").json()["items"][0]["id"]
    assert client.delete(f"/projects/{pid}/labels/{label_id}").status_code == 200
    assert _asserted(client, pid) == {("a", "b"): "negative"}
    counts = {c["annotator"]: c for c in client.get(f"/projects/{pid}/annotators").json()["items"]}
    assert counts["ann"]["retracted"] == 1 and counts["bob"]["retracted"] == 1
    assert counts["cy"]["retracted"] == 0
    assert against["answer_id"]


def test_an_import_in_consensus_keeps_contradicting_labels_as_answers(
        client: TestClient) -> None:
    pid = _consensus_project(client)
    records = [{"kind": "label", "a": "a", "b": "b", "label": value, "annotator": who}
               for value, who in (("positive", "ann"), ("negative", "bob"),
                                  ("negative", "cy"))]
    records.append({"kind": "label", "a": "b", "b": "a", "label": "positive", "annotator": "dan"})
    body = "".join(json.dumps(r) + "\n" for r in records).encode()
    response = client.post(f"/projects/{pid}/import", content=body,
                           headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 200, response.text
    assert _asserted(client, pid) == {("a", "b"): "negative", ("b", "a"): "positive"}
    counts = {c["annotator"]: c["answered"]
              for c in client.get(f"/projects/{pid}/annotators").json()["items"]}
    assert counts == {"ann": 1, "bob": 1, "cy": 1, "dan": 1}
    strict = new_project(client, CONCEPTS)
    refused = client.post(f"/projects/{strict}/import", content=body,
                          headers={"Content-Type": "application/jsonl"})
    assert refused.status_code == 422


def test_idempotency_keys_keep_their_meaning_in_consensus(client: TestClient) -> None:
    pid = _consensus_project(client)
    label(client, pid, "a", "b", annotator="ann")
    body = {"a": "a", "b": "b", "label": "negative", "annotator": "bob"}
    key = {"Idempotency-Key": "k-1"}
    first = client.post(f"/projects/{pid}/labels", json=body, headers=key)
    assert first.status_code == 201, first.text
    again = client.post(f"/projects/{pid}/labels", json=body, headers=key)
    assert again.status_code == 201 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["answer_id"] == first.json()["answer_id"]
    counts = {c["annotator"]: c["answered"]
              for c in client.get(f"/projects/{pid}/annotators").json()["items"]}
    assert counts == {"ann": 1, "bob": 1}
