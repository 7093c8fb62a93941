"""Several processes on one database answer alike; writes to one project are serialized.

Two applications on the same database stand for two `sporal serve` processes: each has its own
reasoning cache and must catch up with the other's changes through the project's version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db import Database, write_transaction
from reasoning.closure import Closure
from reasoning.generate import random_order
from tests.api.conftest import label, new_project
from tests.api.databases import require_postgres

NAMES = ["a", "b", "c", "d", "e"]


def _decided(client: TestClient, pid: int) -> dict[tuple[str, str], str]:
    body = client.get(f"/projects/{pid}/labels", params={"limit": 10_000}).json()
    return {(i["a"], i["b"]): i["label"] for i in body["items"]}


def _status(client: TestClient, pid: int, a: str, b: str) -> str:
    return str(client.get(f"/projects/{pid}/pairs/status",
                          params={"a": a, "b": b}).json()["status"])


def test_a_second_process_catches_up_by_applying_new_labels(
        make_client: Callable[..., TestClient]) -> None:
    one, two = make_client(), make_client()
    pid = new_project(one, NAMES)
    label(one, pid, "a", "b")
    assert _status(two, pid, "b", "a") == "negative"  # two builds its cache
    state = two.app.state.project_states.get(pid)  # type: ignore[attr-defined]
    cached = state.closure
    label(one, pid, "b", "c")
    assert _status(two, pid, "a", "c") == "positive"
    assert state.closure is cached  # extended in place, not rebuilt
    # And the other way round: a label through two is known to one.
    label(two, pid, "c", "d")
    assert _status(one, pid, "a", "d") == "positive"


def test_a_retraction_elsewhere_makes_a_process_rebuild(
        make_client: Callable[..., TestClient]) -> None:
    one, two = make_client(), make_client()
    pid = new_project(one, NAMES)
    first = label(one, pid, "a", "b").json()["id"]
    label(one, pid, "b", "c")
    assert _status(two, pid, "a", "c") == "positive"
    state = two.app.state.project_states.get(pid)  # type: ignore[attr-defined]
    cached = state.closure
    one.delete(f"/projects/{pid}/labels/{first}")
    assert _status(two, pid, "a", "c") == "undecided"
    assert state.closure is not cached
    # Contradictions are judged on the caught-up closure: (b, a) is free again.
    assert label(two, pid, "b", "a").status_code == 201


def test_concurrent_writers_in_two_processes_lose_no_label(
        make_client: Callable[..., TestClient]) -> None:
    order = random_order(30, 300, degree=1.5, depth=4, random_state=7)
    names = [f"n{i}" for i in order.concepts]
    clients = [make_client(), make_client()]
    pid = new_project(clients[0], names)
    labels = order.sample_labels(120, random_state=8)
    acknowledged: list[tuple[str, str, bool]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def post(worker: int) -> None:
        client = clients[worker % 2]
        for a, b, positive in labels[worker::6]:
            response = label(client, pid, names[a], names[b],
                             "positive" if positive else "negative")
            with lock:
                if response.status_code in (200, 201):
                    acknowledged.append((names[a], names[b], positive))
                else:
                    failures.append(response.text)

    threads = [threading.Thread(target=post, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and len(acknowledged) == len(labels)
    stored = clients[1].get(f"/projects/{pid}/labels",
                            params={"source": "asserted", "limit": 10_000}).json()
    assert {(i["a"], i["b"]) for i in stored["items"]} == {(a, b) for a, b, _ in acknowledged}
    expected = Closure.from_labels(acknowledged, names)
    truth = {(a, b): "positive" if v else "negative" for a, b, v, _ in expected.decided()}
    assert _decided(clients[0], pid) == truth
    assert _decided(clients[1], pid) == truth


def test_postgres_writes_to_one_project_do_not_wait_for_another(
        database_url: str, make_client: Callable[..., TestClient]) -> None:
    require_postgres()
    client = make_client()
    busy, free = new_project(client, NAMES), new_project(client, NAMES)
    database = Database(database_url)
    try:
        with database.sessions() as session, write_transaction(session, busy):
            # `busy` stays locked while this transaction is open.
            session.execute(text("SET LOCAL lock_timeout = '20s'"))
            assert label(client, free, "a", "b").status_code == 201
            waiting = threading.Thread(target=lambda: label(client, busy, "a", "b"))
            waiting.start()
            assert _lock_waiters(database) == 1  # blocked on the project's row lock
            assert waiting.is_alive()
        waiting.join(timeout=30)
        assert not waiting.is_alive()
        assert _status(client, busy, "a", "b") == "positive"
    finally:
        database.dispose()


def _lock_waiters(database: Database) -> int:
    """Backends of this database waiting for a lock (polled until one shows up, ≤ 20 s)."""
    query = text("SELECT count(*) FROM pg_stat_activity "
                 "WHERE datname = current_database() AND wait_event_type = 'Lock'")
    for _ in range(200):
        with database.engine.connect() as conn:
            count = int(conn.execute(query).scalar_one())
        if count:
            return count
        threading.Event().wait(0.1)
    return 0


@pytest.mark.parametrize("retract", [False, True])
def test_caches_match_a_fresh_process(make_client: Callable[..., TestClient],
                                      retract: bool) -> None:
    old = make_client()
    pid = new_project(old, NAMES)
    ids = [label(old, pid, a, b).json()["id"] for a, b in [("a", "b"), ("b", "c"), ("d", "e")]]
    _decided(old, pid)
    if retract:
        old.delete(f"/projects/{pid}/labels/{ids[1]}")
    label(old, pid, "c", "d")
    fresh = make_client()
    assert old.get(f"/projects/{pid}").json() == fresh.get(f"/projects/{pid}").json()
    for a in NAMES:
        for b in NAMES:
            if a != b:
                assert _status(old, pid, a, b) == _status(fresh, pid, a, b)
