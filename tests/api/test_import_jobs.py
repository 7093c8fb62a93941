"""Imports as jobs: 202 on `Prefer: respond-async` or over SPORAL_IMPORT_ASYNC_BYTES, the job's
result (the synchronous summary) or problem, cancellation, the spool's life, the queue rules,
and the typed client that follows the job."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import pytest
from fastapi.testclient import TestClient

from app.services.importing import spooling as importing
from sporal_labelstudio.sporal_client import SporalClient, SporalError
from tests.api.conftest import assert_problem
from tests.api.test_jobs import ASYNC, wait_job

CONCEPTS = ["limit", "derivative", "integral", "series"]
FILE = "".join(json.dumps(r) + "\n" for r in [
    *({"kind": "concept", "name": name} for name in CONCEPTS),
    {"kind": "pair", "a": "limit", "b": "derivative", "features": [0.1, 0.2]},
    {"kind": "pair", "a": "derivative", "b": "integral", "features": [0.3, 0.4]},
    {"kind": "label", "a": "limit", "b": "derivative", "label": "positive"},
    {"kind": "label", "a": "derivative", "b": "integral", "label": "positive"},
]).encode()
BAD = FILE + b'{"kind": "label", "a": "limit", "b": "nowhere", "label": "positive"}\n'
JSONL = {"Content-Type": "application/jsonl"}


def _project(client: TestClient, name: str = "p") -> int:
    return int(client.post("/projects", json={"name": name}).json()["id"])


def _import(client: TestClient, pid: int, body: bytes, **headers: str) -> Any:
    return client.post(f"/projects/{pid}/import", content=body, headers={**JSONL, **headers})


def _counts(client: TestClient, pid: int) -> dict[str, int]:
    return dict(client.get(f"/projects/{pid}").json()["counts"])


def _spool_used(client: TestClient) -> int:
    budget = getattr(client.app.state, "import_spool", None)  # type: ignore[attr-defined]
    return 0 if budget is None else int(budget.used)


@pytest.fixture
def spools(monkeypatch: pytest.MonkeyPatch) -> list[IO[bytes]]:
    """Every spool the import route opens, to check that each is closed in the end."""
    made: list[IO[bytes]] = []
    real = importing.new_spool

    def recorded() -> IO[bytes]:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(importing, "new_spool", recorded)
    return made


class Hold:
    """Holds each import job at its first write step until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.reached = threading.Event()


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hold]:
    held = Hold()
    real = importing._job_progress

    def held_progress(work: Any, job: Any) -> Callable[[int, int], None]:
        progress = real(work, job)

        def step(count: int, total: int) -> None:
            held.reached.set()
            assert held.release.wait(30)
            progress(count, total)

        return step

    monkeypatch.setattr(importing, "_job_progress", held_progress)
    yield held
    held.release.set()


def _wait_state(client: TestClient, location: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        job = client.get(location).json()
        if job["state"] == state:
            return dict(job)
        assert time.monotonic() < deadline, job
        time.sleep(0.02)


def test_asked_an_import_is_a_job_whose_result_is_the_synchronous_summary(
        client: TestClient, spools: list[IO[bytes]]) -> None:
    sync_pid, job_pid = _project(client, "sync"), _project(client, "job")
    answer = _import(client, sync_pid, FILE)
    assert answer.status_code == 200 and "Preference-Applied" not in answer.headers
    accepted = _import(client, job_pid, FILE, **ASYNC)
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert accepted.headers["Preference-Applied"] == "respond-async"
    assert accepted.headers["Location"] == body["location"] == \
        f"/projects/{job_pid}/jobs/{body['id']}"
    assert body["kind"] == "import" and body["stored"] == {
        "received_bytes": len(FILE), "format": "jsonl"}
    job = wait_job(client, body["location"])
    assert job["state"] == "succeeded" and job["progress"] == 1.0, job
    assert job["result"] == answer.json()
    assert _counts(client, job_pid) == _counts(client, sync_pid)
    assert _spool_used(client) == 0 and len(spools) == 2 and all(s.closed for s in spools)


def test_a_file_over_the_threshold_is_a_job_without_asking(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(import_async_bytes=len(FILE) - 1)
    pid = _project(client)
    accepted = _import(client, pid, FILE)
    assert accepted.status_code == 202 and "Preference-Applied" not in accepted.headers
    assert wait_job(client, accepted.headers["Location"])["result"]["concepts_created"] == 4
    at_threshold = make_client(import_async_bytes=len(FILE))
    again = _import(at_threshold, _project(at_threshold, "q"), FILE)
    assert again.status_code == 200 and again.json()["concepts_created"] == 4


def test_a_bad_file_is_the_jobs_problem_with_every_line_and_nothing_stored(
        client: TestClient, spools: list[IO[bytes]]) -> None:
    pid = _project(client)
    sync = _import(client, pid, BAD)
    assert_problem(sync, 422, "invalid-items")
    accepted = _import(client, pid, BAD, **ASYNC)
    assert accepted.status_code == 202
    job = wait_job(client, accepted.headers["Location"])
    assert job["state"] == "failed" and job["result"] is None
    problem = job["problem"]
    assert problem["status"] == 422 and problem["type"].endswith("/invalid-items")
    assert problem["errors"] == sync.json()["errors"] and problem["errors"][0]["line"] == 9
    assert problem["instance"] == accepted.headers["Location"]
    assert _counts(client, pid)["concepts"] == 0
    assert _spool_used(client) == 0 and all(s.closed for s in spools)


def test_an_unknown_project_is_404_and_its_spool_released(
        client: TestClient, spools: list[IO[bytes]]) -> None:
    assert_problem(_import(client, 999, FILE, **ASYNC), 404, "project-not-found")
    assert _spool_used(client) == 0 and spools and all(s.closed for s in spools)


def test_a_cancelled_import_stores_nothing_and_removes_its_spool(
        client: TestClient, hold: Hold, spools: list[IO[bytes]]) -> None:
    pid = _project(client)
    location = _import(client, pid, FILE, **ASYNC).headers["Location"]
    assert hold.reached.wait(20)  # running, inside its write transaction
    assert _spool_used(client) == len(FILE)  # held while the job runs
    # the job holds the write lock: the cancel reaches it in memory, before its own write
    answers: list[Any] = []
    cancelling = threading.Thread(target=lambda: answers.append(client.delete(location)))
    cancelling.start()
    runner = client.app.state.jobs  # type: ignore[attr-defined]
    deadline = time.monotonic() + 20
    while not runner._cancelling:
        assert time.monotonic() < deadline, "the cancel did not reach the job"
        time.sleep(0.01)
    hold.release.set()
    cancelling.join(30)
    assert answers and answers[0].status_code == 200, answers
    job = wait_job(client, location)
    assert job["state"] == "cancelled" and job["result"] is None, job
    assert _counts(client, pid)["concepts"] == 0 and _counts(client, pid)["asserted_labels"] == 0
    assert _spool_used(client) == 0 and spools[0].closed


def test_imports_queue_in_turn_and_a_cancelled_queued_one_releases_its_spool(
        make_client: Callable[..., TestClient], hold: Hold, spools: list[IO[bytes]]) -> None:
    client = make_client(import_stage_labels=1)  # held between two short writes
    pid = _project(client)
    first = _import(client, pid, FILE, **ASYNC).headers["Location"]
    assert hold.reached.wait(20)
    assert client.get(first).json()["state"] == "running"
    more = b'{"kind": "concept", "name": "sequence"}\n'
    second = _import(client, pid, more, **ASYNC).headers["Location"]
    third = _import(client, pid, b'{"kind": "concept", "name": "sum"}\n', **ASYNC)
    assert third.status_code == 202
    # neither supersedes the other: both wait their turn
    assert client.get(second).json()["state"] == "queued"
    assert client.delete(third.headers["Location"]).json()["state"] == "cancelled"
    assert spools[2].closed and _spool_used(client) == len(FILE) + len(more)
    hold.release.set()
    assert wait_job(client, first)["state"] == "succeeded"
    assert wait_job(client, second)["state"] == "succeeded"
    names = {c["name"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]}
    assert names == {*CONCEPTS, "sequence"}
    assert _spool_used(client) == 0 and all(s.closed for s in spools)


def _sporal(client: TestClient) -> SporalClient:
    return SporalClient(str(client.base_url), transport=client._transport)


def test_the_typed_client_imports_and_follows_the_job(client: TestClient) -> None:
    sync_pid, job_pid = _project(client, "sync"), _project(client, "job")
    seen: list[dict[str, Any]] = []
    with _sporal(client) as sporal:
        summary = sporal.import_file(sync_pid, FILE)
        assert summary["concepts_created"] == 4
        assert sporal.import_file(job_pid, FILE, respond_async=True,
                                  progress=seen.append) == summary
        assert seen and seen[-1]["state"] == "succeeded"
        with pytest.raises(SporalError) as failed:
            sporal.import_file(job_pid, BAD, respond_async=True)
        assert failed.value.status == 422 and failed.value.slug == "invalid-items"
        with pytest.raises(SporalError) as refused:
            sporal.import_file(job_pid, BAD)
        assert refused.value.status == 422
        csv = sporal.import_file(sync_pid, b"name\nsequence\n", fmt="csv", respond_async=True)
        assert csv["concepts_created"] == 1


def test_an_import_is_never_superseded_and_supersedes_nothing(client: TestClient) -> None:
    runner = client.app.state.jobs  # type: ignore[attr-defined]
    pid = _project(client)
    release, cleaned = threading.Event(), []

    def blocked(job: Any) -> dict[str, Any]:
        assert release.wait(30)
        return {}

    def done(job: Any) -> dict[str, Any]:
        return {}

    running = runner.submit(pid, "recompute-features", blocked)
    _wait_state(client, running.location, "running")
    first = runner.submit(pid, "import", done, cleanup=lambda: cleaned.append("first"))
    recompute = runner.submit(pid, "recompute-features", done)
    newer = runner.submit(pid, "recompute-features", done)
    second = runner.submit(pid, "import", done, cleanup=lambda: cleaned.append("second"))
    states = {job.id: client.get(job.location).json()
              for job in (first, recompute, newer, second)}
    assert [states[j.id]["state"] for j in (first, recompute, newer, second)] == [
        "queued", "cancelled", "queued", "queued"]
    assert states[recompute.id]["reason"] == "superseded" and cleaned == []
    release.set()
    for job in (first, newer, second):
        assert wait_job(client, job.location)["state"] == "succeeded"
    assert cleaned == ["first", "second"]


def test_a_cancel_stops_the_import_while_it_validates(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, spools: list[IO[bytes]]) -> None:
    monkeypatch.setattr(importing, "YIELD_EVERY", 1)
    reached, release, steps = threading.Event(), threading.Event(), []
    real_source, real_progress = importing._job_source, importing._job_progress

    def held_source(source: Any, spool: Any, job: Any) -> Any:
        inner = real_source(source, spool, job)

        def records() -> Any:
            lines = inner()
            first = next(lines)
            reached.set()
            assert release.wait(30)
            yield first
            yield from lines

        return records

    def counted_progress(work: Any, job: Any) -> Any:
        progress = real_progress(work, job)

        def step(count: int, total: int) -> None:
            steps.append(count)
            progress(count, total)

        return step

    monkeypatch.setattr(importing, "_job_source", held_source)
    monkeypatch.setattr(importing, "_job_progress", counted_progress)
    pid = _project(client)
    location = _import(client, pid, FILE, **ASYNC).headers["Location"]
    assert reached.wait(20)
    assert client.delete(location).json()["cancel_requested"] is True
    release.set()
    job = wait_job(client, location)
    assert job["state"] == "cancelled" and job["message"] == "validating", job
    assert steps == []  # stopped before the first write
    assert _counts(client, pid)["concepts"] == 0
    assert _spool_used(client) == 0 and spools[0].closed
