"""Start-up: the reasoning cache is rebuilt from the database before the first request."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api.conftest import label, new_project

NAMES = ["a", "b", "c", "d"]


def _project_with_labels(client: TestClient) -> int:
    pid = new_project(client, NAMES, [("a", "b", [0.0]), ("c", "d", [1.0])])
    label(client, pid, "a", "b")
    label(client, pid, "b", "c")
    first = label(client, pid, "c", "d").json()["id"]
    client.delete(f"/projects/{pid}/labels/{first}")
    return pid


def test_a_starting_process_builds_every_project_from_the_database(
        make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture) -> None:
    one = make_client()
    pids = [_project_with_labels(one), new_project(one, ["x"])]
    with caplog.at_level(logging.WARNING, logger="sporal"):
        two = make_client()  # a process started later on the same database
    registry = two.app.state.project_states  # type: ignore[attr-defined]
    for pid in pids:
        state = registry.cached(pid)  # before any request of the new process
        assert state is not None
        project = one.get(f"/projects/{pid}").json()
        assert state.version == project["version"]
        theirs = one.app.state.project_states.cached(pid)  # type: ignore[attr-defined]
        assert state.closure.asserted == theirs.closure.asserted
        assert set(state.closure.decided()) == set(theirs.closure.decided())
    assert any("reasoning cache built" in r.getMessage() and "2 project(s), 2 live label(s)"
               in r.getMessage() for r in caplog.records)
    # The warmed state answers like a fresh one.
    assert two.get(f"/projects/{pids[0]}/pairs/status",
                   params={"a": "a", "b": "c"}).json()["status"] == "positive"


def test_warm_up_can_be_switched_off(make_client: Callable[..., TestClient]) -> None:
    one = make_client()
    pid = _project_with_labels(one)
    two = make_client(warm_up=False)
    registry = two.app.state.project_states  # type: ignore[attr-defined]
    assert registry.cached(pid) is None
    assert two.get(f"/projects/{pid}/pairs/status",
                   params={"a": "a", "b": "c"}).json()["status"] == "positive"
    assert registry.cached(pid) is not None


def test_an_unmigrated_database_does_not_stop_start_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}")
    with caplog.at_level(logging.WARNING, logger="sporal"), \
            TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.get("/health").status_code == 200
    assert any("not built at start-up" in r.getMessage() for r in caplog.records)


def test_the_collector_never_sweeps_the_started_service_whole(client) -> None:  # type: ignore[no-untyped-def]
    """A full sweep of every object alive paused every request for 100-170 ms (measured with
    a few large projects cached): the service starts with young sweeps rare and what start-up
    built frozen out of them."""
    import gc

    from app.main import GC_THRESHOLDS

    assert client.get("/health").status_code == 200
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 10_000  # the modules and their objects
