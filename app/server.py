"""``sporal serve``: migrate the database once, then run uvicorn with one or more workers."""

from __future__ import annotations

import logging

import uvicorn

from app.db import migrate
from app.settings import get_settings

__all__ = ["serve"]


def serve(host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> None:
    """Apply the migrations (once, before any worker starts), then serve the API.

    Workers are separate processes (uvicorn's multiprocess manager); each keeps its own
    reasoning cache and catches up with the others through the project version counter.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    migrate(get_settings().database_url)
    uvicorn.run("app.main:create_app", factory=True, host=host, port=port,
                workers=max(1, workers), log_level="info", proxy_headers=False)
