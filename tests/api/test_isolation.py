"""Heavy work on one project never holds the database write lock that another project needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.services.labels.strict as writing
import app.services.queries as queries
from tests.api.conftest import label, new_project

SLOW = 1.5  # seconds the heavy computation of project A takes in these tests


def _two_projects(client: TestClient) -> tuple[int, int]:
    names = [f"c{i}" for i in range(5)]
    pairs = [(a, b, [float(i < j)]) for i, a in enumerate(names) for j, b in enumerate(names)
             if i != j]
    return new_project(client, names, pairs), new_project(client, names, pairs)


def _while_slow(client: TestClient, heavy: Callable[[], Any],
                other: Callable[[], Any]) -> tuple[float, Any, Any]:
    """Start ``heavy`` (slow on purpose), then time ``other`` while it runs."""
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.setdefault("heavy", heavy()))
    thread.start()
    time.sleep(SLOW / 3)  # the heavy request is computing now
    started = time.perf_counter()
    answer = other()
    elapsed = time.perf_counter() - started
    thread.join(timeout=30)
    return elapsed, answer, done.get("heavy")


@pytest.mark.parametrize("heavy_route", ["next", "label"])
def test_another_projects_label_does_not_wait_for_a_heavy_computation(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, heavy_route: str) -> None:
    a, b = _two_projects(client)
    if heavy_route == "next":  # the gains of every candidate, slowed down
        select = queries.select_rows

        def slow_select(*args: Any, **kwargs: Any) -> Any:
            time.sleep(SLOW)
            return select(*args, **kwargs)

        monkeypatch.setattr(queries, "select_rows", slow_select)

        def heavy() -> Any:
            return client.get(f"/projects/{a}/next", params={"k": 3})
    else:  # the closure of a label that decides a great many pairs, slowed down
        within = writing.within_budget

        def slow_within(work: Any, *args: Any, **kwargs: Any) -> None:
            if work.state.project_id == a:
                time.sleep(SLOW)
            within(work, *args, **kwargs)

        monkeypatch.setattr(writing, "within_budget", slow_within)

        def heavy() -> Any:
            return label(client, a, "c0", "c1")

    elapsed, answer, heavy_answer = _while_slow(
        client, heavy, lambda: client.post(f"/projects/{b}/labels/bulk", json={"labels": [
            {"a": "c1", "b": "c2", "label": "positive"}]}))
    assert answer.status_code == 201, answer.text
    assert heavy_answer is not None and heavy_answer.status_code in (200, 201)
    # Project B's write went through while A was still computing: A held no write lock.
    assert elapsed < SLOW / 2, f"project B waited {elapsed:.2f} s for project A"


def test_writers_of_one_process_take_turns_without_sleeping(tmp_path: Any) -> None:
    """A writer that finds the write lock taken starts as soon as it is free (SQLite's own
    busy handler naps up to 100 ms at a time), and past the busy timeout it is told to retry."""
    from sqlalchemy.orm import Session

    from app.db import make_engine, migrate, write_transaction
    from app.errors import DatabaseBusy
    from app.settings import Settings

    url = f"sqlite:///{tmp_path}/writers.db"
    migrate(url)
    engine = make_engine(url, Settings(database_url=url, sqlite_busy_timeout_ms=600))
    held = threading.Event()
    freed: list[float] = []
    started: list[float] = []

    def hold(seconds: float) -> None:
        with Session(engine) as session:
            with write_transaction(session):
                held.set()
                time.sleep(seconds)
            freed.append(time.perf_counter())

    def write() -> None:
        with Session(engine) as session, write_transaction(session):
            started.append(time.perf_counter())

    try:
        # SQLite's naps (1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms) would wake these
        # writers 13-88 ms after the lock is free
        for seconds in (0.06, 0.09, 0.14, 0.19, 0.24):
            held.clear()
            holder = threading.Thread(target=hold, args=(seconds,))
            holder.start()
            held.wait()
            write()
            holder.join()
        gaps = [start - free for start, free in zip(started, freed, strict=True)]
        assert max(gaps) < 0.02, gaps
        holder = threading.Thread(target=hold, args=(1.5,))
        holder.start()
        held.wait()
        asked = time.perf_counter()
        with pytest.raises(DatabaseBusy):
            write()
        assert 0.5 < time.perf_counter() - asked < 1.4
        holder.join()
    finally:
        engine.dispose()
