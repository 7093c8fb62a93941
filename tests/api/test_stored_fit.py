"""The last full fit's accuracies kept with a ``consensus`` project: a process that holds no
fit (a restart, a second server) or an older one rebuilds it from them, with no EM
(docs/consensus.md, "Incremental consensus": several servers; a restart)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.services import team
from models import Project
from reasoning.consensus import Consensus
from tests.api.test_incremental_consensus import _contested, _planted, _settle

Client = Callable[..., TestClient]


def _fit(client: TestClient, pid: int) -> Consensus:
    """The full fit the client's process holds for the project."""
    state = client.app.state.runtime.registry.cached(pid)
    assert state is not None and state.team.fit is not None
    return state.team.fit


def _row(client: TestClient, pid: int) -> tuple[int | None, str | None]:
    with client.app.state.runtime.database.sessions() as session:
        project = session.get(Project, pid)
        assert project is not None
        return project.consensus_as_of, project.consensus_accuracy


def _stored(client: TestClient, pid: int) -> dict[str | None, float]:
    """The accuracies stored with the project, for the version of its last full fit."""
    as_of, record = _row(client, pid)
    assert record is not None
    found = json.loads(record)
    assert found["as_of"] == as_of
    return dict(found["accuracy"])


def _views(client: TestClient, pid: int) -> tuple[Any, Any]:
    """``GET agreement`` and an anonymous ``next`` (no lease: the same for every caller)."""
    agreement = client.get(f"/projects/{pid}/agreement")
    asked = client.get(f"/projects/{pid}/next?strategy=Random")
    assert agreement.status_code == 200 and asked.status_code == 200, asked.text
    view = agreement.json()
    assert view.pop("as_of")["current"] is True  # a small project's view: computed now
    return view, asked.json()["queries"]


def _no_em(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the full consensus the read model computes (it should not, with stored
    accuracies)."""
    calls: list[int] = []
    real = team.consensus

    def counted(*args: Any, **kwargs: Any) -> Consensus:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(team, "consensus", counted)
    return calls


def test_a_restarted_process_rebuilds_the_fit_and_takes_the_local_path(
        make_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    first = make_client(consensus_local_from=0)
    pid, rng = _planted(first, 2)  # the bulk is a full fit: its accuracies are stored
    held = _fit(first, pid)
    assert _stored(first, pid) == held.accuracy
    agreement, asked = _views(first, pid)
    assert asked and asked[0]["reason"] == "disagreement"  # the team's question

    second = make_client(consensus_local_from=0)  # a restart: a process holding no fit
    computed = _no_em(monkeypatch)
    assert _views(second, pid) == (agreement, asked)
    rebuilt = _fit(second, pid)
    assert computed == []  # rebuilt from the stored accuracies, no consensus run
    assert rebuilt.accuracy == held.accuracy and rebuilt.labels == held.labels
    assert set(rebuilt.contested) == set(held.contested)
    assert set(rebuilt.gave_way) == set(held.gave_way) and set(rebuilt.tied) == set(held.tied)

    third = make_client(consensus_local_from=0)  # its first request: a contested answer
    monkeypatch.setattr("app.routes.labels.schedule_refit", lambda *args, **kw: None)
    body = _contested(third, pid, rng)
    assert body["consensus"]["pending"], body  # the local path, not a full fit
    assert body["consensus"]["as_of"] == _row(first, pid)[0]
    assert computed == []


@pytest.mark.parametrize(("seed", "retracts"), [(6, False), (3, True)])
def test_a_process_takes_up_the_refit_of_another_one(
        make_client: Client, monkeypatch: pytest.MonkeyPatch, seed: int,
        retracts: bool) -> None:
    """The second process holds a fit; the first refits. A refit that retracts no label
    leaves the second one's state as it was (its fit then older than the stored one); one
    that retracts makes it rebuild its state (and forget its fit). Either way it reads the
    refit's accuracies, with no EM."""
    first = make_client(consensus_local_from=0)
    pid, rng = _planted(first, seed)
    second = make_client(consensus_local_from=0)
    _views(second, pid)
    old = _fit(second, pid).accuracy  # the bulk's fit, rebuilt
    monkeypatch.setattr("app.routes.labels.schedule_refit", lambda *args, **kw: None)
    for _ in range(6):
        assert _contested(first, pid, rng)["consensus"]["pending"]
    monkeypatch.undo()
    job = _settle(first, pid)  # the first process refits: new accuracies, a newer version
    assert (job["result"]["labels_retracted"] > 0) == retracts
    refitted = _stored(first, pid)
    assert refitted == _fit(first, pid).accuracy != old

    computed = _no_em(monkeypatch)
    agreement, asked = _views(second, pid)
    assert _fit(second, pid).accuracy == refitted  # not its own older fit any more
    assert computed == []
    assert (agreement, asked) == _views(first, pid)


@pytest.mark.parametrize("record", ["absent", "of-an-older-fit"])
def test_without_stored_accuracies_the_full_consensus_is_computed(
        make_client: Client, monkeypatch: pytest.MonkeyPatch, record: str) -> None:
    """A fit stored before the accuracies were kept (or by a server that does not keep
    them): the process computes the full consensus, and its first contested answer takes
    the full path, as before."""
    first = make_client(consensus_local_from=0)
    pid, rng = _planted(first, 2)
    held = _fit(first, pid)
    agreement, asked = _views(first, pid)
    as_of, stored = _row(first, pid)
    assert as_of is not None and stored is not None
    kept = None if record == "absent" else json.dumps({**json.loads(stored), "as_of": as_of - 1})
    with first.app.state.runtime.database.sessions() as session, session.begin():
        session.execute(update(Project).where(Project.id == pid)
                        .values(consensus_accuracy=kept))

    computed = _no_em(monkeypatch)
    second = make_client(consensus_local_from=0)
    assert _views(second, pid) == (agreement, asked)
    assert len(computed) == 1 and _fit(second, pid).accuracy == held.accuracy

    third = make_client(consensus_local_from=0)
    monkeypatch.setattr("app.routes.labels.schedule_refit", lambda *args, **kw: None)
    body = _contested(third, pid, rng)
    assert body["consensus"]["pending"] == []  # no fit to warm-start from: the full path
    assert _row(third, pid)[1] is not None  # which keeps its accuracies again
