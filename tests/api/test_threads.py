"""Requests cannot exhaust the server's threads: more concurrent requests on one project than
there are request threads still all get their answers, and other projects keep answering."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.services.labels.strict as writing
from tests.api.conftest import label, new_project

THREADS = 4
# Seconds the test waits for an answer: the stall it guards against is for good, so far above
# the work (the busy project's queue, about 0.6 s quiet), even on a busy machine
WAIT = 60.0


def test_more_requests_on_one_project_than_threads_all_get_answers(
        make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client(request_threads=THREADS)
    names = [f"c{i}" for i in range(8)]
    busy, other = new_project(client, names), new_project(client, names)
    within = writing.within_budget

    def slow_within(work: Any, *args: Any, **kwargs: Any) -> None:
        if work.state.project_id == busy:
            time.sleep(0.05)  # each label holds its project a while: the others queue
        within(work, *args, **kwargs)

    monkeypatch.setattr(writing, "within_budget", slow_within)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]][:3 * THREADS]
    answers: list[int] = []
    threads = [threading.Thread(target=lambda a=a, b=b: answers.append(
        label(client, busy, a, b).status_code)) for a, b in pairs]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    elsewhere: list[int] = []
    probe = threading.Thread(target=lambda: elsewhere.append(
        label(client, other, "c0", "c1").status_code))
    probe.start()
    probe.join(WAIT)
    assert elsewhere == [201], "another project's label stalled behind the busy one's threads"
    assert client.get("/health").status_code == 200
    deadline = time.monotonic() + WAIT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert sorted(answers) == [201] * len(pairs), answers  # none stalled
