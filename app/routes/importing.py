"""``/projects/{pid}/import``: a JSON Lines or CSV file, streamed, validated whole, then written.

The body is spooled to a temporary file as it arrives (no lock is held meanwhile), under its
own size limit ``SPORAL_MAX_IMPORT_BYTES`` instead of ``SPORAL_MAX_BODY_BYTES``, and under
``SPORAL_MAX_IMPORT_SPOOL_BYTES`` for all the imports of the process together (past it, 503
with ``Retry-After`` before the rest is read); then the import reads it twice
(:mod:`app.services.importing`): to validate, then to write. The spool, its budget and the
import's job are the service's (:mod:`app.services.importing.spooling`); the route reads the
request and picks the answer.

A file over ``SPORAL_IMPORT_ASYNC_BYTES``, or any file sent with ``Prefer: respond-async``, is
imported by a job (:mod:`app.services.jobs`, kind ``import``): the route answers ``202
Accepted`` once the body is spooled, and the job validates and writes it as the request would
have, its ``result`` the same summary; the spool (and its share of the budget) is held until
the job ends. An import's job is never superseded: it queues behind the project's waiting job.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.errors import ValidationFailed
from app.routes.common import StrictJSONRoute, get_runtime, problem_responses
from app.routes.jobs import accepted, asks_async
from app.schemas import JobAccepted
from app.security import ProjectIdPath, ProjectKeyDep, caller_of
from app.services.importing import ImportSummary
from app.services.importing.spooling import (
    SpoolBudget,
    Spooled,
    import_job,
    import_spooled,
)
from app.services.jobs import IMPORT, JobRunner
from app.settings import Settings

__all__ = ["router", "IMPORT_PATH"]

IMPORT_PATH = r"^/projects/[^/]+/import/?$"
"""The paths whose bodies stream under SPORAL_MAX_IMPORT_BYTES (see app.middleware)."""

router = APIRouter(prefix="/projects/{project_id}", tags=["import"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 409, 413, 422, 503),
                   route_class=StrictJSONRoute)

Format = Annotated[Literal["jsonl", "csv"] | None, Query(
    description="The file's format (docs/formats.md); default from the Content-Type: "
    "text/csv is CSV, anything else JSON Lines.")]

PreferHeader = Annotated[str | None, Header(
    alias="Prefer", description="`respond-async`: answer 202 with a job that imports the file, "
    "whatever its size.")]


def spool_budget(request: Request) -> SpoolBudget:
    """The process's :class:`SpoolBudget` (made on the first import)."""
    budget: SpoolBudget | None = getattr(request.app.state, "import_spool", None)
    if budget is None:
        budget = SpoolBudget(request.app.state.settings.max_import_spool_bytes)
        request.app.state.import_spool = budget
    return budget


@router.post("/import", response_model=ImportSummary, openapi_extra={"requestBody": {
    "required": True, "content": {
        "application/jsonl": {"schema": {"type": "string"}},
        "text/csv": {"schema": {"type": "string"}}}}},
    responses={202: {"model": JobAccepted, "description": "The file is spooled; the job at "
                     "`Location` (kind `import`) validates and writes it, its `result` the "
                     "summary (`Prefer: respond-async`, or a file over "
                     "SPORAL_IMPORT_ASYNC_BYTES).",
                     "headers": {"Location": {"schema": {"type": "string"},
                                              "description": "The job's path."}}}})
async def import_file(project_id: ProjectIdPath, request: Request, format: Format = None,
                      prefer: PreferHeader = None) -> ImportSummary | JSONResponse:
    """Import concepts, pool pairs and labels from a JSON Lines or CSV file (docs/formats.md).

    Every record is validated before anything is written; a file with bad lines is refused
    (422 `invalid-items`, each bad line with its number) and nothing is stored. Exempt from
    SPORAL_MAX_BODY_BYTES; limited by SPORAL_MAX_IMPORT_BYTES, and 503 `imports-busy` (with
    Retry-After) while the imports running spool SPORAL_MAX_IMPORT_SPOOL_BYTES together.
    A file over SPORAL_IMPORT_ASYNC_BYTES, or sent with `Prefer: respond-async`, is imported
    by a job: 202 with its `Location`; the job's `result` is this summary, its `problem` the
    refusal (503 `jobs-busy` with nothing spooled kept past SPORAL_MAX_JOBS).
    """
    settings: Settings = request.app.state.settings
    fmt: Literal["jsonl", "csv"] = format or (
        "csv" if request.headers.get("content-type", "").startswith("text/csv") else "jsonl")
    spooled = Spooled(spool_budget(request), settings.max_import_bytes)
    try:
        async for chunk in request.stream():
            spooled.write(chunk)
        if not spooled.size:  # the body is required: an empty file is a mistake, not a no-op
            raise ValidationFailed("the import needs a body: the file's records",
                                   errors=[{"loc": ["body"], "msg": "empty body",
                                            "type": "missing"}])
        asked = asks_async(prefer)
        if asked or spooled.size > settings.import_async_bytes:
            return await run_in_threadpool(_submit, request, project_id, spooled, fmt, asked)
        runtime = get_runtime(request)
        return await run_in_threadpool(import_spooled, runtime, runtime.settings, project_id,
                                       spooled.spool, fmt, caller_of(request))
    finally:
        if not spooled.handed:
            spooled.release()


def _submit(request: Request, project_id: int, spooled: Spooled,
            fmt: Literal["jsonl", "csv"], asked: bool) -> JSONResponse:
    """Hand the spooled file to a job of kind ``import``: the 202 (in a worker thread)."""
    runner: JobRunner = request.app.state.jobs
    runtime = get_runtime(request)
    job = runner.submit(project_id, IMPORT, partial(import_job, runtime, runtime.settings,
                                                    project_id, spooled, fmt,
                                                    caller_of(request)),
                        cleanup=spooled.release)
    spooled.handed = True
    return accepted(job, {"received_bytes": spooled.size, "format": fmt}, asked=asked,
                    root_path=request.scope.get("root_path", ""))
