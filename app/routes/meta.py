"""``/health`` and ``/problems/{slug}`` (the documentation behind each problem ``type``)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from sqlalchemy.exc import OperationalError

from app import __version__
from app.db import get_database
from app.errors import PROBLEMS, DatabaseBusy, DatabaseUnavailable, NotFound
from app.routes.common import StrictJSONRoute, problem_responses
from app.schemas import Health
from app.settings import Settings

__all__ = ["router"]

router = APIRouter(tags=["service"], route_class=StrictJSONRoute)

HEALTH_THREADS = 2
"""Threads of its own that run the health check's query (never the requests' threads)."""


def _health_limiter(request: Request) -> anyio.CapacityLimiter:
    limiter: anyio.CapacityLimiter | None = getattr(request.app.state, "health_limiter", None)
    if limiter is None:
        limiter = request.app.state.health_limiter = anyio.CapacityLimiter(HEALTH_THREADS)
    return limiter


@router.get("/health", response_model=Health, responses=problem_responses(503))
async def health(request: Request) -> Health:
    """The service is up and its database answers (503 `database-busy` past
    SPORAL_HEALTH_TIMEOUT, 503 `database-unavailable` when it cannot be reached).

    The check never waits behind requests: it runs on the event loop and two threads of its
    own, with its own database connection.
    """
    database = get_database(request)
    settings: Settings = request.app.state.settings
    try:
        with anyio.fail_after(database.health_timeout + 0.5):
            dialect = await anyio.to_thread.run_sync(
                database.ping, limiter=_health_limiter(request), abandon_on_cancel=True)
    except TimeoutError:
        raise DatabaseBusy() from None
    except OperationalError:
        raise DatabaseUnavailable() from None
    return Health(version=__version__, database=dialect, open_mode=settings.open_mode)


@router.get("/problems/{slug}", responses=problem_responses(404))
def problem_type(slug: str) -> dict[str, Any]:
    """What a problem `type` of this service means."""
    kind = PROBLEMS.get(slug)
    if kind is None:
        raise NotFound(f"no problem type {slug!r}")
    return {"type": kind.type, "title": kind.title, "status": kind.status,
            "description": kind.description}
