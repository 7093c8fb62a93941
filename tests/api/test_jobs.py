"""Feature recomputes as jobs (app.services.jobs, app.routes.jobs): 202, the queue rules,
cancellation, restarts, expiry and keys; and the typed client that follows them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session

from app.errors import InvalidItems
from app.main import create_app
from app.services import corpus
from app.settings import Settings
from models import utcnow
from models.tables import Job
from sporal_labelstudio.sporal_client import JobCancelled, JobTimeout, SporalClient, SporalError
from tests.api.conftest import ADMIN_KEY, assert_problem, new_project
from tests.api.test_corpus import CONCEPTS, LINKS, computed_project, expected, features_of

PAIRS = [("limit", "derivative"), ("derivative", "integral"), ("series", "limit")]
TEXTS = {c["name"]: c["text"] for c in CONCEPTS if "text" in c}
ASYNC = {"Prefer": "respond-async"}


def wait_job(client: TestClient, location: str, timeout: float = 30.0,
             **headers: str) -> dict[str, Any]:
    """Poll the job until it ends; its last state."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(location, headers=headers).json()
        if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return job
        time.sleep(0.02)


class Gate:
    """Holds every recompute job before it starts until released; counts the jobs started."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: list[int] = []
        self.running = threading.Event()

    def wait_running(self, count: int = 1) -> None:
        deadline = time.monotonic() + 30  # far above the work, even on a busy machine
        while len(self.started) < count:
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.01)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    real = corpus.recompute_features

    def blocked(runtime: Any, project_id: int, job: Any, answer: Any) -> Any:
        held.started.append(job.job_id)
        assert held.release.wait(30)
        return real(runtime, project_id, job, answer)

    monkeypatch.setattr(corpus, "recompute_features", blocked)
    yield held
    held.release.set()


@pytest.fixture
def large(make_client: Callable[..., TestClient]) -> TestClient:
    """A client for which every recompute is large enough to be a job."""
    return make_client(recompute_async_threshold=1)


def _link(client: TestClient, pid: int, source: str = "series", target: str = "limit",
          **headers: str) -> Any:
    return client.post(f"/projects/{pid}/links", json={"links": [
        {"source": source, "target": target}]}, headers=headers)


def test_a_large_recompute_is_a_job_and_the_pool_keeps_its_features_until_it_ends(
        large: TestClient, gate: Gate) -> None:
    pid = computed_project(large, PAIRS)
    before = features_of(large, pid)
    response = _link(large, pid)
    assert response.status_code == 202, response.text
    body = response.json()
    assert response.headers["location"] == body["location"] == f"/projects/{pid}/jobs/{body['id']}"
    assert "preference-applied" not in response.headers
    assert body["state"] in ("queued", "running") and body["features"] == "previous"
    assert body["stored"] == {"created": 1, "unchanged": 0, "recomputed_pairs": 0}
    assert {(link["source"], link["target"]) for link in large.get(
        f"/projects/{pid}/links").json()["items"]} == {*LINKS, ("series", "limit")}
    gate.wait_running()
    assert features_of(large, pid) == before  # the previous features until the job ends
    gate.release.set()
    job = wait_job(large, body["location"])
    assert job["state"] == "succeeded" and job["progress"] == 1.0, job
    assert job["result"] == {"created": 1, "unchanged": 0, "recomputed_pairs": 3}
    assert job["started_at"] and job["finished_at"] and job["problem"] is None
    got = features_of(large, pid)
    np.testing.assert_allclose([got[p] for p in PAIRS],
                               expected(TEXTS, [*LINKS, ("series", "limit")], PAIRS))


def test_small_recomputes_answer_as_before_unless_the_client_prefers_a_job(
        client: TestClient) -> None:
    pid = computed_project(client, PAIRS)
    response = _link(client, pid)
    assert response.status_code == 201
    assert response.content == b'{"created":1,"unchanged":0,"recomputed_pairs":3}'
    response = _link(client, pid, "integral", "series", **ASYNC)
    assert response.status_code == 202 and response.headers["preference-applied"] == \
        "respond-async"
    job = wait_job(client, response.headers["location"])
    assert job["result"] == {"created": 1, "unchanged": 0, "recomputed_pairs": 3}
    # Nothing to recompute (a known link): the answer is synchronous whatever is preferred.
    response = _link(client, pid, "integral", "series", **ASYNC)
    assert response.status_code == 201 and response.json()["unchanged"] == 1
    # Texts and renames follow the same contract.
    response = client.post(f"/projects/{pid}/concepts", headers=ASYNC, json={
        "concepts": [{"name": "series", "text": "A series sums a sequence of limits."}]})
    assert response.status_code == 202, response.text
    assert response.json()["stored"]["created"] == 0
    assert wait_job(client, response.headers["location"])["result"]["recomputed_pairs"] == 3
    response = client.post(f"/projects/{pid}/concepts/rename", headers=ASYNC,
                           json={"name": "series", "new_name": "sum"})
    assert response.status_code == 202, response.text
    assert response.json()["stored"]["name"] == "sum"
    assert wait_job(client, response.headers["location"])["state"] == "succeeded"
    response = client.delete(f"/projects/{pid}/links", headers=ASYNC,
                             params={"source": "integral", "target": "sum"})
    assert response.status_code == 202, response.text
    assert wait_job(client, response.headers["location"])["result"] == {
        "created": 1, "unchanged": 0, "recomputed_pairs": 3}


def test_one_job_runs_and_a_newer_one_supersedes_the_queued_one(
        large: TestClient, gate: Gate) -> None:
    pid = computed_project(large, PAIRS)
    first = _link(large, pid, "series", "limit").json()
    gate.wait_running()
    second = _link(large, pid, "series", "derivative").json()
    assert large.get(second["location"]).json()["state"] == "queued"
    third = _link(large, pid, "series", "integral").json()
    time.sleep(0.3)
    assert gate.started == [first["id"]]  # one job of the project runs at a time
    replaced = large.get(second["location"]).json()
    assert replaced["state"] == "cancelled" and replaced["reason"] == "superseded", replaced
    assert replaced["started_at"] is None
    gate.release.set()
    assert wait_job(large, first["location"])["state"] == "succeeded"
    done = wait_job(large, third["location"])
    assert done["state"] == "succeeded" and done["result"]["recomputed_pairs"] == 3
    assert gate.started == [first["id"], third["id"]]


def test_a_project_over_its_heavy_requests_gets_429_at_once(
        make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client(heavy_requests_per_project=1)
    pid = computed_project(client, PAIRS)
    other = computed_project(client, PAIRS)
    inside, release = threading.Event(), threading.Event()
    plan = corpus.plan_change

    def slow_plan(work: Any, *args: Any, **kwargs: Any) -> Any:
        if work.state.project_id == pid:
            inside.set()
            release.wait(30)
        return plan(work, *args, **kwargs)

    monkeypatch.setattr(corpus, "plan_change", slow_plan)
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(_link(client, pid)))
    thread.start()
    try:
        assert inside.wait(30)
        refused = _link(client, pid, "integral", "series")
        # at once: refused while the first is still held, not once it ended (it never ends
        # before the release below)
        assert thread.is_alive() and not answers
        assert_problem(refused, 429, "too-many-requests")
        assert refused.headers["retry-after"] == "1"
        assert _link(client, other).status_code == 201  # another project is not limited
    finally:
        release.set()
        thread.join(30)
    assert answers[0].status_code == 201
    assert _link(client, pid, "integral", "series").status_code == 201


def test_past_the_process_bound_a_heavy_request_gets_503_and_stores_nothing(
        make_client: Callable[..., TestClient], gate: Gate) -> None:
    client = make_client(recompute_async_threshold=1, max_jobs=1)
    pid = computed_project(client, PAIRS)
    other = computed_project(client, PAIRS)
    first = _link(client, pid)
    assert first.status_code == 202
    gate.wait_running()
    refused = _link(client, other)
    assert_problem(refused, 503, "jobs-busy")
    assert refused.headers["retry-after"] == "2"
    assert client.get(f"/projects/{other}/links").json()["total"] == len(LINKS)
    gate.release.set()
    assert wait_job(client, first.headers["location"])["state"] == "succeeded"
    assert _link(client, other).status_code == 202


def test_a_cancelled_queued_job_never_runs_and_a_running_one_stops(
        large: TestClient, gate: Gate) -> None:
    pid = computed_project(large, PAIRS)
    before = features_of(large, pid)
    running = _link(large, pid, "series", "limit").json()
    gate.wait_running()
    queued = _link(large, pid, "series", "derivative").json()
    cancelled = large.delete(queued["location"])
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["reason"] == "cancelled"
    asked = large.delete(running["location"]).json()
    assert asked["state"] == "running" and asked["cancel_requested"] is True
    gate.release.set()
    stopped = wait_job(large, running["location"])
    assert stopped["state"] == "cancelled" and stopped["result"] is None, stopped
    assert large.get(queued["location"]).json()["started_at"] is None
    assert gate.started == [running["id"]]
    assert features_of(large, pid) == before  # the links are stored, the features unchanged
    assert large.delete(running["location"]).json()["state"] == "cancelled"  # stays as it is
    assert_problem(large.get(f"/projects/{pid}/jobs/999999"), 404, "job-not-found")
    assert_problem(large.get(f"/projects/{pid}/jobs/{2**63}"), 422, "validation-error")


def test_the_jobs_of_a_deleted_project_end_quietly_and_the_runner_goes_on(
        large: TestClient, gate: Gate) -> None:
    pid = computed_project(large, PAIRS)
    _link(large, pid, "series", "limit")
    gate.wait_running()
    _link(large, pid, "series", "derivative")
    assert large.delete(f"/projects/{pid}").status_code == 204
    gate.release.set()
    other = computed_project(large, PAIRS)
    for _ in range(3):  # more jobs than threads: none of them died
        job = wait_job(large, _link(large, other, "series", "limit").headers["location"])
        assert job["state"] == "succeeded", job
        large.delete(f"/projects/{other}/links", params={"source": "series", "target": "limit"})


def _insert_job(database_url: str, pid: int, owner: str, state: str,
                seconds_ago: float = 0.0, finished: bool = False) -> int:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session, session.begin():
            when = utcnow() - timedelta(seconds=seconds_ago)
            job = Job(project_id=pid, kind="recompute-features", state=state, progress=0.5,
                      owner=owner, created_at=when, updated_at=when,
                      started_at=when if state == "running" else None,
                      finished_at=when if finished else None)
            session.add(job)
            session.flush()
            return job.id
    finally:
        engine.dispose()


def test_a_restart_marks_the_jobs_of_a_dead_process_failed(
        make_client: Callable[..., TestClient], database_url: str) -> None:
    client = make_client()
    pid = new_project(client, ["a", "b"])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = socket.gethostname()
    dead_running = _insert_job(database_url, pid, f"{host}:{gone}:x", "running")
    dead_queued = _insert_job(database_url, pid, f"{host}:{gone}:x", "queued")
    silent = _insert_job(database_url, pid, "elsewhere:1:y", "running", seconds_ago=3600)
    alive_here = _insert_job(database_url, pid, f"{host}:{os.getppid()}:z", "running")
    alive_there = _insert_job(database_url, pid, "elsewhere:2:w", "running")
    restarted = make_client()
    for job_id in (dead_running, dead_queued, silent):
        job = restarted.get(f"/projects/{pid}/jobs/{job_id}").json()
        assert job["state"] == "failed" and job["reason"] == "interrupted by a restart", job
        assert job["problem"]["type"] == "/problems/job-interrupted"
        assert job["finished_at"] is not None
    for job_id in (alive_here, alive_there):
        assert restarted.get(f"/projects/{pid}/jobs/{job_id}").json()["state"] == "running"


def test_a_shutdown_ends_its_queued_and_running_jobs_as_interrupted(
        make_client: Callable[..., TestClient], database_url: str, gate: Gate) -> None:
    settings = Settings(database_url=database_url, recompute_async_threshold=1)
    with TestClient(create_app(settings)) as first:
        pid = computed_project(first, PAIRS)
        running = _link(first, pid, "series", "limit").json()
        gate.wait_running()
        queued = _link(first, pid, "series", "derivative").json()
        threading.Timer(0.5, gate.release.set).start()  # while the server stops
    restarted = make_client()
    for job in (queued, running):
        ended = restarted.get(job["location"]).json()
        assert ended["state"] == "failed", ended
        assert ended["reason"] == "interrupted by a shutdown", ended
        assert ended["problem"]["type"] == "/problems/job-interrupted"


def test_finished_jobs_expire(make_client: Callable[..., TestClient],
                              database_url: str) -> None:
    client = make_client(job_ttl_seconds=60)
    pid = new_project(client, ["a", "b"])
    old = _insert_job(database_url, pid, "elsewhere:1:x", "succeeded", seconds_ago=120,
                      finished=True)
    recent = _insert_job(database_url, pid, "elsewhere:1:x", "succeeded", seconds_ago=5,
                         finished=True)
    assert_problem(client.get(f"/projects/{pid}/jobs/{old}"), 404, "job-not-found")
    assert client.get(f"/projects/{pid}/jobs/{recent}").json()["state"] == "succeeded"
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            assert session.scalars(select(Job.id)).all() == [recent]  # deleted, not hidden
            session.execute(update(Job).values(finished_at=utcnow() - timedelta(hours=1)))
            session.commit()
    finally:
        engine.dispose()
    other = computed_project(client, PAIRS)  # a submit sweeps every expired job
    assert _link(client, other, **ASYNC).status_code == 202
    assert_problem(client.get(f"/projects/{pid}/jobs/{recent}"), 404, "job-not-found")


def test_a_job_is_read_with_its_projects_key(make_client: Callable[..., TestClient]) -> None:
    admin = make_client(admin_key=ADMIN_KEY)
    admin.headers["X-API-Key"] = ADMIN_KEY
    created = [admin.post("/projects", json={"name": name}).json() for name in ("p", "q")]
    (pid, key), (qid, other_key) = [(p["id"], p["api_key"]) for p in created]
    admin.post(f"/projects/{pid}/concepts", json={"concepts": CONCEPTS})
    admin.post(f"/projects/{pid}/pairs", json={"pairs": [{"a": a, "b": b} for a, b in PAIRS]})
    response = _link(admin, pid, **ASYNC)
    assert response.status_code == 202, response.text
    location = response.headers["location"]
    del admin.headers["X-API-Key"]
    assert_problem(admin.get(location), 401, "unauthorized")
    assert_problem(admin.get(location, headers={"X-API-Key": other_key}), 403, "forbidden")
    assert_problem(admin.delete(location, headers={"X-API-Key": other_key}), 403, "forbidden")
    job_id = response.json()["id"]
    assert_problem(admin.get(f"/projects/{qid}/jobs/{job_id}",
                             headers={"X-API-Key": other_key}), 404, "job-not-found")
    job = wait_job(admin, location, **{"X-API-Key": key})
    assert job["state"] == "succeeded", job


# ---------------------------------------------------------------------------- the typed client
def _sporal(client: TestClient) -> SporalClient:
    return SporalClient(str(client.base_url), transport=client._transport)


def test_the_client_follows_the_job_and_returns_the_synchronous_answer(
        client: TestClient) -> None:
    pid = computed_project(client, PAIRS)
    seen: list[dict[str, Any]] = []
    with _sporal(client) as sporal:
        assert sporal.add_links(pid, [("series", "limit")], respond_async=True,
                                progress=seen.append) == {
            "created": 1, "unchanged": 0, "recomputed_pairs": 3}
        assert seen and seen[-1]["state"] == "succeeded" and seen[-1]["progress"] == 1.0
        # a synchronous answer is returned as it is
        assert sporal.add_links(pid, [("integral", "series")]) == {
            "created": 1, "unchanged": 0, "recomputed_pairs": 3}
        assert sporal.set_texts(pid, {"series": "Sums of sequences."},
                                respond_async=True)["recomputed_pairs"] == 3
        assert sporal.rename_concept(pid, "series", "sum", respond_async=True)["name"] == "sum"
        assert sporal.remove_link(pid, "integral", "sum", respond_async=True)["created"] == 1


def test_the_client_raises_the_jobs_problem_its_cancellation_or_a_timeout(
        client: TestClient, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = computed_project(client, PAIRS)
    with _sporal(client) as sporal:
        with pytest.raises(JobTimeout) as waited:
            sporal.add_links(pid, [("series", "limit")], respond_async=True, timeout=0.3)
        location = waited.value.job["location"]
        assert waited.value.job["state"] in ("queued", "running")
        cancelling = threading.Thread(target=lambda: client.delete(location))
        cancelling.start()
        cancelling.join()
        gate.release.set()
        with pytest.raises(JobCancelled):
            sporal.follow_job(location)

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise InvalidItems([{"index": 0, "reason": "broken"}], "links")

        monkeypatch.setattr(corpus, "recompute_features", failing)
        with pytest.raises(SporalError) as failed:
            sporal.add_links(pid, [("integral", "series")], respond_async=True)
        assert failed.value.status == 422 and failed.value.slug == "invalid-items"
        assert failed.value.problem["instance"].startswith(f"/projects/{pid}/jobs/")


def test_a_concepts_post_without_a_json_body_is_a_422_not_a_500(client: TestClient) -> None:
    pid = new_project(client, ["a"])
    for content in (b"", b"not json", b"[1, 2]"):
        response = client.post(f"/projects/{pid}/concepts", content=content,
                               headers={"Content-Type": "application/json", **ASYNC})
        assert_problem(response, 422, "validation-error")
