"""No request trains a model; answers name the newest model; one unit of work per request."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.services.labels.shared as asserting
import app.services.training as training
from tests.api.conftest import assert_problem, label, new_project

NAMES = [f"c{i}" for i in range(6)]
LC = {"strategy": "LC-R+"}  # a strategy whose model trains in the trainer thread


def _project(client: TestClient) -> int:
    pairs = [(a, b, [float(i < j), float(j - i)]) for i, a in enumerate(NAMES)
             for j, b in enumerate(NAMES) if i != j]
    pid = new_project(client, NAMES, pairs)
    label(client, pid, "c0", "c1")
    label(client, pid, "c4", "c2", "negative")
    return pid


@pytest.fixture
def trainings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the thread of every model fit, in order."""
    threads: list[str] = []
    fit = training._fit

    def recording(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return fit(*args)

    monkeypatch.setattr(training, "_fit", recording)
    yield threads


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Training waits until the test sets the event (a slow model, made deterministic)."""
    release = threading.Event()
    train = training.train

    def waiting(*args: Any) -> Any:
        release.wait(timeout=30)
        return train(*args)

    monkeypatch.setattr(training, "train", waiting)
    yield release
    release.set()


def test_no_request_trains_a_model(client: TestClient, trainings: list[str]) -> None:
    pid = _project(client)
    for _ in range(2):
        assert client.get(f"/projects/{pid}/next").status_code == 200  # EDP-F: extra trees
        assert client.get(f"/projects/{pid}/next", params=LC).status_code == 200
        assert client.get(f"/projects/{pid}/predictions").status_code == 200
        assert client.get(f"/projects/{pid}/pairs/status",
                          params={"a": "c2", "b": "c3"}).status_code == 200
    body = client.get(f"/projects/{pid}/predictions", params={"fresh": True}).json()
    assert body.get("model", {}).get("name") == "random_forest", body
    body = client.get(f"/projects/{pid}/next", params={"fresh": True}).json()
    assert body["model"]["name"] == "extra_trees", body
    body = client.get(f"/projects/{pid}/next", params=LC | {"fresh": True}).json()
    assert body["model"]["name"] == "logistic_regression", body
    # The fast strategy models train in the trainer thread, the forests in the worker process.
    assert trainings and set(trainings) == {"sporal-trainer"}
    assert training._workers is not None
    assert all(pid != os.getpid() for pid in training._workers._processes)


def test_answers_name_a_stale_model_and_how_far_behind_it_is(
        make_client: Callable[..., TestClient], held: threading.Event) -> None:
    client = make_client(fresh_timeout=0.3)
    pid = _project(client)
    # Nothing trained yet and training held back: p = 0.5, said as model null.
    assert client.get(f"/projects/{pid}/next", params=LC).json()["model"] is None
    problem = assert_problem(client.get(f"/projects/{pid}/next", params=LC | {"fresh": True}),
                             503,
                             "model-not-ready")
    assert problem["detail"].endswith("0.3 s")
    held.set()
    model = client.get(f"/projects/{pid}/next", params=LC | {"fresh": True}).json()["model"]
    assert model["labels_behind"] == 0
    held.clear()
    label(client, pid, "c1", "c3")
    label(client, pid, "c5", "c0", "negative")
    stale = client.get(f"/projects/{pid}/next", params=LC).json()["model"]
    assert stale == model | {"labels_behind": 2}
    retracted = client.get(f"/projects/{pid}/labels",
                           params={"source": "asserted", "limit": 1}).json()["items"][0]["id"]
    assert client.delete(f"/projects/{pid}/labels/{retracted}").status_code == 200
    assert client.get(f"/projects/{pid}/next", params=LC).json()["model"]["labels_behind"] == 3
    held.set()
    fresh = client.get(f"/projects/{pid}/next", params=LC | {"fresh": True}).json()["model"]
    assert fresh["labels_behind"] == 0 and fresh["version"] > model["version"]


def test_a_failure_after_the_closure_changed_invalidates_the_cache(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _project(client)
    state = client.app.state.project_states.get(pid)  # type: ignore[attr-defined]
    decided = len(state.closure)

    def failing(*args: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(asserting, "write_effects", failing)
    broken = client.__class__(client.app, raise_server_exceptions=False)
    response = broken.post(f"/projects/{pid}/labels",
                           json={"a": "c1", "b": "c2", "label": "positive"})
    assert response.status_code == 500
    assert state.version == -1  # add_label had changed the closure: the cache was dropped
    monkeypatch.undo()
    status = client.get(f"/projects/{pid}/pairs/status", params={"a": "c0", "b": "c2"}).json()
    assert status["status"] == "undecided"  # nothing of the failed label survived
    assert len(client.app.state.project_states.get(pid).closure) == decided  # type: ignore[attr-defined]
    assert label(client, pid, "c1", "c2").status_code == 201


def test_no_cached_state_for_a_project_that_does_not_exist(client: TestClient) -> None:
    registry = client.app.state.project_states  # type: ignore[attr-defined]
    before = len(registry)
    for pid in (987_654, 987_655):
        assert_problem(client.get(f"/projects/{pid}/next"), 404, "project-not-found")
        assert_problem(client.post(f"/projects/{pid}/labels",
                                   json={"a": "x", "b": "y", "label": "positive"}),
                       404, "project-not-found")
    assert len(registry) == before


def test_the_consistent_map_is_computed_once_per_model_and_decided_set(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.services.predicted_map as predicted_map

    calls: list[int] = []
    complete = predicted_map.consistent_map

    def counting(*args: Any) -> Any:
        calls.append(1)
        return complete(*args)

    monkeypatch.setattr(predicted_map, "consistent_map", counting)
    pid = _project(client)
    fresh = {"fresh": True, "consistent": True}
    first = client.get(f"/projects/{pid}/predictions", params=fresh).json()
    assert client.get(f"/projects/{pid}/predictions", params=fresh).json() == first
    assert client.get(f"/projects/{pid}/predictions",
                      params={**fresh, "limit": 3, "offset": 2}).status_code == 200
    assert len(calls) == 1
    label(client, pid, "c2", "c3")
    client.get(f"/projects/{pid}/predictions", params=fresh)
    assert len(calls) == 2
