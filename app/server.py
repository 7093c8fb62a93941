"""``sporal serve``: migrate the database once, then run uvicorn with one or more workers."""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn
from fastapi import FastAPI

from app.db import migrate
from app.services.workers import stop_gracefully, watch_parent
from app.settings import get_settings

__all__ = ["MAX_HEADER_BYTES", "ORPHAN_GRACE", "check_listen", "serve", "serving_app"]

# The request line and headers of one request may not exceed this: uvicorn's default parser
# (httptools) has no limit, and one request with an 80 MB header held the event loop for 33 s.
# h11 refuses a larger head with 400 as soon as its buffer passes the limit.
MAX_HEADER_BYTES = 64 * 1024

ORPHAN_GRACE = 3.0
"""Seconds a serving process whose supervisor died gives its requests before it exits."""


def check_listen(host: str, port: int) -> None:
    """Exit with a clear message unless ``host:port`` can be bound (as uvicorn binds it).

    Run before the migrations and the warm-up, so that a busy port fails at once rather
    than after them, inside uvicorn.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            sys.exit(f"sporal: cannot listen on {host}:{port}: {reason}")


def serving_app() -> FastAPI:
    """The application of one serving process (uvicorn's factory).

    With ``--workers`` the process stops when uvicorn's supervisor, which started it, dies
    (SIGKILL included): no serving process outlives `sporal serve`. The training worker
    starts now, not on the first request that needs a model.
    """
    from app.main import create_app
    from app.services.training import start_worker

    watch_parent(stop_gracefully(ORPHAN_GRACE))
    settings = get_settings()
    app = create_app(settings)
    if settings.warm_up:
        start_worker()
    return app


def serve(host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> None:
    """Apply the migrations (once, before any worker starts), then serve the API.

    Workers are separate processes (uvicorn's multiprocess manager); each keeps its own
    reasoning cache and catches up with the others through the project version counter.
    """
    check_listen(host, port)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    migrate(settings.database_url)
    # On SIGTERM, requests still running after the shutdown timeout are cancelled and the
    # process exits (uvicorn re-raises the signal, so a request stuck in a worker thread does
    # not hold it); without the timeout one heavy request kept the process alive forever.
    uvicorn.run("app.server:serving_app", factory=True, host=host, port=port,
                workers=max(1, workers), log_level="info", proxy_headers=False,
                http="h11", h11_max_incomplete_event_size=MAX_HEADER_BYTES,
                timeout_graceful_shutdown=settings.shutdown_timeout)
