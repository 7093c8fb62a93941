"""``/projects/{pid}/import``: a JSON Lines or CSV file, streamed, validated whole, then written.

The body is spooled to a temporary file as it arrives (no lock is held meanwhile), under its
own size limit ``SPORAL_MAX_IMPORT_BYTES`` instead of ``SPORAL_MAX_BODY_BYTES``, and under
``SPORAL_MAX_IMPORT_SPOOL_BYTES`` for all the imports of the process together (past it, 503
with ``Retry-After`` before the rest is read); then the import reads it twice
(:mod:`app.services.importing`): to validate, then to write.
"""

from __future__ import annotations

import tempfile
import threading
from typing import IO, Annotated, Literal

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from app.errors import ImportsBusy, PayloadTooLarge, ValidationFailed
from app.routes.common import StrictJSONRoute, get_runtime, problem_responses
from app.runtime import Runtime
from app.security import ProjectIdPath, ProjectKeyDep
from app.services.importing import ImportSummary, InputLimits, file_source, import_source
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


def _import_spooled(runtime: Runtime, project_id: int, spool: IO[bytes],
                    fmt: Literal["jsonl", "csv"]) -> ImportSummary:
    """Validate the spooled file, then write it, in the project's unit of work."""
    def reopen() -> _Unclosed:
        spool.seek(0)
        return _Unclosed(spool)

    limits = InputLimits.of(runtime.settings)
    with runtime.open(ProjectWork, project_id) as work:
        return import_source(work, file_source(reopen, fmt, limits),
                             policy=StagePolicy.of(runtime.settings))


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
        self.spool.seek(0)


@router.post("/import", response_model=ImportSummary, openapi_extra={"requestBody": {
    "required": True, "content": {
        "application/jsonl": {"schema": {"type": "string"}},
        "text/csv": {"schema": {"type": "string"}}}}})
async def import_file(project_id: ProjectIdPath, request: Request,
                      format: Format = None) -> ImportSummary:
    """Import concepts, pool pairs and labels from a JSON Lines or CSV file (docs/formats.md).

    Every record is validated before anything is written; a file with bad lines is refused
    (422 `invalid-items`, each bad line with its number) and nothing is stored. Exempt from
    SPORAL_MAX_BODY_BYTES; limited by SPORAL_MAX_IMPORT_BYTES, and 503 `imports-busy` (with
    Retry-After) while the imports running spool SPORAL_MAX_IMPORT_SPOOL_BYTES together.
    """
    limit: int = request.app.state.settings.max_import_bytes
    fmt: Literal["jsonl", "csv"] = format or (
        "csv" if request.headers.get("content-type", "").startswith("text/csv") else "jsonl")
    budget = spool_budget(request)
    received = 0
    try:
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            async for chunk in request.stream():
                if received + len(chunk) > limit:
                    raise PayloadTooLarge(f"more than {limit} bytes", limit)
                if not budget.take(len(chunk)):
                    raise ImportsBusy(budget.total)
                received += len(chunk)
                spool.write(chunk)
            return await _import_received(request, project_id, spool, received, fmt)
    finally:
        budget.give(received)


async def _import_received(request: Request, project_id: int, spool: IO[bytes],
                           received: int, fmt: Literal["jsonl", "csv"]) -> ImportSummary:
    """The import of the spooled body (``received`` bytes), in a worker thread."""
    if not received:  # the body is required: an empty file is a mistake, not a no-op
        raise ValidationFailed("the import needs a body: the file's records",
                               errors=[{"loc": ["body"], "msg": "empty body",
                                        "type": "missing"}])
    return await run_in_threadpool(_import_spooled, get_runtime(request), project_id,
                                   spool, fmt)
