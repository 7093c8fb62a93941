"""A team's bulk of answers (``POST labels/bulk`` and imports under ``consensus``): planned with
no lock held, switched in by one short write, the same rows as one answer's full path writes.

The per-row path is :func:`app.services.labels.change.run_change` (a full path stored by
``store_change``), which every other full-path event still takes: a bulk written both ways on
two projects with the same history leaves the same labels, answers, outcomes, disagreements
and stored closure. A write of another process is a second app on the same database (as in
``test_import_staged``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

import app.services.importing.writing as writing
import app.services.labels.team_bulk as team_bulk
from app.runtime import Runtime
from app.schemas import BulkLabelsCreated, LabelIn
from app.security import ANYONE
from app.services.importing import file_source, import_source
from app.services.labels.change import NewAnswer, TeamChange, plan_change, run_change
from app.services.labels.shared import resolve_bulk
from app.services.staging import StagePolicy
from app.services.unit import ProjectWork
from app.settings import Settings
from tests.api.conftest import label, new_project

CONCEPTS = [f"k{i}" for i in range(8)]
JSONL = {"Content-Type": "application/jsonl"}

# a history: labels, a disagreement, an excluded annotator
HISTORY = [("k0", "k1", "positive", "ann"), ("k1", "k2", "positive", "ann"),
           ("k0", "k1", "negative", "bob"), ("k3", "k4", "negative", "cy"),
           ("k2", "k3", "positive", "bob"), ("k5", "k6", "positive", "bad")]

# the bulk: agrees, contradicts what is asserted, settles and opens disagreements, answers
# new pairs, repeats one annotator's pair, and brings the excluded annotator's answers
BULK = [("k0", "k1", "positive", "cy"), ("k1", "k2", "negative", "bob"),
        ("k1", "k2", "negative", "cy"), ("k1", "k2", "negative", "dan"),
        ("k3", "k4", "positive", "ann"), ("k4", "k5", "positive", "ann"),
        ("k4", "k5", "positive", "bob"), ("k5", "k7", "negative", "dan"),
        ("k6", "k7", "positive", "cy"), ("k6", "k7", "negative", "dan"),
        ("k2", "k3", "negative", "bob"), ("k0", "k7", "positive", "bad"),
        ("k4", "k5", "negative", "cy"), ("k2", "k3", "positive", "dan")]


def items(rows: list[tuple[str, str, str, str]]) -> list[dict[str, str]]:
    return [{"a": a, "b": b, "label": value, "annotator": who} for a, b, value, who in rows]


def team_project(client: TestClient) -> int:
    """A ``consensus`` project with :data:`HISTORY`'s answers and ``bad`` excluded."""
    pid = new_project(client, concepts=CONCEPTS, policy="consensus")
    for a, b, value, who in HISTORY:
        assert label(client, pid, a, b, value, annotator=who).status_code in (200, 201)
    assert client.post(f"/projects/{pid}/annotators/bad/exclude").status_code == 200
    return pid


@contextmanager
def runtime_on(url: str) -> Iterator[Runtime]:
    """Another process on the test's database."""
    runtime = Runtime.start(Settings(database_url=url, warm_up=False))
    try:
        yield runtime
    finally:
        runtime.close()


def snapshot(url: str, pid: int) -> dict[str, Any]:
    """Every row of the project that a bulk writes, named by concept names and label
    positions (ids differ between projects): labels, answers, disagreements, closure."""
    engine = create_engine(url)
    try:
        with engine.connect() as db:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(row) for row in db.execute(text(sql), {"pid": pid})]

            name = dict(rows("SELECT id, name FROM concepts WHERE project_id = :pid"))
            labels = rows("SELECT id, a_id, b_id, positive, annotator, version, "
                          "retracted_at IS NULL, caused_by FROM asserted_labels "
                          "WHERE project_id = :pid ORDER BY id")
            pos = {row[0]: k for k, row in enumerate(labels)}
            return {
                "labels": [(name[a], name[b], bool(p), who, v, live, pos.get(cause))
                           for _, a, b, p, who, v, live, cause in labels],
                "answers": [(name[a], name[b], bool(p), who, role, source, outcome,
                             pos.get(label_id), live) for a, b, p, who, role, source, outcome,
                            label_id, live in rows(
                                "SELECT a_id, b_id, positive, annotator, role, source, "
                                "outcome, label_id, retracted_at IS NULL FROM answers "
                                "WHERE project_id = :pid ORDER BY id")],
                "disagreements": [(name[a], name[b], closed, reason) for a, b, closed, reason
                                  in rows("SELECT a_id, b_id, closed_at IS NULL, closed_reason "
                                          "FROM disagreements WHERE project_id = :pid "
                                          "ORDER BY id")],
                "closure": sorted((pos[k], bool(p), bool(r), name[line], bytes(bits), n)
                                  for k, p, r, line, bits, n in rows(
                                      "SELECT label_id, positive, by_row, line_id, bits, count "
                                      "FROM closure_effects WHERE project_id = :pid")),
                "version": rows("SELECT version FROM projects WHERE id = :pid")[0][0],
                "stages": rows("SELECT count(*) FROM import_stages")[0][0],
            }
    finally:
        engine.dispose()


def per_row(runtime: Runtime, pid: int, bulk: list[dict[str, str]], source: str) -> None:
    """The bulk as one full path stored the way one answer's is (``store_change``)."""
    with runtime.open(ProjectWork, pid) as work:
        body = [LabelIn.model_validate(item) for item in bulk]
        pairs = resolve_bulk(work.state, body)
        run_change(work, TeamChange(add=tuple(
            NewAnswer(a, b, item.positive, item.annotator, source)
            for item, (a, b) in zip(body, pairs, strict=True))))


def post_bulk(work: ProjectWork) -> BulkLabelsCreated:
    """:data:`BULK` posted in bulk through ``work``; the answer."""
    body = [LabelIn.model_validate(item) for item in items(BULK)]
    return team_bulk.post_team_bulk(work, body, resolve_bulk(work.state, body), "bulk").answer


def settled(runtime: Runtime, pid: int) -> bool:
    """Whether the stored labels are the consensus of the live answers (a full recompute
    changes nothing)."""
    with runtime.open(ProjectWork, pid) as work:
        plan = plan_change(work, TeamChange())
        return not plan.remove and not plan.add


def test_a_bulk_writes_what_the_per_row_path_writes(client: TestClient,
                                                    database_url: str) -> None:
    switched, per_rowed = team_project(client), team_project(client)
    before = snapshot(database_url, switched)
    response = client.post(f"/projects/{switched}/labels/bulk", json={"labels": items(BULK)})
    assert response.status_code == 201, response.text
    with runtime_on(database_url) as runtime:
        per_row(runtime, per_rowed, items(BULK), "bulk")
        assert settled(runtime, switched)
    after, expected = snapshot(database_url, switched), snapshot(database_url, per_rowed)
    assert after == expected
    # the bulk moved labels both ways, outcomes of stored answers and disagreements
    assert any(not live for *_, live, _ in after["labels"][:len(before["labels"])])
    assert len(after["labels"]) > len(before["labels"])
    assert after["answers"][:len(HISTORY)] != before["answers"]
    assert {outcome for *_, outcome, _, _ in after["answers"]} >= {
        "asserted", "agreed", "contested", "excluded"}
    assert len(after["disagreements"]) > len(before["disagreements"])
    body = response.json()
    assert body["created"] == sum(1 for row in after["labels"] if row[4] > before["version"])
    assert [(ref["a"], ref["b"], ref["label"]) for ref in body["labels"]] == [
        (a, b, value) for a, b, value, _ in BULK]
    live = {(i["a"], i["b"]): (i["id"], i["label"]) for i in client.get(
        f"/projects/{switched}/labels", params={"limit": 1000}).json()["items"]
        if i["source"] == "asserted"}
    assert [ref["id"] for ref in body["labels"]] == [
        live[(a, b)][0] if (a, b) in live else None for a, b, _, _ in BULK]


def test_a_bulk_into_a_project_without_answers_closes_like_the_per_row_path(
        client: TestClient, database_url: str) -> None:
    chain = [(f"k{i}", f"k{i + 1}", "positive", who) for i in range(7)
             for who in ("ann", "bob", "cy")] + [("k0", "k7", "negative", "dan")]
    switched = new_project(client, concepts=CONCEPTS, policy="consensus")
    per_rowed = new_project(client, concepts=CONCEPTS, policy="consensus")
    response = client.post(f"/projects/{switched}/labels/bulk", json={"labels": items(chain)})
    assert response.status_code == 201
    with runtime_on(database_url) as runtime:
        per_row(runtime, per_rowed, items(chain), "bulk")
    assert snapshot(database_url, switched) == snapshot(database_url, per_rowed)
    assert response.json()["newly_decided"] == {"positive": 28, "negative": 28}


def test_a_failure_in_the_switch_leaves_nothing_visible(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = team_project(client)
    before = snapshot(database_url, pid)
    listed = client.get(f"/projects/{pid}/answers").json()["items"]

    def crash(*args: Any, **kwargs: Any) -> None:  # the switch's last write
        raise RuntimeError("the disk is full")

    with runtime_on(database_url) as runtime:
        with monkeypatch.context() as patched, pytest.raises(RuntimeError, match="disk"):
            patched.setattr(team_bulk, "bulk_disagreements", crash)
            with runtime.open(ProjectWork, pid) as work:
                post_bulk(work)
        assert snapshot(database_url, pid) == before  # nothing staged: nothing to sweep
        assert client.get(f"/projects/{pid}/answers").json()["items"] == listed
        # the same process writes it whole afterwards: its cache was not left ahead
        with runtime.open(ProjectWork, pid) as work:
            answer = post_bulk(work)
        assert answer.created
        assert settled(runtime, pid)
    assert len(snapshot(database_url, pid)["answers"]) == len(HISTORY) + len(BULK)


def test_an_answer_of_another_process_during_the_plan_is_replanned_not_lost(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = team_project(client)
    planned: list[int] = []
    prepare = team_bulk.prepare

    def prepare_then_answer_elsewhere(work: ProjectWork, change: TeamChange) -> Any:
        bulk = prepare(work, change)
        planned.append(len(change.add))
        if len(planned) == 1:  # no lock is held while planning: the other process writes
            response = label(client, pid, "k6", "k7", "negative", annotator="eve")
            assert response.status_code == 201, response.text
        return bulk

    monkeypatch.setattr(team_bulk, "prepare", prepare_then_answer_elsewhere)
    with runtime_on(database_url) as runtime:
        with runtime.open(ProjectWork, pid) as work:
            post_bulk(work)
        assert settled(runtime, pid)
    assert planned == [len(BULK), len(BULK)]  # overtaken: planned again, under the lock
    answers = snapshot(database_url, pid)["answers"]
    assert len(answers) == len(HISTORY) + 1 + len(BULK)
    assert answers[len(HISTORY)][:4] == ("k6", "k7", False, "eve")  # the other's, kept live
    assert answers[len(HISTORY)][-1]


def test_a_bulk_with_an_idempotency_key_is_stored_once(client: TestClient,
                                                       database_url: str) -> None:
    pid = team_project(client)
    headers = {"Idempotency-Key": "bulk-1"}
    first = client.post(f"/projects/{pid}/labels/bulk", json={"labels": items(BULK)},
                        headers=headers)
    again = client.post(f"/projects/{pid}/labels/bulk", json={"labels": items(BULK)},
                        headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert len(snapshot(database_url, pid)["answers"]) == len(HISTORY) + len(BULK)


# ---------------------------------------------------------------------------- imports
def team_file(rows: list[tuple[str, str, str, str]], concepts: list[str]) -> bytes:
    lines = [json.dumps({"kind": "concept", "name": c}) for c in concepts]
    lines += [json.dumps({"kind": "label", "a": a, "b": b, "label": value, "annotator": who})
              for a, b, value, who in rows]
    return ("\n".join(lines) + "\n").encode()


def decided(client: TestClient, pid: int) -> list[tuple[Any, ...]]:
    """Every decided pair as ``GET labels`` lists it, without ids and times."""
    items = client.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    return [(i["a"], i["b"], i["label"], i["source"], i["annotator"], i["contested"])
            for i in items]


def run_import(runtime: Runtime, pid: int, body: bytes, policy: StagePolicy) -> Any:
    @contextmanager
    def opened() -> Iterator[io.BytesIO]:
        yield io.BytesIO(body)

    with runtime.open(ProjectWork, pid) as work:
        return import_source(work, file_source(opened, "jsonl"), caller=ANYONE, policy=policy)


@pytest.mark.parametrize("new_concepts", [False, True])
def test_a_consensus_import_is_planned_before_its_write_and_writes_the_same(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch,
        new_concepts: bool) -> None:
    """Staged (planned with no lock held, another process writes meanwhile) or in one
    transaction, the same file leaves the same rows; with concepts the file adds (named
    provisionally while planning) too."""
    extra = ["n0", "n1"] if new_concepts else []
    rows = BULK + [("k7", "n0", "positive", "ann"), ("n0", "n1", "positive", "bob"),
                   ("n0", "n1", "negative", "cy")] * bool(new_concepts)
    body = team_file(rows, CONCEPTS + extra)
    staged, atomic = team_project(client), team_project(client)
    other = new_project(client, concepts=["x", "y"])
    planned: list[bool] = []
    prepare = writing.prepare

    def prepare_while_another_writes(work: ProjectWork, change: TeamChange) -> Any:
        response = label(client, other, "x", "y")  # would wait for a held lock
        planned.append(response.status_code == 201)
        return prepare(work, change)

    with runtime_on(database_url) as runtime:
        with monkeypatch.context() as patched:
            patched.setattr(writing, "prepare", prepare_while_another_writes)
            summary = run_import(runtime, staged, body, StagePolicy(min_labels=1))
        assert planned == [True]
        whole = run_import(runtime, atomic, body, StagePolicy(min_labels=10**6))
        assert settled(runtime, staged)
    assert summary == whole
    assert summary.labels_created > 0 and summary.concepts_created == len(extra)
    assert snapshot(database_url, staged) == snapshot(database_url, atomic)
    # another process reads the same labels in both
    assert decided(client, staged) == decided(client, atomic)


def test_a_consensus_import_of_two_batches_is_written_in_one_transaction(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [json.dumps({"kind": "label", "a": a, "b": b, "label": value, "annotator": who,
                         "batch": k // 7}) for k, (a, b, value, who) in enumerate(BULK)]
    body = ("\n".join(lines) + "\n").encode()
    pid = team_project(client)
    plans: list[bool] = []
    prepare = team_bulk.prepare

    def spy(work: ProjectWork, change: TeamChange) -> Any:
        plans.append(work.in_transaction)
        return prepare(work, change)

    monkeypatch.setattr(team_bulk, "prepare", spy)
    with runtime_on(database_url) as runtime:
        summary = run_import(runtime, pid, body, StagePolicy(min_labels=1))
        assert settled(runtime, pid)
    assert plans == [True, True]  # two bulks, inside the file's one transaction
    assert summary.records == len(BULK)
    assert len(snapshot(database_url, pid)["answers"]) == len(HISTORY) + len(BULK)


def test_an_answer_of_another_process_while_an_import_plans_is_kept(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = team_project(client)
    planned: list[int] = []
    prepare = writing.prepare

    def prepare_then_answer_elsewhere(work: ProjectWork, change: TeamChange) -> Any:
        planned.append(len(change.add))
        if len(planned) == 1:  # the same project moves before the import's transaction
            response = label(client, pid, "k6", "k7", "negative", annotator="eve")
            assert response.status_code == 201, response.text
        return prepare(work, change)

    monkeypatch.setattr(writing, "prepare", prepare_then_answer_elsewhere)
    with runtime_on(database_url) as runtime:
        summary = run_import(runtime, pid, team_file(BULK, CONCEPTS), StagePolicy(min_labels=1))
        assert settled(runtime, pid)
    assert planned == [len(BULK), len(BULK)]  # planned again inside its transaction
    assert summary.labels_created > 0
    answers = snapshot(database_url, pid)["answers"]
    assert len(answers) == len(HISTORY) + 1 + len(BULK)
    assert answers[len(HISTORY)][:4] == ("k6", "k7", False, "eve") and answers[len(HISTORY)][-1]
