"""ASGI middleware: API keys checked before the body, and a request-body size limit.

:class:`KeyCheck` finds whom a request under ``/projects`` comes from before one byte of its
body is read, and refuses it there when its key cannot open it (FastAPI reads and parses the
body before it runs the route's dependencies, so a 60 MB body without a key was parsed before
its 401).

:class:`BodySizeLimit`: a body larger than the limit is refused with 413 before anything parses
it: at once when its ``Content-Length`` says so, otherwise as soon as the bytes received pass
the limit (chunked uploads). The accepted body is buffered and handed on unchanged.
"""

from __future__ import annotations

import re
from functools import partial

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db import Database
from app.errors import Forbidden, PayloadTooLarge, ProblemResponse, Unauthorized, problem_body
from app.security import (
    ADMIN_KEY_NEEDED,
    ANYONE,
    MAX_ID,
    PROJECT_KEY_NEEDED,
    Caller,
    identify,
    project_of_key,
)
from app.settings import Settings

__all__ = ["BodySizeLimit", "KeyCheck"]

_ADMIN_PATH = re.compile(r"/projects/?")
_PROJECT_PATH = re.compile(r"/projects/([^/]+)(?:/.*)?")


class KeyCheck:
    """Find the caller of a request under ``/projects`` from its key, and refuse it unread
    when the key cannot open the path.

    ``/projects`` itself needs the admin key; ``/projects/{id}/...`` needs a key of that
    project (its key, its reviewer key or one of its annotator keys) or the admin key; which
    role may use which route is the routes' dependencies' to say. The refusal is a 401 or
    403 problem. The caller
    (:class:`app.security.Caller`) is kept on ``request.state.caller``, where the routes'
    dependencies (:func:`app.security.require_admin`, :func:`app.security.require_project_key`)
    read it: the key is looked up once per request, here. When the service runs open every
    caller is :data:`app.security.ANYONE`.
    """

    def __init__(self, app: ASGIApp, settings: Settings, database: Database) -> None:
        self.app = app
        self.settings = settings
        self.database = database

    def _caller(self, key: str | None, project: str | None) -> Caller:
        """The caller of ``key`` if it may open ``project`` (None: ``/projects`` itself)."""
        with self.database.sessions() as session:
            owner_of = partial(project_of_key, session)
            if project is None:
                caller = identify(self.settings, key, owner_of, missing=ADMIN_KEY_NEEDED)
                caller.check_admin()
                return caller
            caller = identify(self.settings, key, owner_of, missing=PROJECT_KEY_NEEDED)
        project_id = int(project) if project.isdigit() and len(project) <= 10 else 0
        caller.check_project(project_id if 1 <= project_id <= MAX_ID else None)
        return caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        matched = _PROJECT_PATH.fullmatch(path)
        if matched is None and _ADMIN_PATH.fullmatch(path) is None:
            await self.app(scope, receive, send)
            return
        if self.settings.open_mode:
            caller = ANYONE
        else:
            key = next((value.decode("latin-1") for name, value in scope.get("headers", ())
                        if name == b"x-api-key"), None)
            try:
                # A project key is looked up in the database: off the event loop.
                caller = await run_in_threadpool(self._caller, key,
                                                 matched and matched.group(1))
            except (Unauthorized, Forbidden) as error:
                body = problem_body(error.slug, error.detail, scope.get("path", ""))
                response = ProblemResponse(body, status_code=error.kind.status,
                                           headers=error.headers)
                await response(scope, receive, send)
                return
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path the routes see: without the ``root_path`` the service is mounted under."""
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):len(root) + 1] in ("", "/"):
        return path[len(root):]
    return path


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with a 413 problem."""

    def __init__(self, app: ASGIApp, max_bytes: int, *, streamed: str | None = None,
                 max_streamed_bytes: int = 0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # Paths matching ``streamed`` (the file import) are passed on unbuffered: their route
        # reads the stream itself and counts it against ``max_streamed_bytes``.
        self.streamed = re.compile(streamed) if streamed else None
        self.max_streamed_bytes = max_streamed_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: str,
                      limit: int | None = None) -> None:
        error = PayloadTooLarge(size, self.max_bytes if limit is None else limit)
        body = problem_body(error.slug, error.detail, scope.get("path"))
        response = ProblemResponse(body, status_code=error.kind.status, headers=error.headers)
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.streamed is not None and self.streamed.match(scope.get("path", "")):
            declared = _declared(scope)
            if declared > self.max_streamed_bytes:
                await self._refuse(scope, receive, send, f"{declared} bytes",
                                   self.max_streamed_bytes)
                return
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._refuse(scope, receive, send, f"{declared} bytes")
                    return
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._refuse(scope, receive, send, f"more than {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        await self.app(scope, _replay([{"type": "http.request", "body": body,
                                        "more_body": False}], receive), send)


def _declared(scope: Scope) -> int:
    """The request's ``Content-Length`` (-1 when absent or unreadable)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return -1


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that first returns ``messages``, then defers to the real one."""
    queue = list(messages)

    async def replay() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay
