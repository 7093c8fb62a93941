"""An import's body spooled to a temporary file, then imported from it by a request or a job.

The body is spooled as it arrives (no lock is held meanwhile) under its own size limit
``SPORAL_MAX_IMPORT_BYTES``, and under ``SPORAL_MAX_IMPORT_SPOOL_BYTES`` for all the imports of
the process together (:class:`SpoolBudget`); the import then reads it twice (to validate, then
to write). A job that imports it (kind ``import``) holds the spool, and its share of the
budget, until it ends; it reports its progress and stops when it is cancelled.
"""

from __future__ import annotations

import tempfile
import threading
import time
from typing import IO, Any, Literal

from app.errors import ImportsBusy, PayloadTooLarge
from app.security import Caller
from app.services.importing.readers import InputLimits, file_source
from app.services.importing.records import ImportSummary, Parsed, Source
from app.services.importing.writing import Progress, import_source
from app.services.jobs import JobContext
from app.services.staging import StagePolicy
from app.services.unit import ProjectOpener, ProjectWork
from app.settings import Settings

__all__ = [
    "SPOOL_IN_MEMORY",
    "YIELD_EVERY",
    "SpoolBudget",
    "Spooled",
    "import_job",
    "import_spooled",
    "new_spool",
]

SPOOL_IN_MEMORY = 8 * 1024 * 1024
"""Bytes of a spool kept in memory before it moves to a temporary file on disk."""

YIELD_EVERY = 1000
"""Lines between two pauses of an import's job, which let the request threads run."""


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


def new_spool() -> IO[bytes]:
    """The temporary file a body is spooled to (in memory up to SPOOL_IN_MEMORY bytes)."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115


class Spooled:
    """A body spooled (:func:`new_spool`) under ``limit`` bytes and its share of ``budget``,
    released once (by the request, or by the job that took it over)."""

    def __init__(self, budget: SpoolBudget, limit: int) -> None:
        self.spool, self.budget, self.limit, self.size = new_spool(), budget, limit, 0
        self.handed = False  # a job took it over: the job releases it when it ends
        self._lock = threading.Lock()
        self._released = False

    def write(self, chunk: bytes) -> None:
        """Spool ``chunk``: 413 past the limit, 503 past the process's budget."""
        if self.size + len(chunk) > self.limit:
            raise PayloadTooLarge(f"more than {self.limit} bytes", self.limit)
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


class _Unclosed:
    """The spooled file for one pass: closing it only rewinds (the owner closes it)."""

    def __init__(self, spool: IO[bytes]) -> None:
        self.spool = spool

    def __enter__(self) -> IO[bytes]:
        return self.spool

    def __exit__(self, *exc: object) -> None:
        if not self.spool.closed:  # a pass given up is closed later, maybe after the job
            self.spool.seek(0)


def import_spooled(opener: ProjectOpener, settings: Settings, project_id: int,
                   spool: IO[bytes], fmt: Literal["jsonl", "csv"], caller: Caller,
                   job: JobContext | None = None) -> ImportSummary:
    """Validate the spooled file, then write it as ``caller``, in the project's unit of work
    (reporting to ``job``, and stopping when it is cancelled, when a job runs it)."""
    def reopen() -> _Unclosed:
        spool.seek(0)
        return _Unclosed(spool)

    limits = InputLimits.of(settings)
    source = file_source(reopen, fmt, limits)
    with opener.open(ProjectWork, project_id) as work:
        if job is None:
            return import_source(work, source, caller=caller, policy=StagePolicy.of(settings))
        return import_source(work, _job_source(source, spool, job), caller=caller,
                             progress=_job_progress(work, job),
                             policy=StagePolicy.of(settings))


def import_job(opener: ProjectOpener, settings: Settings, project_id: int, spooled: Spooled,
               fmt: Literal["jsonl", "csv"], caller: Caller, job: JobContext) -> dict[str, Any]:
    """An import's job: the synchronous import of the spooled file by ``caller``; its
    summary."""
    job.progress(0.0, "validating")
    summary = import_spooled(opener, settings, project_id, spooled.spool, fmt, caller, job)
    return summary.model_dump(mode="json")


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
