"""What the routers share: paging parameters, the documented error answers, dependencies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError, WithJsonSchema
from starlette.responses import Response, StreamingResponse

from app.db import SessionDep
from app.errors import PROBLEM_MEDIA_TYPE, PROBLEMS
from app.runtime import Runtime
from app.schemas import MAX_LIMIT, Problem
from app.security import ProjectIdPath
from app.services.idempotency import InFlight
from app.services.state import StateRegistry
from app.services.unit import ProjectView, ProjectWork
from app.settings import Settings

__all__ = [
    "CSV_RESPONSE",
    "Fresh",
    "TableFormat",
    "csv_download",
    "InFlightDep",
    "Limit",
    "Offset",
    "ReadProject",
    "WriteProject",
    "RegistryDep",
    "SettingsDep",
    "get_runtime",
    "problem_responses",
]

MAX_OFFSET = 2**31 - 1

V = TypeVar("V", bound=ProjectView)

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size (at most {MAX_LIMIT}).")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip.")]
Fresh = Annotated[bool, Query(description="Wait for a model trained on the current labels "
                                          "(at most SPORAL_FRESH_TIMEOUT, then 503).")]
TableFormat = Annotated[Literal["json", "csv"], Query(description=(
    "`json` (the default) or `csv`: the same rows as a CSV download (`text/csv`, a file "
    "name); anything else is 422."))]
CSV_MEDIA_TYPE = "text/csv; charset=utf-8"
CSV_RESPONSE: dict[str, Any] = {"content": {CSV_MEDIA_TYPE: {"schema": {"type": "string"}}}}
"""The OpenAPI entry of a route's 200 that also answers ``format=csv``."""


def csv_download(chunks: Iterator[bytes], filename: str) -> StreamingResponse:
    """A CSV download streamed from ``chunks``, saved as ``filename``."""
    return StreamingResponse(chunks, media_type=CSV_MEDIA_TYPE, headers={
        "Content-Disposition": f'attachment; filename="{filename}"'})

_PROBLEM_SCHEMA = Problem.model_json_schema()

_DESCRIPTIONS = {
    401: "Missing or unknown API key (only when SPORAL_ADMIN_KEY is set).",
    403: "The API key belongs to another project, or the route needs the admin key.",
    404: "No such project (or label).",
    409: "Conflict: a contradiction with its proof, an idempotent request still running, or a "
         "concurrent change of the same data (retry).",
    413: "The request body exceeds the configured size limit.",
    422: "Invalid request: schema violations, unknown concepts, invalid items.",
    503: "The database stayed locked longer than the busy timeout, or (with `fresh=true`) no "
         "model trained on the current labels was ready in time; retry.",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem+json answers a route can give."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        kinds = [k for k in PROBLEMS.values() if k.status == status]
        types = ", ".join(f"`{k.type}`" for k in kinds)
        out[status] = {
            "description": f"{_DESCRIPTIONS[status]} Problem types: {types}.",
            "content": {PROBLEM_MEDIA_TYPE: {"schema": _PROBLEM_SCHEMA}},
        }
    return out


def get_registry(request: Request) -> StateRegistry:
    registry: StateRegistry = request.app.state.project_states
    return registry


def get_settings_of_app(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_inflight(request: Request) -> InFlight:
    inflight: InFlight = request.app.state.inflight
    return inflight


RegistryDep = Annotated[StateRegistry, Depends(get_registry)]
SettingsDep = Annotated[Settings, Depends(get_settings_of_app)]
InFlightDep = Annotated[InFlight, Depends(get_inflight)]


def get_runtime(request: Request) -> Runtime:
    """The application's :class:`~app.runtime.Runtime` (what reaches its projects)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def _unit_slots(request: Request) -> anyio.Semaphore:
    slots: anyio.Semaphore | None = getattr(request.app.state, "unit_slots", None)
    if slots is None:
        threads = get_settings_of_app(request).request_threads
        slots = request.app.state.unit_slots = anyio.Semaphore(max(1, threads - 1))
    return slots


async def _unit_slot(request: Request) -> AsyncIterator[None]:
    """Fewer requests inside a unit of work than request threads, waiting on the event loop.

    A request waits for its project's lock in a request thread, and the request that holds
    the lock needs a thread to run its handler: with every thread waiting on one project's
    lock, nothing ran again (80 concurrent labels on one project stalled every project for
    good). With one thread always left over, the holder always finds one.
    """
    async with _unit_slots(request):
        yield


def _unit_of_work(kind: type[V]) -> Callable[..., Iterator[V]]:
    def dependency(project_id: ProjectIdPath, session: SessionDep, request: Request,
                   _slot: Annotated[None, Depends(_unit_slot, scope="function")]
                   ) -> Iterator[V]:
        with get_runtime(request).open(kind, project_id, session) as unit:
            yield unit

    return dependency


# The one way a route reaches a project: its unit of work (app.runtime, app.services.unit),
# caught up, locked for the handler only ("function" scope: released before the answer is
# sent), in the request's session.
ReadProject = Annotated[ProjectView,
                        Depends(_unit_of_work(ProjectView), scope="function")]
WriteProject = Annotated[ProjectWork,
                         Depends(_unit_of_work(ProjectWork), scope="function")]


class _DuplicateKey(json.JSONDecodeError):
    """A JSON object names ``key`` twice (FastAPI reports any decode error as a 422)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r} in a JSON object", "", 0)
        self.key = key


def _without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


PARSE_IN_THREAD = 1 << 20
"""A JSON body of this many bytes or more is parsed in a worker thread, not in the event loop
(a bulk of 50,000 labels: some 70 ms during which no other request of any project moves)."""


def _strict_loads(raw: bytes) -> Any:
    return json.loads(raw, object_pairs_hook=_without_duplicates)


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_strict_json"):
            raw = await self.body()
            self._strict_json = (await anyio.to_thread.run_sync(_strict_loads, raw)
                                 if len(raw) >= PARSE_IN_THREAD else _strict_loads(raw))
        return self._strict_json


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with every ``#/$defs/`` reference replaced by its definition."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline(value, defs) for key, value in schema.items() if key != "$defs"}
    if isinstance(schema, list):
        return [_inline(value, defs) for value in schema]
    return schema


def documented_as(model: type[BaseModel]) -> WithJsonSchema:
    """The OpenAPI schema of ``model`` for a body taken as any JSON object
    (``Annotated[dict[str, Any], documented_as(Model), Body()]``) that the route validates
    with :func:`validate_body`, in its worker thread: FastAPI validates a declared body in the
    event loop, where 50,000 labels take 0.2-0.5 s of every other request's time."""
    full = model.model_json_schema()
    return WithJsonSchema(_inline(full, full.get("$defs", {})))


Model = TypeVar("Model", bound=BaseModel)


def validate_body(model: type[Model], raw: dict[str, Any]) -> Model:
    """``raw`` as ``model``, or the 422 problem FastAPI gives for a declared body."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])}
                                      for error in exc.errors(include_url=False)]) from None


class StrictJSONRoute(APIRoute):
    """A route whose JSON body may not name a key twice in one object: 422 naming the key.

    Python's ``json`` keeps the last value of a repeated key, so ``{"label": "positive",
    "label": "negative"}`` was stored as negative without a word; other parsers keep the first.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            try:
                return await handler(_StrictJSONRequest(request.scope, request.receive))
            except RequestValidationError as exc:
                if not isinstance(exc.__cause__, _DuplicateKey):
                    raise
                raise RequestValidationError([{
                    "type": "json_duplicate_key", "loc": ("body",), "msg": exc.__cause__.msg,
                    "input": {}}]) from None

        return strict


__all__ += ["PARSE_IN_THREAD", "StrictJSONRoute", "documented_as", "validate_body"]
