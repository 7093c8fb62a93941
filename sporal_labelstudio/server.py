"""``sporal labelstudio run``: the webhook endpoint and the one worker that applies events.

Label Studio posts each webhook once and waits at most a second, so the endpoint only checks
the shared secret, queues the payload and answers 200; the worker applies the queue in order,
refreshes the window after each burst of events and on a timer shorter than sporal's lease, and
reconciles from the export at start and every ``reconcile_every`` seconds.
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sporal_labelstudio.adapter import SECRET_HEADER, Adapter

__all__ = ["Runner", "WebhookServer", "parse_listen"]

logger = logging.getLogger("sporal.labelstudio")


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``) as a pair."""
    host, _, port = listen.rpartition(":")
    return host or "127.0.0.1", int(port)


class WebhookServer(ThreadingHTTPServer):
    """Accepts ``POST /webhook`` with the secret header and queues the JSON payload."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], secret: str,
                 events: queue.Queue[dict[str, Any]]) -> None:
        self.secret = secret
        self.events = events
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        given = self.headers.get(SECRET_HEADER, "")
        if self.path.rstrip("/") != "/webhook":
            self._answer(404)
            return
        if not hmac.compare_digest(given.encode(), self.server.secret.encode()):
            self._answer(403)
            return
        try:
            payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except ValueError:
            self._answer(400)
            return
        self.server.events.put(payload)
        self._answer(200)
        logger.debug("webhook %s queued", payload.get("action"))

    def do_GET(self) -> None:  # noqa: N802
        self._answer(200 if self.path == "/health" else 404)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug(format, *args)


class Runner:
    """The webhook server and the worker of one adapter."""

    def __init__(self, adapter: Adapter, listen: str, *, reconcile_every: float = 60.0,
                 refresh_every: float | None = None) -> None:
        self.adapter = adapter
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.server = WebhookServer(parse_listen(listen), adapter.secret, self.events)
        self.reconcile_every = reconcile_every
        self.refresh_every = refresh_every
        self.stopping = threading.Event()
        self.changed = threading.Event()  # an event was applied: refresh the window

    def _refresh_period(self) -> float:
        if self.refresh_every is not None:
            return self.refresh_every
        lease = self.adapter.lease_seconds or 600.0
        return max(1.0, min(60.0, lease / 3))  # well inside the lease, which next renews

    def _safely(self, what: str, work: Any, *args: Any) -> None:
        try:
            work(*args)
        except Exception:  # one failed event must not stop the adapter; reconcile repairs
            logger.exception("%s failed; the next reconcile repairs it", what)

    def serve(self) -> None:
        """Run until :meth:`stop` (or Ctrl-C).

        Two workers: the event worker forwards each annotation to sporal as soon as it is
        queued (a few milliseconds), the window worker does the slower Label Studio work
        (refresh after a burst of events or on the timer, reconcile periodically), so that an
        answer never waits behind task creation or an export.
        """
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        logger.info("webhook endpoint on http://%s:%d/webhook", *self.server.server_address[:2])
        events = threading.Thread(target=self._events, daemon=True)
        events.start()
        try:
            self._window()
        finally:
            self.stopping.set()
            events.join(5)
            self.server.shutdown()
            self.server.server_close()

    def _events(self) -> None:
        while not self.stopping.is_set():
            try:
                payload = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            started = time.monotonic()
            self._safely("event", self.adapter.handle, payload)
            logger.info("applied %s in %.1f ms", payload.get("action"),
                        (time.monotonic() - started) * 1000)
            self.changed.set()

    def _window(self) -> None:
        self._safely("reconcile", self.adapter.reconcile)
        next_reconcile = time.monotonic() + self.reconcile_every
        next_refresh = time.monotonic() + self._refresh_period()
        while not self.stopping.is_set():
            changed = self.changed.wait(timeout=0.5)
            now = time.monotonic()
            if now >= next_reconcile:
                self.changed.clear()
                self._safely("reconcile", self.adapter.reconcile)  # ends with a refresh
                next_reconcile = time.monotonic() + self.reconcile_every
            elif changed or now >= next_refresh:
                self.changed.clear()
                self._safely("refresh", self.adapter.refresh)
            else:
                continue
            next_refresh = time.monotonic() + self._refresh_period()

    def stop(self) -> None:
        self.stopping.set()
