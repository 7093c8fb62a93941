"""``sporal labelstudio run``: the webhook endpoint and the one worker that applies events.

Label Studio posts each webhook once and waits at most a second, so the endpoint only checks
the shared secret and the event's shape, queues the payload and answers 200 once the worker has
applied it or ``answer_within`` seconds have passed, whichever comes first (Label Studio answers
the annotator's POST only after the webhook, so the editor's next task already carries what the
event changed: the answering person's next task, a refusal's note; a slow event is applied all
the same). The event worker applies the queue in order and, after an answer, refills its
author's window; the window worker takes decided tasks out of every window after each burst of
events, asks for every window again on a timer well inside sporal's lease (which that renews),
and reconciles from the exports at start and every ``reconcile_every`` seconds.

Every input is bounded (:class:`Limits`): one ``Content-Length`` of at most ``max_body`` bytes
(413 beyond it, decided before reading; 400 when it is missing, repeated or not a number), a
body read within ``read_timeout`` seconds (408), JSON nested at most ``max_depth`` deep and an
object with a string ``action`` (400 otherwise), and at most ``queue_size`` events waiting (503
with ``Retry-After`` beyond it: the periodic reconcile recovers what was refused). ``GET
/health`` says whether the worker is alive and how many events wait (503 once it has stopped).
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sporal_labelstudio.adapter import SECRET_HEADER, Adapter

__all__ = ["Limits", "Refused", "Runner", "WebhookServer", "parse_event", "parse_listen"]

logger = logging.getLogger("sporal.labelstudio")

# Label Studio's payloads are a few kilobytes (the ``project`` member, its settings, is the
# largest part) and nested about ten deep; the limits leave ample room above that.
MAX_BODY = 1024 * 1024
MAX_DEPTH = 64
QUEUE_SIZE = 1000
READ_TIMEOUT = 10.0
RETRY_AFTER = 5
ANSWER_WITHIN = 0.8  # Label Studio waits 1 s for a webhook's answer
PRUNE_EVERY = 20.0  # seconds between two prunes (and descriptions) when nothing happens

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``) as a pair."""
    host, _, port = listen.rpartition(":")
    return host or "127.0.0.1", int(port)


@dataclass(frozen=True)
class Limits:
    """What the webhook endpoint accepts (see the module's docstring)."""

    max_body: int = MAX_BODY  # bytes
    max_depth: int = MAX_DEPTH  # nested arrays and objects
    queue_size: int = QUEUE_SIZE  # events waiting for the worker
    read_timeout: float = READ_TIMEOUT  # seconds a request may take to arrive
    retry_after: int = RETRY_AFTER  # seconds, in a 503's Retry-After
    answer_within: float = ANSWER_WITHIN  # seconds an answer waits for its event's applying


class Refused(Exception):
    """A request the endpoint answers with ``status`` (and a JSON ``detail``)."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


def _too_deep(body: bytes, limit: int) -> bool:
    """Whether the JSON text nests arrays and objects deeper than ``limit``.

    Strings are cut out first (brackets inside them do not nest); an unterminated string
    leaves text that the parser refuses anyway.
    """
    depth = 0
    for byte in _NOT_BRACKET.sub(b"", _STRING.sub(b"", body)):
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def parse_event(body: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The webhook payload in ``body``: a JSON object with a string ``action``, or
    :class:`Refused` (400) saying what it is not."""
    if _too_deep(body, max_depth):
        raise Refused(400, f"JSON nested deeper than {max_depth}")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
        raise Refused(400, "not a webhook event: a JSON object with a string action")
    return payload


class WebhookServer(ThreadingHTTPServer):
    """Accepts ``POST /webhook`` with the secret header and queues the event for ``worker``;
    ``GET /health`` reports the worker and the queue."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], secret: str,
                 events: queue.Queue[dict[str, Any]], worker: threading.Thread,
                 limits: Limits | None = None) -> None:
        self.secret = secret
        self.events = events
        self.worker = worker
        self.limits = limits or Limits()
        self._progress = threading.Condition()
        self._queued = 0  # events this endpoint queued
        self._applied = 0  # events the worker finished
        super().__init__(address, _Handler)

    def enqueue(self, payload: dict[str, Any]) -> int:
        """Queue ``payload`` (``queue.Full`` when the queue is); its place in the sequence."""
        with self._progress:
            self.events.put_nowait(payload)
            self._queued += 1
            return self._queued

    def applied_one(self) -> None:
        """The worker finished an event."""
        with self._progress:
            self._applied += 1
            self._progress.notify_all()

    def wait_applied(self, place: int, timeout: float) -> bool:
        """Wait until the event at ``place`` is applied, at most ``timeout`` seconds."""
        with self._progress:
            return self._progress.wait_for(lambda: self._applied >= place, timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.warning("webhook request from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.limits.read_timeout)  # a stalled client ends

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        try:
            payload = self._event()
            place = self._queue(payload)
        except Refused as refused:
            self._answer(refused.status, {"detail": refused.detail}, refused.headers)
            return
        self.server.wait_applied(place, self.server.limits.answer_within)
        self._answer(200, {})
        logger.debug("webhook %.64r queued", payload["action"])

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/health":
            self._answer(404, {"detail": "not found"})
            return
        alive = self.server.worker.is_alive()
        self._answer(200 if alive else 503, {
            "worker": "alive" if alive else "stopped", "queue": self.server.events.qsize(),
            "queue_size": self.server.events.maxsize})

    def _event(self) -> dict[str, Any]:
        if self.path.rstrip("/") != "/webhook":
            raise Refused(404, "not found")
        given = self.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.server.secret.encode()):
            raise Refused(403, "wrong or missing secret")
        length = self._length()
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            raise Refused(408, "the body did not arrive in time") from None
        if len(body) < length:
            raise Refused(400, "the body is shorter than its Content-Length")
        return parse_event(body, self.server.limits.max_depth)

    def _length(self) -> int:
        """The body's length from its one ``Content-Length``, checked before reading."""
        if self.headers.get("Transfer-Encoding") is not None:
            raise Refused(400, "a Transfer-Encoding is not accepted; send a Content-Length")
        values = self.headers.get_all("Content-Length") or []
        if len(values) != 1:
            raise Refused(400, "exactly one Content-Length is needed")
        value = values[0].strip()
        if not (value.isascii() and value.isdigit()):
            raise Refused(400, "the Content-Length is not a number of bytes")
        limit = self.server.limits.max_body
        if len(value) > 18 or int(value) > limit:
            raise Refused(413, f"the body is over {limit} bytes")
        return int(value)

    def _queue(self, payload: dict[str, Any]) -> int:
        busy = {"Retry-After": str(self.server.limits.retry_after)}
        if not self.server.worker.is_alive():
            raise Refused(503, "the event worker has stopped", busy)
        try:
            return self.server.enqueue(payload)
        except queue.Full:
            logger.warning("event queue full (%d); refused %.64r, a reconcile recovers it",
                           self.server.events.maxsize, payload["action"])
            raise Refused(503, "too many events waiting", busy) from None

    def _answer(self, status: int, body: dict[str, Any],
                headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.close_connection = True  # an unread body must not be taken for a next request
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client left

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug(format, *args)


class Runner:
    """The webhook server and the worker of one adapter."""

    def __init__(self, adapter: Adapter, listen: str, *, reconcile_every: float = 60.0,
                 refresh_every: float | None = None, limits: Limits | None = None) -> None:
        self.adapter = adapter
        limits = limits or Limits()
        self.events: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=limits.queue_size)
        self.worker = threading.Thread(target=self._events, name="sporal-labelstudio-events",
                                       daemon=True)
        self.server = WebhookServer(parse_listen(listen), adapter.secret, self.events,
                                    self.worker, limits)
        self.reconcile_every = reconcile_every
        self.refresh_every = refresh_every
        self.stopping = threading.Event()
        self.changed = threading.Event()  # an event was applied: refresh the window

    def _refresh_period(self) -> float:
        if self.refresh_every is not None:
            return self.refresh_every
        lease = self.adapter.lease_seconds or 600.0
        return max(1.0, lease / 3)  # well inside the lease, which next renews

    def _safely(self, what: str, work: Any, *args: Any) -> None:
        try:
            work(*args)
        except Exception:  # one failed event must not stop the adapter; reconcile repairs
            logger.exception("%s failed; the next reconcile repairs it", what)

    def serve(self) -> None:
        """Run until :meth:`stop` (or Ctrl-C).

        Two workers: the event worker forwards each annotation to sporal as soon as it is
        queued and refills its author's window, the window worker does the rest of the Label
        Studio work (prune after a burst of events, refresh on the timer, reconcile
        periodically), so that an answer never waits behind an export.
        """
        self.worker.start()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        logger.info("webhook endpoint on http://%s:%d/webhook", *self.server.server_address[:2])
        try:
            self._window()
        finally:
            self.stopping.set()
            self.worker.join(5)
            self.server.shutdown()
            self.server.server_close()
            self._safely("the stop line", self.adapter.stopped)

    def _events(self) -> None:
        while not self.stopping.is_set():
            try:
                payload = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            self._apply(payload)
            if isinstance(payload, dict):  # the author's next task, before the answer
                self._safely("the next task", self.adapter.serve_next,
                             self.adapter.authors(payload))
            self.server.applied_one()
            self.changed.set()

    def _apply(self, payload: Any) -> None:
        """Apply one event; whatever it raises is logged and the worker goes on."""
        action = payload.get("action") if isinstance(payload, dict) else type(payload).__name__
        started = time.monotonic()
        try:
            self.adapter.handle(payload)
        except Exception:  # one failed event must not stop the adapter; reconcile repairs
            logger.exception("event %.64r failed; the next reconcile repairs it", action)
            return
        logger.info("applied %.64r in %.1f ms", action, (time.monotonic() - started) * 1000)

    def _window(self) -> None:
        self._safely("reconcile", self.adapter.reconcile)
        next_reconcile = time.monotonic() + self.reconcile_every
        next_refresh = time.monotonic() + self._refresh_period()
        next_prune = time.monotonic() + PRUNE_EVERY
        while not self.stopping.is_set():
            changed = self.changed.wait(timeout=0.5)
            now = time.monotonic()
            if now >= next_reconcile:
                self.changed.clear()
                self._safely("reconcile", self.adapter.reconcile)  # ends with a prune
                next_reconcile = time.monotonic() + self.reconcile_every
            elif now >= next_refresh:
                self.changed.clear()
                self._safely("refresh", self.adapter.refresh, self._refresh_period())
            elif changed or now >= next_prune:
                self.changed.clear()
                self._safely("prune", self.adapter.prune)
                next_prune = time.monotonic() + PRUNE_EVERY
                continue
            else:
                continue
            next_refresh = time.monotonic() + self._refresh_period()

    def stop(self) -> None:
        self.stopping.set()
