"""The webhook endpoint and its worker under hostile input: a real server on a free loopback
port, the adapter's own event parsing (``Adapter.handle``), and Label Studio and sporal left
out (what would be forwarded is recorded)."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from sporal_labelstudio import cli
from sporal_labelstudio.adapter import SECRET_HEADER, Adapter, Refreshed
from sporal_labelstudio.server import Limits, Runner, WebhookServer

SECRET = "s3cret-webhook-token"
WAIT = 60.0  # seconds a step may take at most: far above the work, even on a busy machine


class RecordingAdapter(Adapter):
    """The adapter's event parsing; forwarding records instead of calling sporal."""

    def __init__(self) -> None:  # no clients, no state file
        self.lease_seconds = None
        self.forwarded: list[tuple[int, int]] = []  # (annotation id, task id)
        self.served: list[set[int]] = []  # the authors whose windows were refilled
        self.entered = threading.Event()  # a forward has started
        self.gate = threading.Event()  # forwards wait for it
        self.gate.set()

    @property
    def secret(self) -> str:
        return SECRET

    def forward(self, annotation: dict[str, Any], task_id: int) -> None:
        self.entered.set()
        self.gate.wait(WAIT)
        self.forwarded.append((int(annotation["id"]), task_id))

    def deleted(self, annotation_ids: list[int]) -> None:
        pass

    def reconcile(self) -> None:
        pass

    def refresh(self, idle: float | None = None) -> Refreshed:
        return Refreshed(retired=0, created=0, rescored=0, notes=0, seconds=0.0)

    def prune(self) -> Refreshed:
        return self.refresh()

    def serve_next(self, users: set[int]) -> Refreshed:
        self.served.append(users)
        return self.refresh()

    def stopped(self) -> None:
        pass


def event(annotation_id: int, task_id: int = 3, **extra: Any) -> bytes:
    return json.dumps({"action": "ANNOTATION_CREATED",
                       "annotation": {"id": annotation_id, "task": task_id, **extra}}).encode()


def wait_for(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@contextmanager
def running(limits: Limits | None = None) -> Iterator[tuple[Runner, RecordingAdapter, str]]:
    adapter = RecordingAdapter()
    runner = Runner(adapter, "127.0.0.1:0", reconcile_every=3600, refresh_every=3600,
                    limits=limits)
    thread = threading.Thread(target=runner.serve, daemon=True)
    thread.start()
    try:
        yield runner, adapter, f"http://127.0.0.1:{runner.server.server_address[1]}"
    finally:
        adapter.gate.set()
        runner.stop()
        thread.join(WAIT)


def post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}/webhook", content=body, headers={SECRET_HEADER: SECRET},
                      timeout=30)


def raw(url: str, head: str, body: bytes = b"", *,
        close: bool = False) -> tuple[int, str, float]:
    """Send ``head`` (the request line and headers) and ``body`` as they are; the answer's
    status, its detail and the seconds it took (at most twice ``WAIT``, or the socket's timeout
    fails the test)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2 * WAIT) as sock:
        started = time.monotonic()
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        if close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(ConnectionResetError):  # closed with a body left unread
            while chunk := sock.recv(4096):  # the server closes after every answer
                answer += chunk
    took = time.monotonic() - started
    assert answer, "the connection was dropped without an answer"
    status, _, rest = answer.partition(b"\r\n\r\n")
    return int(status.split()[1]), json.loads(rest).get("detail", ""), took


def head(content_length: str | None = None) -> str:
    lines = ["POST /webhook HTTP/1.1", "Host: x", f"{SECRET_HEADER}: {SECRET}"]
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    return "\n".join(lines) + "\n"


def test_the_answer_waits_for_the_authors_next_task() -> None:
    with running(Limits(answer_within=WAIT)) as (runner, adapter, url):
        assert post(url, event(1, completed_by=5)).status_code == 200
        # answered once the author's window was refilled: Label Studio's next is sporal's
        assert adapter.forwarded == [(1, 3)] and adapter.served == [{5}]
        body = json.dumps({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 1}]})
        assert post(url, body.encode()).status_code == 200
        assert adapter.served[-1] == set()  # a deletion refills nobody's window


def test_events_that_are_not_event_objects_are_400_and_the_next_is_forwarded() -> None:
    with running() as (runner, adapter, url):
        for body in (b"[1,2]", b"{}", b'{"action": 5}', b"null", b"not json", b"\xff{"):
            assert post(url, body).status_code == 400, body
        status, _, _ = raw(url, head(str(10_000_000)), b"x" * 65536)
        assert status == 413  # decided from Content-Length, before the body is read
        assert post(url, event(1)).status_code == 200
        wait_for(lambda: adapter.forwarded == [(1, 3)])
        assert httpx.get(f"{url}/health").json()["worker"] == "alive"


def test_the_worker_survives_whatever_reaches_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sporal.labelstudio")
    with running(Limits(max_body=16 * 1024 * 1024)) as (runner, adapter, url):
        big = event(2, task_id="x" * 10_000_000)  # type: ignore[arg-type]
        assert len(big) > 10_000_000 and post(url, big).status_code == 200
        past_the_checks: queue.Queue[Any] = runner.events  # what the endpoint would refuse
        for payload in ([1, 2], {}, {"action": 5}, {"action": "ANNOTATION_CREATED",
                                                     "annotation": 5}):
            past_the_checks.put(payload)
        assert post(url, event(4)).status_code == 200
        wait_for(lambda: adapter.forwarded == [(4, 3)])
        health = httpx.get(f"{url}/health")
        assert health.status_code == 200 and health.json()["worker"] == "alive"
    failed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert any("ANNOTATION_CREATED" in r.getMessage() for r in failed)
    assert SECRET not in caplog.text


def test_content_length_anomalies_are_400_without_holding_a_thread() -> None:
    # A read timeout far above the work: an answer before it never waited for a body
    with running(Limits(read_timeout=WAIT)) as (runner, adapter, url):
        for value in (None, "-1", "abc", "+5", " 1e3", "9" * 5000):
            status, detail, took = raw(url, head(value))
            assert took < WAIT, value
            assert (status, "Content-Length" in detail) == (400, True) or (
                value == "9" * 5000 and status == 413), (value, status, detail)
        twice = head("2") + "Content-Length: 2\n"
        assert raw(url, twice, b"{}")[:2] == (400, "exactly one Content-Length is needed")
        status, detail, took = raw(url, head("100"), b'{"action": ', close=True)
        assert (status, "shorter" in detail) == (400, True)  # the client sent less and ended
        assert took < WAIT
    with running(Limits(read_timeout=0.5)) as (runner, adapter, url):
        status, _, took = raw(url, head("100"), b'{"action": ')  # ... and waits: dropped
        assert status == 408 and took >= 0.5  # by the read timeout, not before it
        assert post(url, event(5)).status_code == 200
        wait_for(lambda: adapter.forwarded == [(5, 3)])


def test_deep_nesting_is_400_and_the_server_keeps_serving() -> None:
    with running() as (runner, adapter, url):
        assert post(url, b"[" * 100_000).status_code == 400
        assert post(url, b"[" * 100_000 + b"]" * 100_000).status_code == 400
        nested = b'{"action": "ANNOTATION_CREATED", "x": ' + b"[" * 65 + b"]" * 65 + b"}"
        assert post(url, nested).status_code == 400
        # brackets inside strings do not nest
        assert post(url, event(6, note="[{" * 1000 + '\\"[')).status_code == 200
        wait_for(lambda: adapter.forwarded == [(6, 3)])
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_full_queue_answers_503_with_retry_after() -> None:
    with running(Limits(queue_size=2, retry_after=7)) as (runner, adapter, url):
        adapter.gate.clear()
        assert post(url, event(1)).status_code == 200
        assert adapter.entered.wait(WAIT)  # the worker holds event 1; the queue is empty
        assert [post(url, event(i)).status_code for i in (2, 3)] == [200, 200]
        assert httpx.get(f"{url}/health").json() == {"worker": "alive", "queue": 2,
                                                     "queue_size": 2}
        refused = post(url, event(4))
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "7"
        adapter.gate.set()
        wait_for(lambda: adapter.forwarded == [(1, 3), (2, 3), (3, 3)])
        assert httpx.get(f"{url}/health").json()["queue"] == 0


def _answer_to_a_held_event(answer_within: float) -> float:
    """Seconds the answer to an event took while the event's forward was held: it came before
    the event was applied, which was applied all the same."""
    with running(Limits(answer_within=answer_within)) as (runner, adapter, url):
        adapter.gate.clear()  # the forward takes long
        started = time.monotonic()
        assert post(url, event(2)).status_code == 200
        took = time.monotonic() - started
        assert adapter.forwarded == [], "answered only once the held event was applied"
        adapter.gate.set()
        wait_for(lambda: adapter.forwarded == [(2, 3)])  # applied all the same
    return took


def test_an_answer_waits_until_its_event_is_applied_but_no_longer_than_the_bound() -> None:
    with running(Limits(answer_within=WAIT)) as (runner, adapter, url):
        started = time.monotonic()
        assert post(url, event(1)).status_code == 200
        assert adapter.forwarded == [(1, 3)]  # applied before Label Studio got the answer
        assert time.monotonic() - started < WAIT  # ... and answered then, not at the bound
    # No longer than the bound: the wait follows it (a ratio of two bounds, which a busy
    # machine slows alike), never shorter than it
    short, long = _answer_to_a_held_event(0.25), _answer_to_a_held_event(2.5)
    assert short >= 0.25 and long >= 2.5
    assert short < long / 2, (short, long)


def test_health_and_events_are_503_once_the_worker_has_stopped() -> None:
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    server = WebhookServer(("127.0.0.1", 0), SECRET, queue.Queue(), worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        health = httpx.get(f"{url}/health")
        assert health.status_code == 503 and health.json()["worker"] == "stopped"
        refused = post(url, event(1))
        assert refused.status_code == 503 and "Retry-After" in refused.headers
        assert server.events.qsize() == 0
    finally:
        server.shutdown()
        server.server_close()


def test_the_cli_defaults_are_the_servers() -> None:
    options = inspect.signature(cli.run).parameters
    assert options["max_body"].default == Limits().max_body == 1024 * 1024
    assert options["queue_size"].default == Limits().queue_size
