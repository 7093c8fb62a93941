"""The edge over a real socket: a header-size limit, keys before the body.

Scaled-down reproductions of what an outsider found: an 80 MB header froze the event loop for
33 s (no header limit), and a 60 MB body without a key was read and parsed before its 401.
"""

from __future__ import annotations

import socket
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
