"""The edge over a real socket: a header-size limit, keys before the body, a bounded shutdown.

Scaled-down reproductions of what an outsider found: an 80 MB header froze the event loop for
33 s (no header limit), a 60 MB body without a key was read and parsed before its 401, and
SIGTERM waited forever for a request still running.
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

from tests.reliability.harness import Server, sqlite_url

ADMIN_KEY = "admin-key-for-the-edge-tests"


def _raw_request(server: Server, head: bytes, body: bytes = b"") -> int | str:
    """Send ``head`` (and ``body``) on a fresh connection; the status, or ``"closed"``."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        try:
            sock.sendall(head + body)
            answer = b""
            while b"\r\n" not in answer:
                chunk = sock.recv(65_536)
                if not chunk:
                    return "closed"
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
    return int(answer.split(b" ", 2)[1])


def test_an_oversized_header_is_refused_at_once(
        tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"))
    large = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 4_000_000 + b"\r\n\r\n"
    started = time.perf_counter()
    outcome = _raw_request(server, large)
    elapsed = time.perf_counter() - started
    assert outcome in (400, 431, "closed"), outcome
    assert elapsed < 5.0, elapsed
    # Headers of an ordinary size still pass, and the server still serves.
    ordinary = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 8_000 + b"\r\n\r\n"
    assert _raw_request(server, ordinary) == 200


def test_a_large_body_without_a_key_gets_its_401_and_the_server_stays_up(
        tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_ADMIN_KEY": ADMIN_KEY})
    document = b'{"labels": [' + b",".join([b'{"a": "x", "b": "y", "label": "positive"}']
                                         * 100_000) + b"]}"
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        pid = client.post("/projects", json={"name": "p"},
                          headers={"X-API-Key": ADMIN_KEY}).json()["id"]
        response = client.post(f"/projects/{pid}/labels/bulk", content=document,
                               headers={"content-type": "application/json"})
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == 'APIKey header="X-API-Key"'
        assert client.get("/health").status_code == 200


def test_sigterm_ends_a_request_waiting_for_its_body_after_the_shutdown_timeout(
        tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_SHUTDOWN_TIMEOUT": "1"})
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        # Half a body: the request is running, waiting for the rest, which never comes.
        sock.sendall(b"POST /projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"name\": ")
        _assert_stops_within(server, 8.0)


def test_sigterm_ends_a_request_stuck_in_a_worker_thread_after_the_shutdown_timeout(
        tmp_path: Path, start_server: Callable[..., Server]) -> None:
    path = tmp_path / "sporal.db"
    server = start_server(sqlite_url(path), env={"SPORAL_SHUTDOWN_TIMEOUT": "1",
                                                 "SPORAL_SQLITE_BUSY_TIMEOUT_MS": "60000"})
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the request's write now waits in its thread
        outcome: list[object] = []

        def post() -> None:
            try:
                outcome.append(httpx.post(f"{server.base_url}/projects", json={"name": "p"},
                                          timeout=90).status_code)
            except httpx.HTTPError as exc:
                outcome.append(type(exc).__name__)

        client = threading.Thread(target=post)
        client.start()
        time.sleep(1.0)  # let the request reach its write
        assert not outcome, outcome
        _assert_stops_within(server, 8.0)
        client.join(10)
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
