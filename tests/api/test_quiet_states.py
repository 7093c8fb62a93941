"""Expected states are quiet: a project with nothing to train on logs a debug line, no error.

A project without a pool, with too few labeled pairs or with one class has
no model: its answers use p = 0.5 (``"model": null``). That is a state every project passes
through, not a failure: the log must not show a traceback for it, and ``fresh=true`` must not
wait for a model that cannot come.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import label, new_project

CONCEPTS = ["a", "b", "c"]
STRATEGIES = ["default", "LC", "QBC", "LC-R+", "EDP-F"]


def _projects(client: TestClient) -> dict[str, int]:
    """One project in each state where there is nothing to train."""
    pairs = [("a", "b", [0.9, 0.1]), ("b", "c", [0.8, 0.3]), ("a", "c", [0.7, 0.5])]
    projects = {"no pool": new_project(client, CONCEPTS),
                "nothing labeled": new_project(client, CONCEPTS, pairs),
                "one label": new_project(client, CONCEPTS, pairs),
                "one class": new_project(client, CONCEPTS, pairs)}
    label(client, projects["one label"], "a", "b")
    label(client, projects["one class"], "a", "b")
    label(client, projects["one class"], "b", "c")  # (a, c) inferred: three positives
    return projects


def test_nothing_to_train_is_a_debug_line_not_a_traceback(
        make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="sporal")
    client = make_client(fresh_timeout=10.0)
    for state, pid in _projects(client).items():
        for strategy in STRATEGIES:
            response = client.get(f"/projects/{pid}/next",
                                  params={"strategy": strategy, "fresh": "true"})
            assert response.status_code == 200, (state, strategy, response.text)
            assert response.json()["model"] is None, (state, strategy)
        response = client.get(f"/projects/{pid}/predictions", params={"fresh": "true"})
        assert response.status_code == 200, (state, response.text)
        assert response.json()["model"] is None, state
    loud = [f"{r.levelname} {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.ERROR or r.exc_info]
    assert loud == []
    quiet = {r.getMessage().rsplit(": ", 1)[-1] for r in caplog.records
             if r.levelno == logging.DEBUG and "nothing to train" in r.getMessage()}
    assert {"no pool pairs", "0 labeled pool pair(s)", "1 labeled pool pair(s)",
            "one class"} <= quiet
