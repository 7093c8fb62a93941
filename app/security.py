"""API keys: the admin key manages projects, each project's own key opens that project.

When ``SPORAL_ADMIN_KEY`` is unset the service runs open and asks no key anywhere. Keys are
high-entropy random strings; only their SHA-256 is stored, and comparisons use
:func:`secrets.compare_digest`.

A request's key is looked up once, before its body is read, by :class:`app.middleware.KeyCheck`
(:func:`identify` gives its :class:`Caller`); the routes' dependencies :data:`AdminDep` and
:data:`ProjectKeyDep` apply their rule to that caller and declare the key in the OpenAPI schema.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, NamedTuple

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import Forbidden, Unauthorized
from app.settings import Settings
from models import Project

__all__ = [
    "ADMIN_KEY_NEEDED",
    "ANYONE",
    "MAX_ID",
    "PROJECT_KEY_NEEDED",
    "AdminDep",
    "ApiKeyDep",
    "Caller",
    "ProjectIdPath",
    "KeyHolder",
    "ProjectKeyDep",
    "ReviewerDep",
    "caller_of",
    "hash_key",
    "identify",
    "new_key",
    "project_of_key",
    "require_admin",
    "require_project_key",
    "require_reviewer",
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


def _is_admin(settings: Settings, key: str) -> bool:
    assert settings.admin_key is not None
    return secrets.compare_digest(key.encode("utf-8", errors="surrogatepass"),
                                  settings.admin_key.get_secret_value().encode("utf-8"))


class KeyHolder(NamedTuple):
    """The project a key opens, and whether it is the project's reviewer key."""

    project_id: int
    reviewer: bool = False


def project_of_key(session: Session, key: str) -> KeyHolder | None:
    """The project whose key (or reviewer key) is ``key``, if any (indexed reads)."""
    digest = hash_key(key)
    row = session.execute(
        select(Project.id, Project.api_key_hash).where(Project.api_key_hash == digest)
    ).first()
    if row is not None and row.api_key_hash is not None:
        return (KeyHolder(row.id) if secrets.compare_digest(row.api_key_hash, digest)
                else None)
    row = session.execute(
        select(Project.id, Project.reviewer_key_hash)
        .where(Project.reviewer_key_hash == digest)).first()
    if row is None or row.reviewer_key_hash is None:
        return None
    return (KeyHolder(row.id, reviewer=True)
            if secrets.compare_digest(row.reviewer_key_hash, digest) else None)


KeyOwner = Callable[[str], KeyHolder | None]
"""Finds the project of a key (:func:`project_of_key` bound to a session)."""

ADMIN_KEY_NEEDED = "this route needs the admin key in the X-API-Key header"
PROJECT_KEY_NEEDED = "this project needs its API key in the X-API-Key header"


@dataclass(frozen=True)
class Caller:
    """Whom a request's key lets in: every project (``admin``) or the project of its key.

    Found once per request, before its body is read, by :class:`app.middleware.KeyCheck`,
    which keeps it on ``request.state.caller``; the routes' dependencies apply their rule to
    it without looking the key up again.
    """

    admin: bool
    """The admin key, or anyone when the service runs open."""
    project_id: int | None = None
    """The project whose key was given (None for the admin)."""
    reviewer: bool = False
    """The key given is the project's reviewer key (it opens the project and may resolve
    its disagreements)."""

    def check_admin(self) -> None:
        """Raise :class:`Forbidden` unless the caller may manage projects."""
        if not self.admin:
            raise Forbidden("a project key cannot manage projects; this route needs the admin key")

    def check_project(self, project_id: int | None) -> None:
        """Raise :class:`Forbidden` unless the caller may open project ``project_id``.

        ``project_id=None`` (a path whose id is not even an id) lets any caller through and
        leaves the answer to the route.
        """
        if not self.admin and project_id is not None and self.project_id != project_id:
            raise Forbidden("this API key belongs to another project")

    def check_reviewer(self, project_id: int) -> None:
        """Raise :class:`Forbidden` unless the caller may resolve the project's
        disagreements: the admin (anyone when the service runs open) or its reviewer key."""
        self.check_project(project_id)
        if not self.admin and not self.reviewer:
            raise Forbidden("resolving needs the admin key or the project's reviewer key "
                            "(POST /projects/{pid}/reviewer-key)")


ANYONE = Caller(admin=True)
"""The caller of every request when the service runs open (no key asked anywhere)."""


def identify(settings: Settings, key: str | None, owner_of: KeyOwner, *,
             missing: str) -> Caller:
    """The caller that ``key`` names (keys on: ``SPORAL_ADMIN_KEY`` is set).

    Parameters
    ----------
    settings : Settings
        The admin key.
    key : str or None
        The request's ``X-API-Key``.
    owner_of : KeyOwner
        Finds the project of a project key.
    missing : str
        What to say when no key was sent.

    Raises
    ------
    Unauthorized
        No key, or a key nobody holds.
    """
    if not key:
        raise Unauthorized(missing)
    if _is_admin(settings, key):
        return Caller(admin=True)
    owner = owner_of(key)
    if owner is None:
        raise Unauthorized("unknown API key")
    return Caller(admin=False, project_id=owner.project_id, reviewer=owner.reviewer)


def caller_of(request: Request) -> Caller:
    """The caller that :class:`app.middleware.KeyCheck` found for this request.

    A request it did not see (none should reach a route under ``/projects``) is refused.
    """
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:
        raise Unauthorized("the API key of this request was not checked")
    return caller


def require_admin(request: Request, key: ApiKeyDep) -> None:
    """Only the admin key may create, list and delete projects (when one is configured).

    ``key`` puts the header in the OpenAPI schema; its holder is the request's caller.
    """
    caller_of(request).check_admin()


def require_project_key(project_id: ProjectIdPath, request: Request, key: ApiKeyDep) -> None:
    """The routes of a project need its key (or the admin key) when keys are configured.

    ``key`` puts the header in the OpenAPI schema; its holder is the request's caller.
    """
    caller_of(request).check_project(project_id)


def require_reviewer(project_id: ProjectIdPath, request: Request, key: ApiKeyDep) -> None:
    """Resolving a disagreement needs the admin key or the project's reviewer key (when keys
    are configured; open otherwise)."""
    caller_of(request).check_reviewer(project_id)


AdminDep = Depends(require_admin)
ReviewerDep = Depends(require_reviewer)
ProjectKeyDep = Depends(require_project_key)
