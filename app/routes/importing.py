"""``/projects/{pid}/import``: a JSON Lines or CSV file, streamed, validated whole, then written.

The body is spooled to a temporary file as it arrives (no lock is held meanwhile), under its
own size limit ``SPORAL_MAX_IMPORT_BYTES`` instead of ``SPORAL_MAX_BODY_BYTES``, and under
``SPORAL_MAX_IMPORT_SPOOL_BYTES`` for all the imports of the process together (past it, 503
with ``Retry-After`` before the rest is read); then the import reads it twice
(:mod:`app.services.importing`): to validate, then to write.

A file over ``SPORAL_IMPORT_ASYNC_BYTES``, or any file sent with ``Prefer: respond-async``, is
imported by a job (:mod:`app.services.jobs`, kind ``import``): the route answers ``202
Accepted`` once the body is spooled, and the job validates and writes it as the request would
have, its ``result`` the same summary; the spool (and its share of the budget) is held until
the job ends. An import's job is never superseded: it queues behind the project's waiting job.
"""

from __future__ import annotations

import tempfile
import threading
import time
from functools import partial
from typing import IO, Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.errors import ImportsBusy, PayloadTooLarge, ValidationFailed
from app.routes.common import StrictJSONRoute, get_runtime, problem_responses
from app.routes.jobs import accepted, asks_async
from app.runtime import Runtime
from app.schemas import JobAccepted
from app.security import ProjectIdPath, ProjectKeyDep
from app.services.importing import (
    ImportSummary,
    InputLimits,
    Parsed,
    Progress,
    Source,
    file_source,
    import_source,
)
from app.services.jobs import IMPORT, JobContext, JobRunner
from app.services.staging import StagePolicy
from app.services.unit import ProjectWork

__all__ = ["router", "IMPORT_PATH"]

IMPORT_PATH = r"^/projects/[^/]+/import/?$"
"""The paths whose bodies stream under SPORAL_MAX_IMPORT_BYTES (see app.middleware)."""

SPOOL_IN_MEMORY = 8 * 1024 * 1024

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


def _import_spooled(runtime: Runtime, project_id: int, spool: IO[bytes],
                    fmt: Literal["jsonl", "csv"], job: JobContext | None = None
                    ) -> ImportSummary:
    """Validate the spooled file, then write it, in the project's unit of work (reporting
    to ``job``, and stopping when it is cancelled, when a job runs it)."""
    def reopen() -> _Unclosed:
        spool.seek(0)
        return _Unclosed(spool)

    limits = InputLimits.of(runtime.settings)
    source = file_source(reopen, fmt, limits)
    with runtime.open(ProjectWork, project_id) as work:
        if job is None:
            return import_source(work, source, policy=StagePolicy.of(runtime.settings))
        return import_source(work, _job_source(source, spool, job),
                             progress=_job_progress(work, job),
                             policy=StagePolicy.of(runtime.settings))


YIELD_EVERY = 1000
"""Lines between two pauses of an import's job, which let the request threads run."""


def _job_source(source: Source, spool: IO[bytes], job: JobContext) -> Source:
    """``source`` read by a job: the first pass (the validation) reports its progress by the
    bytes read and stops when the job is cancelled; every pass pauses every
    :data:`YIELD_EVERY` lines, so that a request of another project gets the interpreter
    between two lines rather than after a switch interval of the job's parsing."""
    passes = 0
    size = max(spool.seek(0, 2), 1)
    spool.seek(0)

    def records() -> Parsed:
        nonlocal passes
        passes += 1
        first = passes == 1
        for n, record in enumerate(source(), 1):
            if n % YIELD_EVERY == 0:
                time.sleep(0)
                if first:
                    job.progress(0.5 * min(spool.tell() / size, 1.0), "validating")
            yield record

    return records


def _job_progress(work: ProjectWork, job: JobContext) -> Progress:
    """The import's progress as the job's, and a cancellation check at every step.

    A step inside the import's write transaction only reads whether the job was cancelled
    (the job's row is written by its own connection, which would wait for that transaction's
    lock); a step between two short writes of a staged import records the progress too. The
    last step comes before the import's commit, so a cancelled import stores nothing.
    """
    done = 0

    def progress(count: int, total: int) -> None:
        nonlocal done
        done += count
        if work.in_transaction:
            job.check_cancelled()
        else:
            job.progress(0.5 + 0.5 * min(done / max(total, 1), 1.0), "writing")

    return progress


def _import_job(runtime: Runtime, project_id: int, spooled: _Spooled,
                fmt: Literal["jsonl", "csv"], job: JobContext) -> dict[str, Any]:
    """An import's job: the synchronous import of the spooled file; its summary."""
    job.progress(0.0, "validating")
    summary = _import_spooled(runtime, project_id, spooled.spool, fmt, job)
    return summary.model_dump(mode="json")


class _Spooled:
    """A spooled body and its share of the budget, released once (by the route, or by the
    job that took it over)."""

    def __init__(self, spool: IO[bytes], budget: SpoolBudget) -> None:
        self.spool, self.budget, self.size = spool, budget, 0
        self.handed = False  # a job took it over: the job releases it when it ends
        self._lock = threading.Lock()
        self._released = False

    def write(self, chunk: bytes) -> None:
        if not self.budget.take(len(chunk)):
            raise ImportsBusy(self.budget.total)
        self.size += len(chunk)
        self.spool.write(chunk)

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        try:
            self.spool.close()
        finally:
            self.budget.give(self.size)


class SpoolBudget:
    """The bytes the imports of one process hold spooled, all together, under a total."""

    def __init__(self, total: int) -> None:
        self.total, self.used = total, 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Count ``size`` more bytes; False (nothing counted) when that would pass the total."""
        with self._lock:
            if self.used + size > self.total:
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size


def spool_budget(request: Request) -> SpoolBudget:
    """The process's :class:`SpoolBudget` (made on the first import)."""
    budget: SpoolBudget | None = getattr(request.app.state, "import_spool", None)
    if budget is None:
        budget = SpoolBudget(request.app.state.settings.max_import_spool_bytes)
        request.app.state.import_spool = budget
    return budget


class _Unclosed:
    """The spooled file for one pass: closing it only rewinds (the route closes it)."""

    def __init__(self, spool: IO[bytes]) -> None:
        self.spool = spool

    def __enter__(self) -> IO[bytes]:
        return self.spool

    def __exit__(self, *exc: object) -> None:
        if not self.spool.closed:  # a pass given up is closed later, maybe after the job
            self.spool.seek(0)


def new_spool() -> IO[bytes]:
    """The temporary file a body is spooled to (in memory up to SPOOL_IN_MEMORY bytes)."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115


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
    limit: int = request.app.state.settings.max_import_bytes
    fmt: Literal["jsonl", "csv"] = format or (
        "csv" if request.headers.get("content-type", "").startswith("text/csv") else "jsonl")
    spooled = _Spooled(new_spool(), spool_budget(request))
    try:
        async for chunk in request.stream():
            if spooled.size + len(chunk) > limit:
                raise PayloadTooLarge(f"more than {limit} bytes", limit)
            spooled.write(chunk)
        if not spooled.size:  # the body is required: an empty file is a mistake, not a no-op
            raise ValidationFailed("the import needs a body: the file's records",
                                   errors=[{"loc": ["body"], "msg": "empty body",
                                            "type": "missing"}])
        asked = asks_async(prefer)
        if asked or spooled.size > request.app.state.settings.import_async_bytes:
            return await run_in_threadpool(_submit, request, project_id, spooled, fmt, asked)
        return await run_in_threadpool(_import_spooled, get_runtime(request), project_id,
                                       spooled.spool, fmt)
    finally:
        if not spooled.handed:
            spooled.release()


def _submit(request: Request, project_id: int, spooled: _Spooled,
            fmt: Literal["jsonl", "csv"], asked: bool) -> JSONResponse:
    """Hand the spooled file to a job of kind ``import``: the 202 (in a worker thread)."""
    runner: JobRunner = request.app.state.jobs
    runtime = get_runtime(request)
    job = runner.submit(project_id, IMPORT, partial(_import_job, runtime, project_id,
                                                    spooled, fmt),
                        cleanup=spooled.release)
    spooled.handed = True
    return accepted(job, {"received_bytes": spooled.size, "format": fmt}, asked=asked,
                    root_path=request.scope.get("root_path", ""))
