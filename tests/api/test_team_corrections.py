"""Nothing a team said is lost by a correction of the concepts (``consensus``).

A merge moves the merged concept's answers onto the kept one and computes the consensus again:
answers that now split 1:1 open a disagreement on the merged pair, and the merged concept's old
disagreement closes (reason ``merge``) and stays listed. Deleting a concept makes it a
tombstone: its answers stay in the history (retracted), its disagreements close (``deletion``),
the labels are a full recompute of the live answers without it, its name can be given again,
and the project export carries all of it back through an import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.services.team import live_answers, votes
from app.settings import Settings
from reasoning.consensus import consensus
from tests.api.conftest import assert_problem, label, new_project, without_quality
from tests.api.databases import database_from_template

NAMES = ["a", "b", "c", "f", "g"]


@pytest.fixture
def other_client(template: tuple[str, str], tmp_path: Path) -> Iterator[TestClient]:
    """A client of an app on a second, empty database."""
    folder = tmp_path / "other"
    folder.mkdir()
    with database_from_template(template, folder) as url, \
            TestClient(create_app(Settings(database_url=url))) as client:
        yield client


def _disagreements(client: TestClient, pid: int, state: str = "all") -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/disagreements", params={"state": state,
                                                                    "limit": 1000})
    assert response.status_code == 200, response.text
    return response.json()["items"]


def _asserted(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    items = client.get(f"/projects/{pid}/labels?source=asserted").json()["items"]
    return {(i["a"], i["b"]): i["label"] for i in items}


def _recomputed(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    """The labels a fresh consensus of the stored live answers gives, over the concepts
    the project lists."""
    with client.app.state.runtime.database.sessions() as session:
        rows = live_answers(session, pid)
    ids = {c["name"]: c["id"] for c in client.get(
        f"/projects/{pid}/concepts?limit=1000").json()["items"]}
    result = consensus(votes(rows), list(ids.values()))
    name = {v: k for k, v in ids.items()}
    return {(name[a], name[b]): "positive" if v else "negative"
            for (a, b), v in result.labels.items()}


def _answers(client: TestClient, pid: int) -> list[dict[str, Any]]:
    return client.get(f"/projects/{pid}/answers", params={"limit": 1000}).json()["items"]


def test_a_merge_recomputes_the_consensus_and_opens_where_the_answers_split(
        client: TestClient) -> None:
    pid = new_project(client, NAMES, policy="consensus")
    label(client, pid, "a", "f", annotator="ann")  # alone: asserted
    label(client, pid, "a", "g", "negative", annotator="bob")  # alone: asserted
    for who in ("ann", "bob"):  # the two as reliable as each other
        label(client, pid, "b", "c", annotator=who)
    assert _disagreements(client, pid) == []
    assert _asserted(client, pid)[("a", "f")] == "positive"
    merged = client.post(f"/projects/{pid}/concepts/merge", json={"keep": "g", "merge": "f"})
    assert merged.status_code == 200, merged.text
    assert merged.json()["disagreements_opened"] == 1
    [item] = _disagreements(client, pid, "open")
    assert (item["a"], item["b"]) == ("a", "g")
    assert [x["annotator"] for x in item["positive"]] == ["ann"]
    assert [x["annotator"] for x in item["negative"]] == ["bob"]
    asserted = _asserted(client, pid)
    assert ("a", "g") not in asserted and asserted == {("b", "c"): "positive"}  # a tie
    assert asserted == _recomputed(client, pid)
    outcomes = {(x["a"], x["b"], x["annotator"]): x["outcome"] for x in _answers(client, pid)}
    assert outcomes[("a", "g", "ann")] == outcomes[("a", "g", "bob")] == "contested"


def test_a_merge_closes_the_merged_concepts_disagreement_with_its_reason(
        client: TestClient) -> None:
    pid = new_project(client, NAMES, policy="consensus")
    label(client, pid, "a", "f", annotator="ann")
    old = label(client, pid, "a", "f", "negative", annotator="bob").json()["disagreement"]
    label(client, pid, "a", "g", annotator="cy")  # after the merge: 2 yes against 1 no
    merged = client.post(f"/projects/{pid}/concepts/merge", json={"keep": "g", "merge": "f"})
    assert merged.status_code == 200, merged.text
    assert merged.json()["disagreements_closed"] == 1
    assert _disagreements(client, pid, "open") == []
    [closed] = _disagreements(client, pid, "all")
    assert closed["id"] == old["id"] and (closed["a"], closed["b"]) == ("a", "f")
    assert closed["state"] == "closed" and closed["closed_reason"] == "merge"
    assert closed["consensus"] is None and closed["proof"] == []
    read = client.get(f"/projects/{pid}/disagreements/{old['id']}")
    assert read.status_code == 200 and read.json()["closed_reason"] == "merge"
    assert _asserted(client, pid) == {("a", "g"): "positive"} == _recomputed(client, pid)


def test_a_merged_pair_that_still_splits_opens_anew_beside_the_closed_one(
        client: TestClient) -> None:
    pid = new_project(client, NAMES, policy="consensus")
    label(client, pid, "a", "f", annotator="ann")
    old = label(client, pid, "a", "f", "negative", annotator="bob").json()["disagreement"]
    client.post(f"/projects/{pid}/concepts/merge", json={"keep": "g", "merge": "f"})
    [now] = _disagreements(client, pid, "open")
    assert (now["a"], now["b"]) == ("a", "g") and now["id"] != old["id"]
    states = {d["id"]: (d["state"], d["closed_reason"]) for d in _disagreements(client, pid)}
    assert states == {old["id"]: ("closed", "merge"), now["id"]: ("open", None)}


def test_a_strict_merge_still_refuses_a_contradiction(client: TestClient) -> None:
    pid = new_project(client, NAMES)
    label(client, pid, "a", "f")
    label(client, pid, "a", "g", "negative")
    assert_problem(client.post(f"/projects/{pid}/concepts/merge",
                               json={"keep": "g", "merge": "f"}), 409, "contradiction")


def _team_with_f(client: TestClient) -> tuple[int, int]:
    """A consensus project where the answers on ``f`` split 1:1 (ties: no label on it)
    beside agreeing ones; the id of the disagreement on (a, f)."""
    pid = new_project(client, NAMES, policy="consensus")
    label(client, pid, "a", "f", annotator="ann")
    did = label(client, pid, "a", "f", "negative", annotator="bob").json()["disagreement"]["id"]
    label(client, pid, "f", "c", annotator="bob")
    label(client, pid, "f", "c", "negative", annotator="ann")
    for who in ("ann", "bob"):
        label(client, pid, "a", "b", annotator=who)
    label(client, pid, "b", "c", annotator="cy")
    return pid, did


def test_deleting_a_concept_keeps_its_answers_and_recomputes_without_them(
        client: TestClient) -> None:
    pid, did = _team_with_f(client)
    before = {x["id"]: x for x in _answers(client, pid)}
    on_f = {k for k, x in before.items() if "f" in (x["a"], x["b"])}
    deleted = client.delete(f"/projects/{pid}/concepts", params={"name": "f"})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["answers_kept"] == len(on_f) == 4
    after = {x["id"]: x for x in _answers(client, pid)}
    assert set(after) == set(before)  # every answer kept, named as it was
    for k in on_f:
        assert (after[k]["a"], after[k]["b"]) == (before[k]["a"], before[k]["b"])
        assert after[k]["retracted_at"] is not None
    assert all(after[k]["retracted_at"] is None for k in set(after) - on_f)
    names = [c["name"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]]
    assert "f" not in names
    assert_problem(client.get(f"/projects/{pid}/pairs/status", params={"a": "a", "b": "f"}),
                   422, "unknown-concept")
    gone = _disagreements(client, pid)
    assert [(d["a"], d["b"]) for d in gone] == [("a", "f"), ("f", "c")] and gone[0]["id"] == did
    assert {(d["state"], d["closed_reason"]) for d in gone} == {("closed", "deletion")}
    assert _asserted(client, pid) == _recomputed(client, pid)
    assert client.get(f"/projects/{pid}/labels?limit=1000").status_code == 200


def test_a_deleted_concepts_name_is_a_new_concept_when_given_again(client: TestClient) -> None:
    pid, _ = _team_with_f(client)
    old_id = next(c["id"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]
                  if c["name"] == "f")
    client.delete(f"/projects/{pid}/concepts", params={"name": "f"})
    again = client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "f"}]})
    assert again.status_code == 201 and again.json()["created"] == 1
    assert again.json()["concepts"][0]["id"] != old_id
    assert label(client, pid, "a", "f", annotator="dan").status_code == 201
    assert _asserted(client, pid)[("a", "f")] == "positive"  # the old answers count no more
    assert _asserted(client, pid) == _recomputed(client, pid)


def test_a_deleted_concept_comes_back_through_export_and_import(
        client: TestClient, other_client: TestClient) -> None:
    pid, _ = _team_with_f(client)
    client.delete(f"/projects/{pid}/concepts", params={"name": "f"})
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "f"}]})  # reused
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    records = [json.loads(line) for line in exported.splitlines()]
    [tombstone] = [r for r in records if r["kind"] == "deleted"]
    assert tombstone["name"].startswith("f (deleted ") and records[-1] == tombstone
    on_it = [r for r in records if r["kind"] == "answer"
             and tombstone["name"] in (r["a"], r["b"])]
    assert len(on_it) == 4 and all("retracted_at" in r for r in on_it)
    assert any(r["kind"] == "disagreement" and r.get("closed_reason") == "deletion"
               for r in records)
    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=exported.encode(),
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["concepts_deleted"] == 1
    again = other_client.get(f"/projects/{target}/export", params={"format": "project"}).text
    assert without_quality(again) == without_quality(exported)
    assert _asserted(other_client, target) == _asserted(client, pid)
    names = [c["name"] for c in other_client.get(f"/projects/{target}/concepts").json()["items"]]
    assert sorted(names) == sorted(NAMES)
