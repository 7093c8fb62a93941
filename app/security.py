"""API keys and roles: the admin key manages projects; a project's key, its reviewer key and
its annotator keys open that project, each with its role (:data:`Role`).

When ``SPORAL_ADMIN_KEY`` is unset the service runs open and asks no key anywhere (every
caller is the admin, and an answer's annotator comes from its body). Keys are high-entropy
random strings; only their SHA-256 is stored, and comparisons use :func:`secrets.compare_digest`.

A request's key is looked up once, before its body is read, by :class:`app.middleware.KeyCheck`
(:func:`identify` gives its :class:`Caller`); the routes' dependencies apply their rule to that
caller and declare the key in the OpenAPI schema: :data:`AdminDep` (the admin key),
:data:`ProjectKeyDep` (the team: project, reviewer or admin key), :data:`MemberDep` (any key of
the project, an annotator's too), :data:`KeyMakerDep` (the project or admin key) and
:data:`ReviewerDep` (the reviewer or admin key). Whose answers a caller may remove is
:meth:`Caller.check_retract`, asked by the services that remove them. docs/teams.md has the
table of who may do what.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import Forbidden, Unauthorized
from app.settings import Settings
from models import Project
from models.tables import AnnotatorKey

__all__ = [
    "ADMIN_KEY_NEEDED",
    "ANYONE",
    "MAX_ID",
    "PROJECT_KEY_NEEDED",
    "KEY_MAKER_NEEDED",
    "TEAM_KEY_NEEDED",
    "AdminDep",
    "AnswerOwner",
    "ApiKeyDep",
    "Caller",
    "CallerDep",
    "KeyMakerDep",
    "MemberDep",
    "Role",
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
    "require_key_maker",
    "require_member",
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


Role = Literal["admin", "project", "reviewer", "annotator"]
"""Whom a key makes the caller: the admin (everyone when keys are off), the project's tools
(its key), its reviewer (its reviewer key) or one of its annotators (an annotator key)."""


class KeyHolder(NamedTuple):
    """The project a key opens, the role it gives, and the annotator of an annotator key."""

    project_id: int
    role: Role = "project"
    annotator: str | None = None


def _found(row: Any, digest: str) -> bool:
    return row.key_hash is not None and secrets.compare_digest(row.key_hash, digest)


def project_of_key(session: Session, key: str) -> KeyHolder | None:
    """The project whose key, reviewer key or live annotator key is ``key``, if any
    (indexed reads)."""
    digest = hash_key(key)
    row = session.execute(select(Project.id, Project.api_key_hash.label("key_hash"))
                          .where(Project.api_key_hash == digest)).first()
    if row is not None and _found(row, digest):
        return KeyHolder(row.id)
    row = session.execute(select(Project.id, Project.reviewer_key_hash.label("key_hash"))
                          .where(Project.reviewer_key_hash == digest)).first()
    if row is not None and _found(row, digest):
        return KeyHolder(row.id, "reviewer")
    person = session.execute(select(AnnotatorKey.project_id.label("id"),
                                    AnnotatorKey.key_hash, AnnotatorKey.annotator)
                             .where(AnnotatorKey.key_hash == digest,
                                    AnnotatorKey.retired_at.is_(None))).first()
    if person is not None and _found(person, digest):
        return KeyHolder(person.id, "annotator", person.annotator)
    return None


KeyOwner = Callable[[str], KeyHolder | None]
"""Finds the project of a key (:func:`project_of_key` bound to a session)."""

ADMIN_KEY_NEEDED = "this route needs the admin key in the X-API-Key header"
PROJECT_KEY_NEEDED = "this project needs its API key in the X-API-Key header"
TEAM_KEY_NEEDED = ("an annotator key cannot use this route: it needs the project's key, its "
                   "reviewer key or the admin key")
KEY_MAKER_NEEDED = "making keys needs the project's key or the admin key"


class AnswerOwner(NamedTuple):
    """Whose an answer is: its annotator (None: posted without one) and whether it is a
    reviewer's (a resolution, or an answer imported with the role ``reviewer``)."""

    annotator: str | None
    reviewer: bool = False


@dataclass(frozen=True)
class Caller:
    """Whom a request's key lets in, and as whom (:data:`Role`).

    Found once per request, before its body is read, by :class:`app.middleware.KeyCheck`,
    which keeps it on ``request.state.caller``; the routes' dependencies apply their rule to
    it without looking the key up again, and the services that remove answers ask it
    (:meth:`check_retract`) whose answers it may remove.
    """

    role: Role
    """``admin`` is the admin key, or anyone when the service runs open."""
    project_id: int | None = None
    """The project whose key was given (None for the admin)."""
    annotator: str | None = None
    """The annotator of an annotator key (None for every other role)."""

    @property
    def admin(self) -> bool:
        """The admin key, or anyone when the service runs open."""
        return self.role == "admin"

    @property
    def reviewer(self) -> bool:
        """The project's reviewer key (it opens the project and resolves its disagreements)."""
        return self.role == "reviewer"

    def check_admin(self) -> None:
        """Raise :class:`Forbidden` unless the caller may manage projects."""
        if not self.admin:
            raise Forbidden("a project key cannot manage projects; this route needs the admin key")

    def check_project(self, project_id: int | None) -> None:
        """Raise :class:`Forbidden` unless the caller holds a key of project ``project_id``
        (any role).

        ``project_id=None`` (a path whose id is not even an id) lets any caller through and
        leaves the answer to the route.
        """
        if not self.admin and project_id is not None and self.project_id != project_id:
            raise Forbidden("this API key belongs to another project")

    def check_team(self, project_id: int) -> None:
        """Raise :class:`Forbidden` unless the caller may use the project's team routes:
        the admin, the project key or the reviewer key (not an annotator key)."""
        self.check_project(project_id)
        if self.role == "annotator":
            raise Forbidden(TEAM_KEY_NEEDED)

    def check_key_maker(self, project_id: int) -> None:
        """Raise :class:`Forbidden` unless the caller may make the project's keys: the
        admin or the project key (a reviewer or annotator key makes none)."""
        self.check_project(project_id)
        if self.role not in ("admin", "project"):
            raise Forbidden(KEY_MAKER_NEEDED)

    def check_reviewer(self, project_id: int) -> None:
        """Raise :class:`Forbidden` unless the caller may resolve the project's
        disagreements: the admin (anyone when the service runs open) or its reviewer key."""
        self.check_project(project_id)
        if not self.admin and not self.reviewer:
            raise Forbidden("resolving needs the admin key or the project's reviewer key "
                            "(POST /projects/{pid}/reviewer-key)")

    def speaks_for(self, annotator: str | None) -> str | None:
        """The annotator a request acts as: an annotator key's own name (``annotator``
        absent or equal to it; another name is :class:`Forbidden`), else ``annotator``
        itself (the project's tools may name anyone)."""
        if self.role != "annotator":
            return annotator
        if annotator is not None and annotator != self.annotator:
            raise Forbidden(f"an annotator key speaks for {self.annotator!r} only, "
                            f"not for {annotator!r}")
        return self.annotator

    def check_retract(self, owners: Iterable[AnswerOwner]) -> None:
        """Raise :class:`Forbidden` unless the caller may remove every answer of ``owners``.

        A reviewer's answer needs the reviewer key or the admin key; an annotator key
        removes its own answers only (and nothing that rests on no answer of its own); the
        project key removes every other answer.
        """
        if self.role in ("admin", "reviewer"):
            return
        owners = list(owners)
        if any(owner.reviewer for owner in owners):
            raise Forbidden("a reviewer's answer is retracted only with the project's "
                            "reviewer key or the admin key")
        if self.role != "annotator":
            return
        others = sorted({str(o.annotator) for o in owners if o.annotator != self.annotator})
        if others or not owners:
            whose = ", ".join(others) if others else "nobody's answer"
            raise Forbidden(f"an annotator key retracts only its own answers; this rests on "
                            f"{whose} (the project's key, its reviewer key or the admin key "
                            "may retract it)")


ANYONE = Caller("admin")
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
        return Caller("admin")
    owner = owner_of(key)
    if owner is None:
        raise Unauthorized("unknown API key")
    return Caller(owner.role, owner.project_id, owner.annotator)


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
    """The team's routes of a project need its key, its reviewer key or the admin key when
    keys are configured (an annotator key is 403).

    ``key`` puts the header in the OpenAPI schema; its holder is the request's caller.
    """
    caller_of(request).check_team(project_id)


def require_member(project_id: ProjectIdPath, request: Request, key: ApiKeyDep) -> None:
    """The routes an annotator needs take any key of the project (an annotator key too)."""
    caller_of(request).check_project(project_id)


def require_key_maker(project_id: ProjectIdPath, request: Request, key: ApiKeyDep) -> None:
    """Making a project's keys needs its key or the admin key (when keys are configured)."""
    caller_of(request).check_key_maker(project_id)


def require_reviewer(project_id: ProjectIdPath, request: Request, key: ApiKeyDep) -> None:
    """Resolving a disagreement needs the admin key or the project's reviewer key (when keys
    are configured; open otherwise)."""
    caller_of(request).check_reviewer(project_id)


AdminDep = Depends(require_admin)
ReviewerDep = Depends(require_reviewer)
ProjectKeyDep = Depends(require_project_key)
MemberDep = Depends(require_member)
KeyMakerDep = Depends(require_key_maker)
CallerDep = Annotated[Caller, Depends(caller_of)]
