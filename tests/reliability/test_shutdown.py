"""SIGTERM stops a real server within its shutdown timeout, even with a request still running.

A request waiting for the rest of its body, or stuck in a worker thread on a database lock,
must not hold the process: after ``SPORAL_SHUTDOWN_TIMEOUT`` the server ends, committing
nothing of the unfinished request.
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.reliability.harness import Server, sqlite_url

# How long after SIGTERM the server must have ended (its shutdown timeout is 1 s). The
# default suite allows a minute, far above the work even on a loaded machine, and still fails a
# server that waits for its request (which never ends by itself: the body never comes, the
# lock is held for ten minutes); the slow step holds it to 8 s, a bound a busy machine can break.
STOPS_WITHIN = [
    pytest.param(60.0, id="ends"),
    pytest.param(8.0, id="within-8s", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("seconds", STOPS_WITHIN)


def test_sigterm_ends_a_request_waiting_for_its_body_after_the_shutdown_timeout(
        tmp_path: Path, start_server: Callable[..., Server], seconds: float) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_SHUTDOWN_TIMEOUT": "1"})
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        # Half a body: the request is running, waiting for the rest, which never comes.
        sock.sendall(b"POST /projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"name\": ")
        _assert_stops_within(server, seconds)


@pytest.mark.parametrize("seconds", STOPS_WITHIN)
def test_sigterm_ends_a_request_stuck_in_a_worker_thread_after_the_shutdown_timeout(
        tmp_path: Path, start_server: Callable[..., Server], seconds: float) -> None:
    path = tmp_path / "sporal.db"
    server = start_server(sqlite_url(path), env={"SPORAL_SHUTDOWN_TIMEOUT": "1",
                                                 "SPORAL_SQLITE_BUSY_TIMEOUT_MS": "600000"})
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the request's write now waits in its thread
        outcome: list[object] = []

        def post() -> None:
            try:
                outcome.append(httpx.post(f"{server.base_url}/projects", json={"name": "p"},
                                          timeout=900).status_code)
            except httpx.HTTPError as exc:
                outcome.append(type(exc).__name__)

        client = threading.Thread(target=post)
        client.start()
        time.sleep(1.0)  # let the request reach its write
        assert not outcome, outcome
        _assert_stops_within(server, seconds)
        client.join(60)
        assert outcome and outcome[0] != 201, outcome  # nothing was committed
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _assert_stops_within(server: Server, seconds: float) -> None:
    assert server.process is not None
    started = time.perf_counter()
    server.process.terminate()
    try:
        server.process.wait(timeout=seconds)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the server still ran {seconds} s after SIGTERM:\n"
                             f"{server.log_tail(20)}") from exc
    assert time.perf_counter() - started < seconds
