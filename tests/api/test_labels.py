"""Labels: post, the already-asserted and already-inferred cases, contradictions with proofs,
bulk import, retraction, the listing, and the stored closure against the reasoning core."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from reasoning.closure import Closure
from reasoning.generate import random_order
from tests.api.conftest import assert_problem, label, new_project

CHAIN = ["a", "b", "c", "d"]


def _decided(client: TestClient, pid: int, **params: Any) -> dict[tuple[str, str], dict]:
    body = client.get(f"/projects/{pid}/labels", params={"limit": 10_000, **params}).json()
    items = {(i["a"], i["b"]): i for i in body["items"]}
    assert len(items) == len(body["items"]) == body["total"]
    return items


def test_a_label_answers_what_it_newly_decided(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    assert label(client, pid, "a", "b").status_code == 201
    response = label(client, pid, "b", "c", annotator="ann")
    assert response.status_code == 201
    body = response.json()
    assert (body["a"], body["b"], body["label"], body["annotator"]) == ("b", "c", "positive",
                                                                         "ann")
    decided = {(d["a"], d["b"], d["label"]) for d in body["decided"]}
    # Transitivity gives (a, c); rule (iv) the reversed pairs.
    assert decided == {("a", "c", "positive"), ("c", "a", "negative"), ("c", "b", "negative")}
    assert all(d["source"] == "inferred" for d in body["decided"])
    assert body["newly_decided"] == {"positive": 1, "negative": 2}


def test_a_negative_label_decides_its_product_set(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    label(client, pid, "a", "b")
    label(client, pid, "c", "d")
    body = label(client, pid, "b", "c", "negative").json()
    # A negative (u, v) spreads to D*(u) × A*(v) = {b} × {c}: nothing but itself.
    assert body["newly_decided"] == {"positive": 0, "negative": 0}
    body = label(client, pid, "a", "d", "negative").json()
    # D*(a) × A*(d) = {a, b} × {c, d}, less (a, d) itself and (b, c) already decided.
    assert {(d["a"], d["b"]) for d in body["decided"]} == {("a", "c"), ("b", "d")}


def test_a_pair_already_inferred_becomes_asserted_with_nothing_new(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    label(client, pid, "a", "b")
    label(client, pid, "b", "c")
    response = label(client, pid, "a", "c")
    assert response.status_code == 201
    assert response.json()["newly_decided"] == {"positive": 0, "negative": 0}
    item = _decided(client, pid)[("a", "c")]
    assert item["source"] == "asserted" and item["id"] == response.json()["id"]


def test_the_same_label_again_is_200_with_its_id(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    first = label(client, pid, "a", "b", annotator="x").json()
    again = label(client, pid, "a", "b", annotator="x")
    assert again.status_code == 200
    assert again.json()["id"] == first["id"] and again.json()["decided"] == []
    assert len(_decided(client, pid, source="asserted")) == 1


def test_the_same_label_by_another_annotator_is_a_new_answer_on_the_same_label(
        client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    first = label(client, pid, "a", "b", annotator="x").json()
    other = label(client, pid, "a", "b")  # anonymous: another annotator than x
    assert other.status_code == 201
    assert other.json()["id"] == first["id"] and other.json()["decided"] == []
    assert other.json()["answer_id"] != first["answer_id"]
    assert other.json()["annotator"] is None
    assert len(_decided(client, pid, source="asserted")) == 1


def test_a_contradiction_is_409_with_the_proof(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    ab = label(client, pid, "a", "b").json()["id"]
    bc = label(client, pid, "b", "c").json()["id"]
    problem = assert_problem(label(client, pid, "c", "a"), 409, "contradiction")
    assert sorted(p["id"] for p in problem["proof"]) == sorted([ab, bc])
    assert {(p["a"], p["b"], p["label"]) for p in problem["proof"]} == {
        ("a", "b", "positive"), ("b", "c", "positive")}
    problem = assert_problem(label(client, pid, "a", "b", "negative"), 409, "contradiction")
    assert [p["id"] for p in problem["proof"]] == [ab]
    assert len(_decided(client, pid, source="asserted")) == 2


def test_label_errors_name_what_is_wrong(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    problem = assert_problem(label(client, pid, "a", "nowhere"), 422, "unknown-concept")
    assert problem["unknown_concepts"] == ["nowhere"]
    assert_problem(label(client, pid, "a", "a"), 422, "invalid-label")
    for body in [{"a": "a", "b": "b", "label": "maybe"}, {"a": "a", "b": "b"},
                 {"a": "a", "b": "b", "label": True}, {"a": "a", "b": "b", "label": "positive",
                                                       "weight": 1},
                 {"a": "a", "b": "b", "label": "positive", "annotator": ""},
                 {"a": "a\x00", "b": "b", "label": "positive"}]:
        assert_problem(client.post(f"/projects/{pid}/labels", json=body), 422,
                       "validation-error")
    assert _decided(client, pid) == {}


def test_any_two_registered_concepts_can_be_labeled(client: TestClient) -> None:
    pid = new_project(client, CHAIN, [("a", "b", [1.0])])
    assert label(client, pid, "c", "d").status_code == 201  # not a pool pair


def test_bulk_import_applies_all(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    body = {"labels": [{"a": "a", "b": "b", "label": "positive"},
                       {"a": "b", "b": "c", "label": "positive", "annotator": "team"},
                       {"a": "a", "b": "c", "label": "positive"},  # inferred by the two above
                       {"a": "c", "b": "d", "label": "negative"}]}
    response = client.post(f"/projects/{pid}/labels/bulk", json=body)
    assert response.status_code == 201
    out = response.json()
    assert out["created"] == 4 and out["unchanged"] == 0
    assert [r["id"] is not None for r in out["labels"]] == [True] * 4
    decided = _decided(client, pid)
    assert decided[("a", "c")]["source"] == "asserted"
    assert decided[("b", "c")]["annotator"] == "team"
    again = client.post(f"/projects/{pid}/labels/bulk", json=body).json()
    assert again["created"] == 0 and again["unchanged"] == 4
    assert [r["id"] for r in again["labels"]] == [r["id"] for r in out["labels"]]
    assert _decided(client, pid) == decided


def test_bulk_import_with_contradictions_stores_nothing_and_lists_each(
        client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    stored = label(client, pid, "c", "d").json()["id"]
    body = {"labels": [{"a": "a", "b": "b", "label": "positive"},
                       {"a": "b", "b": "a", "label": "positive"},  # against item 0
                       {"a": "d", "b": "c", "label": "positive"},  # against the stored label
                       {"a": "b", "b": "c", "label": "positive"}]}
    problem = assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=body), 409,
                             "bulk-contradiction")
    listed = problem["contradictions"]
    assert [c["index"] for c in listed] == [1, 2]
    assert listed[0]["proof"] == [{"id": None, "index": 0, "a": "a", "b": "b",
                                   "label": "positive"}]
    # Absent values are null: a stored label is cited by id, with "index": null.
    assert listed[1]["proof"] == [{"id": stored, "index": None, "a": "c", "b": "d",
                                   "label": "positive"}]
    assert set(_decided(client, pid, source="asserted")) == {("c", "d")}


def test_bulk_import_errors(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    body = {"labels": [{"a": "a", "b": "ghost", "label": "positive"}]}
    problem = assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=body), 422,
                             "unknown-concept")
    assert problem["unknown_concepts"] == ["ghost"] and problem["errors"][0]["index"] == 0
    body = {"labels": [{"a": "a", "b": "b", "label": "positive"},
                       {"a": "c", "b": "c", "label": "negative"}]}
    problem = assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=body), 422,
                             "invalid-items")
    assert [e["index"] for e in problem["errors"]] == [1]
    assert _decided(client, pid) == {}


def test_retraction_recomputes_the_closure_from_the_remaining_labels(
        client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    ab = label(client, pid, "a", "b").json()["id"]
    label(client, pid, "b", "c")
    before = _decided(client, pid)
    response = client.delete(f"/projects/{pid}/labels/{ab}")
    assert response.status_code == 200
    body = response.json()
    after = _decided(client, pid)
    # (a, b) itself, (b, a), (a, c) and (c, a) lose their only derivation.
    assert body["id"] == ab and body["undecided"] == len(before) - len(after) == 4
    assert set(after) == {("b", "c"), ("c", "b")}
    assert_problem(client.delete(f"/projects/{pid}/labels/{ab}"), 404, "label-not-found")
    assert_problem(client.delete(f"/projects/{pid}/labels/999"), 404, "label-not-found")
    other = new_project(client, CHAIN)
    theirs = label(client, other, "a", "b").json()["id"]
    assert_problem(client.delete(f"/projects/{pid}/labels/{theirs}"), 404, "label-not-found")
    assert_problem(client.delete(f"/projects/{pid}/labels/0"), 422, "validation-error")
    # The retracted label can be asserted the other way now.
    assert label(client, pid, "b", "a").status_code == 201


def test_listing_filters_orders_and_pages(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    ab = label(client, pid, "a", "b").json()["id"]
    bc = label(client, pid, "b", "c").json()["id"]
    items = client.get(f"/projects/{pid}/labels").json()["items"]
    # Newest deciding label first, then by names.
    assert [(i["a"], i["b"]) for i in items] == [("a", "c"), ("b", "c"), ("c", "a"),
                                                  ("c", "b"), ("a", "b"), ("b", "a")]
    assert [i["caused_by"] for i in items] == [bc] * 4 + [ab] * 2
    assert {(i["a"], i["b"]) for i in items if i["source"] == "asserted"} == {("a", "b"),
                                                                            ("b", "c")}
    assert all((i["id"] is None) == (i["source"] == "inferred") for i in items)
    assert set(_decided(client, pid, source="inferred")) == {("a", "c"), ("c", "a"),
                                                              ("c", "b"), ("b", "a")}
    assert set(_decided(client, pid, label="positive")) == {("a", "b"), ("b", "c"), ("a", "c")}
    assert set(_decided(client, pid, source="asserted", label="negative")) == set()
    page = client.get(f"/projects/{pid}/labels", params={"limit": 2, "offset": 3}).json()
    assert page["total"] == 6 and [(i["a"], i["b"]) for i in page["items"]] == [
        ("c", "b"), ("a", "b")]
    client.delete(f"/projects/{pid}/labels/{ab}")
    history = _decided(client, pid, include_retracted="true")
    assert history[("a", "b")]["source"] == "retracted"
    assert history[("a", "b")]["retracted_at"] is not None
    for params in [{"limit": 10_001}, {"source": "guessed"}, {"label": "yes"},
                   {"offset": -1}, {"include_retracted": "perhaps"}]:
        assert_problem(client.get(f"/projects/{pid}/labels", params=params), 422,
                       "validation-error")


def test_stored_closure_equals_the_closure_of_the_asserted_labels(client: TestClient) -> None:
    order = random_order(24, 200, degree=1.5, depth=4, random_state=3)
    names = [f"concept {i}" for i in order.concepts]
    pid = new_project(client, names)
    rng = np.random.default_rng(0)
    posted = []
    for a, b, positive in order.sample_labels(60, random_state=1):
        response = label(client, pid, names[a], names[b], "positive" if positive else "negative")
        assert response.status_code in (200, 201)
        posted.append(response.json()["id"])
    for label_id in rng.choice(posted, size=5, replace=False):
        client.delete(f"/projects/{pid}/labels/{label_id}")
    asserted = _decided(client, pid, source="asserted")
    closure = Closure.from_labels(
        [(a, b, item["label"] == "positive") for (a, b), item in asserted.items()], names)
    expected = {(a, b): ("positive" if value else "negative")
                for a, b, value, _ in closure.decided()}
    stored = {pair: item["label"] for pair, item in _decided(client, pid).items()}
    assert stored == expected


def test_caused_by_is_the_first_label_deciding_the_pair_in_assertion_order(
        client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    ab = label(client, pid, "a", "b").json()["id"]
    cd = label(client, pid, "c", "d").json()["id"]
    bc = label(client, pid, "b", "c").json()["id"]
    decided = _decided(client, pid)
    assert decided[("a", "d")]["caused_by"] == bc
    assert decided[("b", "a")]["caused_by"] == ab and decided[("d", "c")]["caused_by"] == cd
    client.delete(f"/projects/{pid}/labels/{ab}")
    label(client, pid, "a", "b")
    decided = _decided(client, pid)
    # Replayed in assertion order, (a, d) is now decided by the newest label.
    assert decided[("b", "d")]["caused_by"] == bc
    assert decided[("a", "d")]["caused_by"] == decided[("a", "b")]["id"]
