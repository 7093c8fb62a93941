"""The agreement view of a large project (``SPORAL_AGREEMENT_JOB_FROM``): after new answers
a read serves the last view computed and says so, a job computes the view of the answers as
they are now, and a restarted process reads the stored view instead of computing it.

The threshold is set to 0 so that small planted projects take that path; the views are
compared with the one computed in the request (``fresh=true``) and with that of an app
below the threshold."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import app.services.agreement as agreement
from models import AgreementView
from models.tables import Job
from tests.api.conftest import label, new_project

TEAM = ("ann", "bo", "cy")


def _team(client: TestClient, policy: str) -> int:
    """A project of five concepts; three annotators answer a chain, ``cy`` wrong on one."""
    pid = new_project(client, ["a", "b", "c", "d", "e"], policy=policy)
    for who in TEAM:
        for a, b in (("a", "b"), ("b", "c"), ("c", "d")):
            value = "negative" if (who, a) == ("cy", "b") else "positive"
            response = label(client, pid, a, b, value, annotator=who)
            assert response.status_code in (200, 201, 409), response.text
    return pid


def _view(client: TestClient, pid: int, **params: Any) -> dict[str, Any]:
    response = client.get(f"/projects/{pid}/agreement", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _finished(client: TestClient, location: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(location).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            assert job["state"] == "succeeded", job
            return job
        time.sleep(0.05)
    raise AssertionError("the agreement job did not finish")


def _jobs(client: TestClient, pid: int) -> int:
    """The project's agreement jobs, every state."""
    with client.app.state.runtime.database.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Job).where(
            Job.project_id == pid, Job.kind == "agreement-view")) or 0)


def _bare(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "as_of"}


@pytest.fixture
def large(make_client: Callable[..., TestClient]) -> TestClient:
    """A client that treats every project as large (threshold 0)."""
    return make_client(agreement_job_from=0)


@pytest.mark.parametrize("policy", ["consensus", "strict"])
def test_after_answers_the_last_view_is_served_and_a_job_brings_it_up_to_date(
        large: TestClient, policy: str) -> None:
    pid = _team(large, policy)
    first = _view(large, pid)  # no view yet: computed in the request, and stored
    assert first["as_of"]["current"] is True and first["answers"] == 9
    for who in TEAM:
        assert label(large, pid, "d", "e", annotator=who).status_code in (200, 201)
    stale = _view(large, pid)
    assert stale["as_of"]["current"] is False
    assert _bare(stale) == _bare(first)  # the last view, said to be so
    assert stale["as_of"]["computed_at"] == first["as_of"]["computed_at"]
    for _ in range(5):  # one job queued per project (and the one running, if any)
        _view(large, pid)
    assert _jobs(large, pid) <= 2
    job = _finished(large, stale["as_of"]["job"])
    assert job["kind"] == "agreement-view" and job["result"]["answers"] == 12
    now = _view(large, pid)
    assert now["as_of"] == {**now["as_of"], "current": True, "job": None}
    assert now["answers"] == 12
    assert _bare(now) == _bare(_view(large, pid, fresh=True))  # as the request computes it


def test_fresh_computes_the_view_in_the_request(large: TestClient) -> None:
    pid = _team(large, "consensus")
    _view(large, pid)
    assert label(large, pid, "d", "e", annotator="ann").status_code == 201
    fresh = _view(large, pid, fresh=True)
    assert (fresh["as_of"]["current"], fresh["answers"]) == (True, 10)
    assert _jobs(large, pid) == 0


def test_a_restarted_process_serves_the_stored_view_without_computing_it(
        large: TestClient, make_client: Callable[..., TestClient],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _team(large, "consensus")
    before = _view(large, pid)
    with large.app.state.runtime.database.sessions() as session:
        assert session.get(AgreementView, pid) is not None

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the view was computed again")

    monkeypatch.setattr(agreement, "_compute", refuse)
    restarted = make_client(agreement_job_from=0)
    after = _view(restarted, pid)
    assert after == before  # the same view, current: no answer came since
    monkeypatch.undo()
    assert label(restarted, pid, "d", "e", annotator="bo").status_code == 201
    stale = _view(restarted, pid)
    assert (stale["as_of"]["current"], _bare(stale)) == (False, _bare(before))
    _finished(restarted, stale["as_of"]["job"])
    assert _view(large, pid)["answers"] == 10  # the first process reads the stored one


def test_a_small_project_computes_its_view_in_the_request(client: TestClient) -> None:
    pid = _team(client, "consensus")
    _view(client, pid)
    assert label(client, pid, "d", "e", annotator="ann").status_code == 201
    view = _view(client, pid)
    assert (view["as_of"]["current"], view["as_of"]["job"], view["answers"]) == (True, None, 10)
    with client.app.state.runtime.database.sessions() as session:
        assert session.get(AgreementView, pid) is None  # nothing stored below the threshold
