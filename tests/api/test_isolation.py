"""Heavy work on one project never holds the database write lock that another project needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.services.labels.strict as writing
import app.services.queries as queries
from tests.api.conftest import label, new_project

WAIT = 60.0  # seconds a step may take at most: far above the work, even on a busy machine


def _two_projects(client: TestClient) -> tuple[int, int]:
    names = [f"c{i}" for i in range(5)]
    pairs = [(a, b, [float(i < j)]) for i, a in enumerate(names) for j, b in enumerate(names)
             if i != j]
    return new_project(client, names, pairs), new_project(client, names, pairs)


class Held:
    """Holds project A's heavy computation until released: no sleep, so no timing to lose."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def hold(self) -> None:
        self.entered.set()
        assert self.release.wait(WAIT), "never released"


def _while_held(held: Held, heavy: Callable[[], Any],
                other: Callable[[], Any]) -> tuple[bool, Any, Any]:
    """Start ``heavy`` and, while it is held inside its computation, run ``other``.

    Returns whether ``other`` answered while ``heavy`` was still held, and both answers.
    """
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.setdefault("heavy", heavy()))
    thread.start()
    try:
        assert held.entered.wait(WAIT), "the heavy request never reached its computation"
        probe = threading.Thread(target=lambda: done.setdefault("other", other()))
        probe.start()
        probe.join(WAIT)
        while_held = "other" in done and not held.release.is_set()
    finally:
        held.release.set()
        thread.join(WAIT)
    return while_held, done.get("other"), done.get("heavy")


@pytest.mark.parametrize("heavy_route", ["next", "label"])
def test_another_projects_label_does_not_wait_for_a_heavy_computation(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, heavy_route: str) -> None:
    a, b = _two_projects(client)
    held = Held()
    if heavy_route == "next":  # the gains of every candidate, held
        select = queries.select_rows

        def slow_select(*args: Any, **kwargs: Any) -> Any:
            held.hold()
            return select(*args, **kwargs)

        monkeypatch.setattr(queries, "select_rows", slow_select)

        def heavy() -> Any:
            return client.get(f"/projects/{a}/next", params={"k": 3})
    else:  # the closure of a label that decides a great many pairs, held
        within = writing.within_budget

        def slow_within(work: Any, *args: Any, **kwargs: Any) -> None:
            if work.state.project_id == a:
                held.hold()
            within(work, *args, **kwargs)

        monkeypatch.setattr(writing, "within_budget", slow_within)

        def heavy() -> Any:
            return label(client, a, "c0", "c1")

    while_held, answer, heavy_answer = _while_held(
        held, heavy, lambda: client.post(f"/projects/{b}/labels/bulk", json={"labels": [
            {"a": "c1", "b": "c2", "label": "positive"}]}))
    # Project B's write went through while A was still computing: A held no write lock (had
    # it, B would have waited for A's release, or been told the database was busy).
    assert while_held, "project B's label waited for project A's computation"
    assert answer is not None and answer.status_code == 201, answer and answer.text
    assert heavy_answer is not None and heavy_answer.status_code in (200, 201)


@dataclass
class Turns:
    """What :func:`_take_turns` saw: per hand-over, when the holder was about to commit, when
    it had let go of the lock and when the waiting writer began; and how long the writer that
    met the busy timeout waited."""

    committing: list[float]
    freed: list[float]
    began: list[float]
    busy_after: float


def _take_turns(tmp_path: Any) -> Turns:
    """Five writers each wait for a holder of the write lock; a sixth meets the busy timeout
    (0.6 s) while the holder holds the lock until told to let go."""
    from sqlalchemy.orm import Session

    from app.db import make_engine, migrate, write_transaction
    from app.errors import DatabaseBusy
    from app.settings import Settings

    url = f"sqlite:///{tmp_path}/writers.db"
    migrate(url)
    engine = make_engine(url, Settings(database_url=url, sqlite_busy_timeout_ms=600))
    held, release = threading.Event(), threading.Event()
    committing: list[float] = []
    freed: list[float] = []
    began: list[float] = []

    def hold(seconds: float | None) -> None:
        with Session(engine) as session:
            with write_transaction(session):
                held.set()
                if seconds is None:
                    assert release.wait(WAIT), "never released"
                else:
                    time.sleep(seconds)
                committing.append(time.perf_counter())
            freed.append(time.perf_counter())

    def write() -> None:
        with Session(engine) as session, write_transaction(session):
            began.append(time.perf_counter())

    try:
        # SQLite's naps (1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms) would wake these
        # writers 13-88 ms after the lock is free
        for seconds in (0.06, 0.09, 0.14, 0.19, 0.24):
            held.clear()
            holder = threading.Thread(target=hold, args=(seconds,))
            holder.start()
            assert held.wait(WAIT)
            write()
            holder.join(WAIT)
        held.clear()
        holder = threading.Thread(target=hold, args=(None,))
        holder.start()
        assert held.wait(WAIT)
        asked = time.perf_counter()
        with pytest.raises(DatabaseBusy):
            write()
        busy_after = time.perf_counter() - asked
        assert not release.is_set(), "told to retry only while the lock was held"
    finally:
        release.set()
        holder.join(WAIT)
        engine.dispose()
    return Turns(committing[:5], freed[:5], began, busy_after)


def test_writers_of_one_process_take_turns_and_past_the_busy_timeout_are_told_to_retry(
        tmp_path: Any) -> None:
    """Each waiting writer begins after the holder's commit, never beside it; the one that
    meets the busy timeout is told to retry after it, while the lock is still held."""
    turns = _take_turns(tmp_path)
    assert len(turns.began) == 5
    assert all(began > committing
               for began, committing in zip(turns.began, turns.committing, strict=True))
    assert turns.busy_after >= 0.5  # not before the busy timeout (a busy machine only adds)


@pytest.mark.slow  # wall-clock bounds: a loaded machine can break them, so not in the default
def test_writers_of_one_process_take_turns_without_sleeping(tmp_path: Any) -> None:
    """A writer that finds the write lock taken starts as soon as it is free (SQLite's own
    busy handler naps up to 100 ms at a time), and past the busy timeout it is told to retry
    soon after it."""
    turns = _take_turns(tmp_path)
    gaps = [began - freed for began, freed in zip(turns.began, turns.freed, strict=True)]
    assert max(gaps) < 0.02, gaps
    assert 0.5 < turns.busy_after < 1.4
