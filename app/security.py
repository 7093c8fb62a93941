"""API keys: the admin key manages projects, each project's own key opens that project.

When ``SPORAL_ADMIN_KEY`` is unset the service runs open and asks no key anywhere. Keys are
high-entropy random strings; only their SHA-256 is stored, and comparisons use
:func:`secrets.compare_digest`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from functools import partial
from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import SessionDep
from app.errors import Forbidden, Unauthorized
from app.settings import Settings
from models import Project

__all__ = [
    "MAX_ID",
    "AdminDep",
    "ApiKeyDep",
    "ProjectIdPath",
    "ProjectKeyDep",
    "check_admin_key",
    "check_project_key",
    "hash_key",
    "new_key",
    "project_of_key",
    "require_admin",
    "require_project_key",
]

MAX_ID = 2**31 - 1  # ids are 32-bit integers on PostgreSQL

api_key_header = APIKeyHeader(
    name="X-API-Key",
    auto_error=False,
    description="The project's key (returned once at creation) or the admin key. "
    "Not needed when the service runs open (SPORAL_ADMIN_KEY unset).",
)
ApiKeyDep = Annotated[str | None, Security(api_key_header)]
ProjectIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="The project's id.")]


def new_key() -> str:
    """A fresh project key (256 random bits)."""
    return "sporal_" + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The stored form of a key: its SHA-256, hex (enough for a high-entropy key)."""
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _is_admin(settings: Settings, key: str) -> bool:
    assert settings.admin_key is not None
    return secrets.compare_digest(key.encode("utf-8", errors="surrogatepass"),
                                  settings.admin_key.get_secret_value().encode("utf-8"))


def project_of_key(session: Session, key: str) -> int | None:
    """The id of the project whose key is ``key``, if any (one indexed read)."""
    digest = hash_key(key)
    row = session.execute(
        select(Project.id, Project.api_key_hash).where(Project.api_key_hash == digest)
    ).first()
    if row is None or row.api_key_hash is None:
        return None
    return row.id if secrets.compare_digest(row.api_key_hash, digest) else None


KeyOwner = Callable[[str], int | None]
"""Finds the project of a key (:func:`project_of_key` bound to a session)."""


def check_admin_key(settings: Settings, key: str | None, owner_of: KeyOwner) -> None:
    """Raise unless ``key`` may manage projects: the admin key, or any key in open mode.

    Raises
    ------
    Unauthorized
        No key, or a key nobody holds.
    Forbidden
        A project's key.
    """
    if settings.open_mode:
        return
    if not key:
        raise Unauthorized("this route needs the admin key in the X-API-Key header")
    if _is_admin(settings, key):
        return
    if owner_of(key) is not None:
        raise Forbidden("a project key cannot manage projects; this route needs the admin key")
    raise Unauthorized("unknown API key")


def check_project_key(settings: Settings, key: str | None, project_id: int | None,
                      owner_of: KeyOwner) -> None:
    """Raise unless ``key`` opens project ``project_id``: its own key or the admin key.

    ``project_id=None`` (a path whose id is not even an id) accepts any valid key and leaves
    the answer to the route.

    Raises
    ------
    Unauthorized
        No key, or a key nobody holds.
    Forbidden
        Another project's key.
    """
    if settings.open_mode:
        return
    if not key:
        raise Unauthorized("this project needs its API key in the X-API-Key header")
    if _is_admin(settings, key):
        return
    owner = owner_of(key)
    if owner is None:
        raise Unauthorized("unknown API key")
    if project_id is not None and owner != project_id:
        raise Forbidden("this API key belongs to another project")


def require_admin(request: Request, session: SessionDep, key: ApiKeyDep) -> None:
    """Only the admin key may create, list and delete projects (when one is configured)."""
    check_admin_key(_settings(request), key, partial(project_of_key, session))


def require_project_key(project_id: ProjectIdPath, request: Request, session: SessionDep,
                        key: ApiKeyDep) -> None:
    """The routes of a project need its key (or the admin key) when keys are configured."""
    check_project_key(_settings(request), key, project_id, partial(project_of_key, session))


AdminDep = Depends(require_admin)
ProjectKeyDep = Depends(require_project_key)
