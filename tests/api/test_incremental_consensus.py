"""Incremental consensus through the API: a contested answer repaired on its pair, listed
pending, within the documented bound of a full recompute until the background refit; equal
to it once the refit settled (docs/consensus.md, "Incremental consensus")."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.services.jobs import JobRunner
from app.services.labels.incremental import schedule_refit
from app.services.team import (
    counting,
    excluded_annotators,
    live_answers,
    pending_pairs,
    votes,
)
from models import AssertedLabel, Concept, Disagreement, Project
from reasoning.closure import Closure, Label
from reasoning.consensus import Consensus, consensus
from reasoning.consensus.incremental import pair_state
from tests.api.conftest import label, new_project

N = 8
TEAM = ("t0", "t1", "t2", "t3", "t4")
NAMES = [f"c{k}" for k in range(N)]


def _planted(client: TestClient, seed: int) -> tuple[int, np.random.Generator]:
    """A consensus project whose team (10% wrong) answered a planted order, by bulk."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(N)
    truth = Closure(range(N))
    for i, j in itertools.combinations(range(N), 2):
        a, b = int(perm[i]), int(perm[j])
        if rng.random() < 0.35 and truth.status(a, b).value is None:
            truth.add_label(a, b, True)
    items = []
    for a, b in itertools.permutations(range(N), 2):
        if rng.random() < 0.4:
            for who in rng.choice(len(TEAM), int(rng.integers(2, 4)), replace=False):
                value = bool(truth.status(a, b).value) ^ bool(rng.random() < 0.1)
                items.append({"a": NAMES[a], "b": NAMES[b], "annotator": TEAM[who],
                              "label": "positive" if value else "negative"})
    pid = new_project(client, NAMES, policy="consensus")
    response = client.post(f"/projects/{pid}/labels/bulk", json={"labels": items})
    assert response.status_code == 201, response.text
    return pid, rng


def _stored(client: TestClient, pid: int) -> tuple[dict, Consensus, set, set, int | None]:
    """The asserted labels, the full recompute of the live answers, the open disagreements'
    pairs, the pending pairs and ``consensus_as_of``, all by concept id."""
    with client.app.state.runtime.database.sessions() as session:
        labels = {(r.a_id, r.b_id): r.positive for r in session.scalars(
            select(AssertedLabel).where(AssertedLabel.project_id == pid,
                                        AssertedLabel.retracted_at.is_(None)))}
        rows = counting(live_answers(session, pid), excluded_annotators(session, pid))
        concepts = list(session.scalars(select(Concept.id).where(Concept.project_id == pid)))
        full = consensus(votes(rows), concepts)
        open_ = {(d.a_id, d.b_id) for d in session.scalars(select(Disagreement).where(
            Disagreement.project_id == pid, Disagreement.closed_at.is_(None)))}
        project = session.get(Project, pid)
        assert project is not None
        return labels, full, open_, set(pending_pairs(project)), project.consensus_as_of


def _contested(client: TestClient, pid: int, rng: np.random.Generator) -> dict[str, Any]:
    """One answer against the majority of a random answered pair, by a team member or a new
    annotator."""
    with client.app.state.runtime.database.sessions() as session:
        rows = live_answers(session, pid)
        name = dict(session.execute(select(Concept.id, Concept.name)
                                    .where(Concept.project_id == pid)).all())
    pairs = sorted({(r.a_id, r.b_id) for r in rows})
    a, b = pairs[int(rng.integers(len(pairs)))]
    yes = sum(1 if r.positive else -1 for r in rows if (r.a_id, r.b_id) == (a, b))
    who = ["new", *TEAM][int(rng.integers(len(TEAM) + 1))]
    response = label(client, pid, name[a], name[b], "negative" if yes >= 0 else "positive",
                     annotator=who)
    assert response.status_code in (200, 201), response.text
    return response.json()


def _settle(client: TestClient, pid: int) -> dict[str, Any]:
    """``POST labels/refit`` and wait for the job."""
    response = client.post(f"/projects/{pid}/labels/refit")
    assert response.status_code == 202, response.text
    location = response.headers["Location"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(location)
        if job.status_code == 404:  # ran and was swept: nothing to read
            return {}
        if job.json()["state"] in ("succeeded", "failed", "cancelled"):
            assert job.json()["state"] == "succeeded", job.json()
            return job.json()
        time.sleep(0.05)
    raise AssertionError("the refit did not finish")


@pytest.fixture
def local(make_client: Callable[..., TestClient]) -> TestClient:
    """A client whose every contested answer takes the local path."""
    return make_client(consensus_local_from=0)


@pytest.mark.parametrize("seed", range(4))
def test_before_the_refit_the_labels_stay_within_the_bound_and_after_it_are_exact(
        local: TestClient, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pid, rng = _planted(local, seed)
    before, first, _, pending, as_of = _stored(local, pid)
    assert before == first.labels and not pending and as_of is not None  # a full fit
    monkeypatch.setattr("app.routes.labels.schedule_refit", lambda *args, **kw: None)
    seen: set = set()
    for _ in range(8):
        body = _contested(local, pid, rng)
        labels, full, open_, pending, now_as_of = _stored(local, pid)
        assert now_as_of == as_of  # no refit ran
        assert body["consensus"]["pending"]  # the response lists what is pending
        assert seen <= pending and len(body["consensus"]["pending"]) == len(pending)
        seen = pending
        # outside the pending pairs: exactly the last full fit's labels
        assert {p: v for p, v in labels.items() if p not in pending} == {
            p: v for p, v in before.items() if p not in pending}
        assert Closure.closed([Label(a, b, v) for (a, b), v in labels.items()],
                              sorted({c for p in labels for c in p})) is not None
        # against a full recompute: only pending pairs, pairs answered both ways, gave way
        with local.app.state.runtime.database.sessions() as session:
            answers = votes(live_answers(session, pid))
        for pair in set(labels) | set(full.labels):
            if labels.get(pair) != full.labels.get(pair) and pair not in pending:
                on = [v for v in answers if (v.a, v.b) == pair]
                assert pair_state(on, full).split or pair in full.gave_way
    monkeypatch.undo()
    _settle(local, pid)
    labels, full, open_, pending, as_of = _stored(local, pid)
    assert labels == full.labels  # settled: the labels of a full recompute
    assert open_ == set(full.contested) and not pending
    listed = local.get(f"/projects/{pid}/labels").json()["consensus"]
    assert listed == {"as_of": as_of, "pending": []}
    # a contested answer schedules the refit itself
    _contested(local, pid, rng)
    assert local.app.state.jobs.idle(120)
    labels, full, open_, pending, _ = _stored(local, pid)
    assert labels == full.labels and open_ == set(full.contested) and not pending


def test_the_response_says_how_current_the_labels_are(local: TestClient) -> None:
    pid = new_project(local, ["a", "b", "c"], policy="consensus")
    assert label(local, pid, "a", "b", annotator="ann").json()["consensus"] is None  # fast
    items = [{"a": "b", "b": "c", "label": "positive", "annotator": who} for who in TEAM]
    assert local.post(f"/projects/{pid}/labels/bulk", json={"labels": items}).status_code == 201
    body = label(local, pid, "a", "b", "negative", annotator="bob").json()
    assert body["consensus"]["pending"] == [{"a": "a", "b": "b"}]
    assert body["disagreement"]["state"] == "opened"  # 1:1 is a tie: contested
    assert body["id"] > 0  # a tie retracts the label: held for the refit, contested
    listed = local.get(f"/projects/{pid}/labels").json()["consensus"]
    assert listed["pending"] in ([{"a": "a", "b": "b"}], [])  # the refit may have run
    _settle(local, pid)
    assert local.get(f"/projects/{pid}/labels").json()["consensus"]["pending"] == []


def test_small_projects_stay_on_the_exact_full_path(client: TestClient) -> None:
    pid, rng = _planted(client, 11)
    for _ in range(3):
        body = _contested(client, pid, rng)
        assert body["consensus"]["pending"] == []
        labels, full, open_, pending, _ = _stored(client, pid)
        assert labels == full.labels and open_ == set(full.contested) and not pending


def test_one_refit_waits_per_project(client: TestClient) -> None:
    runner = JobRunner(client.app.state.runtime.database, workers=0)  # never runs them
    pid = new_project(client, ["a", "b"], policy="consensus")
    runtime = client.app.state.runtime
    first = schedule_refit(runner, runtime, pid)
    second = schedule_refit(runner, runtime, pid)
    assert first is not None and second is not None and first.id == second.id
    runner.close()


def test_a_refit_waits_for_a_pause_in_the_answers_but_not_for_ever(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refit of a large project is seconds of CPU beside the team's posts: it waits
    until the newest answer is REFIT_QUIET old, at most REFIT_MAX_WAIT."""
    from app.services.labels import incremental

    slept: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(incremental.time, "sleep",
                        lambda seconds: (slept.append(seconds), real_sleep(seconds)))
    pid = new_project(client, ["a", "b", "c"], policy="consensus")
    database = client.app.state.runtime.database  # type: ignore[attr-defined]
    incremental.wait_quiet(database, pid, quiet=30.0, longest=30.0)
    assert slept == []  # no answer yet: nothing to wait for
    assert client.post(f"/projects/{pid}/labels", json={
        "a": "a", "b": "b", "label": "positive", "annotator": "ann"}).status_code == 201
    incremental.wait_quiet(database, pid, quiet=2.0, longest=30.0)
    assert slept and sum(slept) <= 2.0  # until the answer was 2 s old, no longer
    slept.clear()
    assert incremental.wait_quiet(database, pid, quiet=3600.0, longest=0.3) >= 0.3
    assert sum(slept) <= 0.3 + 1e-9  # capped at longest, however fresh the answer
    slept.clear()
    incremental.wait_quiet(database, pid, quiet=0.1, longest=30.0)
    assert slept == []  # quiet already


def test_the_agreement_view_judges_the_answers_given_since_the_last_full_fit(
        client: TestClient) -> None:
    """A new pair's first answer and an agreeing answer take no full fit; the agreement view
    judges them by the labels as they are now, not as undecided."""
    pid = new_project(client, ["a", "b", "c"], policy="consensus")
    for who, value in (("ann", "positive"), ("bo", "negative"), ("cy", "positive")):
        assert label(client, pid, "a", "b", value, annotator=who).status_code == 201
    before = client.get(f"/projects/{pid}/agreement").json()  # the view of that full fit
    assert {r["annotator"]: r["answers"] for r in before["annotators"]}["bo"] == 1
    for who in ("ann", "bo"):  # the first answer on (b, c), then an agreeing one
        assert label(client, pid, "b", "c", annotator=who).status_code == 201
    rows = {r["annotator"]: r for r in client.get(f"/projects/{pid}/agreement").json()
            ["annotators"]}
    assert rows["bo"]["answers"] == 2 and rows["bo"]["undecided"] == 0
    assert rows["bo"]["false_no"] == 1 and rows["bo"]["agreement"] == 0.5
    assert rows["ann"]["agreement"] == 1.0


def test_a_strict_project_has_no_consensus_to_refit(client: TestClient) -> None:
    from tests.api.conftest import assert_problem

    pid = new_project(client, ["a", "b"])
    problem = assert_problem(client.post(f"/projects/{pid}/labels/refit"), 409, "consensus-only")
    assert "'strict'" in problem["detail"]
    assert client.get(f"/projects/{pid}/jobs/1").status_code == 404  # no job made
