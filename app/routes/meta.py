"""``/health`` and ``/problems/{slug}`` (the documentation behind each problem ``type``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import text

from app import __version__
from app.db import SessionDep
from app.errors import PROBLEMS, NotFound
from app.routes.common import SettingsDep, StrictJSONRoute, problem_responses
from app.schemas import Health

__all__ = ["router"]

router = APIRouter(tags=["service"], route_class=StrictJSONRoute)


@router.get("/health", response_model=Health, responses=problem_responses(503))
def health(session: SessionDep, settings: SettingsDep) -> Health:
    """The service is up and its database answers."""
    session.execute(text("SELECT 1"))
    return Health(version=__version__, database=session.get_bind().dialect.name,
                  open_mode=settings.open_mode)


@router.get("/problems/{slug}", responses=problem_responses(404))
def problem_type(slug: str) -> dict[str, Any]:
    """What a problem `type` of this service means."""
    kind = PROBLEMS.get(slug)
    if kind is None:
        raise NotFound(f"no problem type {slug!r}")
    return {"type": kind.type, "title": kind.title, "status": kind.status,
            "description": kind.description}
