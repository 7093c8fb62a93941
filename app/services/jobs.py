"""Heavy work as jobs: run in the background by a few threads, recorded in the database.

A route that would hold its request (and a thread, and a database connection) for seconds
stores what it must store at once and hands the rest to :class:`JobRunner`, answering
``202 Accepted`` with the job (``GET /projects/{pid}/jobs/{id}``). The rules:

* per project at most one job runs and one waits: a newer job replaces the waiting one,
  which ends ``cancelled`` with the reason ``superseded``; except that a job of a kind in
  :data:`NEVER_SUPERSEDED` (an import: it stores what no later job redoes) is never
  replaced and replaces nothing: it queues behind the project's waiting job, and a later job
  queues behind it, each in its turn;
* one process holds at most ``max_jobs`` jobs queued or running: past it :meth:`reserve`
  raises :class:`~app.errors.JobsBusy` (503 with ``Retry-After``) before anything is stored;
* a project has at most ``heavy_requests_per_project`` heavy requests in flight in a process
  (:meth:`heavy_request`): more get :class:`~app.errors.TooManyHeavyRequests` (429) at once
  instead of queuing on the project's lock with a thread each;
* the jobs live in the ``jobs`` table, so every worker and server reads them; a job's code
  runs in the process that submitted it. At start-up (:meth:`start`) a job left ``queued`` or
  ``running`` by a process that is gone is marked ``failed`` (``interrupted by a restart``);
* a finished job is deleted ``ttl_seconds`` after it ended (lazily, by the next submit or
  read).

A job is a function of a :class:`JobContext`, run outside any request: it reports progress
with :meth:`JobContext.progress`, which also raises :class:`JobCancelled` once the job was
cancelled (``DELETE``) or the process is stopping, and returns a JSON object, the job's
``result``. A :class:`~app.errors.ServiceError` it raises becomes the job's ``problem``.
A job may come with a ``cleanup`` (e.g. deleting the file it reads), called once when it
ends, or when it is dropped without running (cancelled, superseded, shut down).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.db import Database, write_transaction
from app.errors import (
    InternalError,
    JobInterrupted,
    JobNotFound,
    JobsBusy,
    ProjectNotFound,
    ServiceError,
    TooManyHeavyRequests,
    problem_body,
)
from models import utcnow
from models.tables import Job

__all__ = [
    "AGREEMENT",
    "FINISHED",
    "IMPORT",
    "NEVER_SUPERSEDED",
    "REFIT",
    "JobCancelled",
    "JobContext",
    "JobFunction",
    "JobRecord",
    "JobRunner",
    "Reservation",
]

logger = logging.getLogger("sporal")

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "queued", "running", "succeeded", "failed", "cancelled")
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
SUPERSEDED = "superseded"
RESTARTED = "interrupted by a restart"
SHUT_DOWN = "interrupted by a shutdown"

IMPORT = "import"
"""The kind of an import's job (``POST /projects/{pid}/import``)."""
REFIT = "consensus-refit"
"""The kind of a ``consensus`` project's background refit (one queued per project at most:
:func:`app.services.labels.incremental.schedule_refit`)."""
AGREEMENT = "agreement-view"
"""The kind of a large project's agreement view computed in the background (one queued per
project at most: :func:`app.services.agreement_job.schedule_view`)."""
NEVER_SUPERSEDED = frozenset({IMPORT, REFIT, AGREEMENT})
"""Kinds of job that a newer job never replaces, and that never replace a waiting one."""

REPORT_INTERVAL = 0.5
"""Seconds between two writes of a job's progress (and two reads of its cancellation)."""


class JobCancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :meth:`JobContext.progress`: stop here, the job was cancelled."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class JobRecord:
    """A job as stored: what ``GET /projects/{pid}/jobs/{id}`` shows."""

    id: int
    project_id: int
    kind: str
    state: str
    progress: float
    message: str | None
    reason: str | None
    cancel_requested: bool
    result: dict[str, Any] | None
    problem: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: Job) -> JobRecord:
        return cls(row.id, row.project_id, row.kind, row.state, row.progress, row.message,
                   row.reason, row.cancel_requested,
                   None if row.result is None else json.loads(row.result),
                   None if row.problem is None else json.loads(row.problem),
                   row.created_at, row.updated_at, row.started_at, row.finished_at)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def location(self) -> str:
        return f"/projects/{self.project_id}/jobs/{self.id}"


class JobContext:
    """What a running job sees: its ids, progress reporting and cancellation checks."""

    def __init__(self, runner: JobRunner, job_id: int, project_id: int) -> None:
        self.runner = runner
        self.job_id = job_id
        self.project_id = project_id
        self._reported = 0.0

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Record that ``fraction`` (0 to 1) of the work is done; stop if cancelled.

        Written at most every :data:`REPORT_INTERVAL` seconds (each write is one short
        transaction). Raises :class:`JobCancelled` when the job was cancelled or the process
        is stopping: the job stops there, before it stores anything more.
        """
        if self.runner.closing:
            raise JobCancelled(SHUT_DOWN)
        if self.job_id in self.runner._cancelling:
            raise JobCancelled("cancelled")
        now = time.monotonic()
        if now - self._reported < REPORT_INTERVAL:
            return
        self._reported = now
        values: dict[str, Any] = {"progress": min(max(float(fraction), 0.0), 1.0),
                                  "updated_at": utcnow()}
        if message is not None:
            values["message"] = message
        with self.runner.database.sessions() as session, write_transaction(session):
            session.execute(update(Job).where(Job.id == self.job_id).values(**values))
            cancelled = session.scalar(select(Job.cancel_requested)
                                       .where(Job.id == self.job_id))
        if cancelled:
            raise JobCancelled("cancelled")

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the job was cancelled (one read, no write)."""
        if self.runner.closing:
            raise JobCancelled(SHUT_DOWN)
        if self.job_id in self.runner._cancelling:
            raise JobCancelled("cancelled")
        with self.runner.database.sessions() as session:
            if session.scalar(select(Job.cancel_requested).where(Job.id == self.job_id)):
                raise JobCancelled("cancelled")


JobFunction = Callable[[JobContext], dict[str, Any]]
"""A job's work: given its context, returns its result (a JSON object)."""


@dataclass
class _Pending:
    project_id: int
    run: JobFunction
    kind: str = ""
    cleanup: Callable[[], None] | None = None

    @property
    def replaceable(self) -> bool:
        return self.kind not in NEVER_SUPERSEDED

    def end(self) -> None:
        """Call the cleanup, once; an error in it is logged, never raised."""
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is None:
            return
        try:
            cleanup()
        except Exception:
            logger.exception("a job's cleanup failed")


class Reservation:
    """A place in the process's jobs, held while a route stores the change a job follows."""

    def __init__(self, runner: JobRunner, project_id: int) -> None:
        self.runner = runner
        self.project_id = project_id
        self.job: JobRecord | None = None

    def submit(self, kind: str, run: JobFunction, *,
               cleanup: Callable[[], None] | None = None) -> JobRecord:
        """Queue ``run`` as a job of ``kind`` (it replaces the project's queued job, unless
        either is of a kind in :data:`NEVER_SUPERSEDED`); ``cleanup`` runs once it ends or
        is dropped."""
        self.job = self.runner._submit(self.project_id, kind, run, cleanup)
        return self.job


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobRunner:
    """The threads that run one process's jobs, and the rules of the queue (module doc).

    Parameters
    ----------
    database : Database
        Where the jobs are recorded (each job step opens its own short session).
    workers : int
        Threads that run jobs.
    max_jobs : int
        Jobs this process may hold queued or running (503 past it).
    heavy_requests_per_project : int
        Heavy requests of one project in flight at once (429 past it).
    ttl_seconds, stale_seconds : float
        How long a finished job is kept; after how long without a sign of life a job of
        another host counts as interrupted.
    """

    def __init__(self, database: Database, *, workers: int = 2, max_jobs: int = 16,
                 heavy_requests_per_project: int = 2, ttl_seconds: float = 86_400,
                 stale_seconds: float = 120) -> None:
        self.database = database
        self.workers = workers
        self.max_jobs = max_jobs
        self.heavy_limit = heavy_requests_per_project
        self.ttl = timedelta(seconds=ttl_seconds)
        self.stale = timedelta(seconds=stale_seconds)
        self.host = socket.gethostname()
        self.owner = f"{self.host}:{os.getpid()}:{secrets.token_hex(4)}"
        self.closing = False
        self._changed = threading.Condition()
        self._pending: dict[int, _Pending] = {}
        self._running: dict[int, int] = {}  # job id -> project id
        self._reserved = 0
        self._heavy: Counter[int] = Counter()
        self._cancelling: set[int] = set()  # running here, cancelled: seen without a read
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ life cycle
    def start(self) -> int:
        """Mark the jobs of processes that are gone failed, then start the threads.

        Returns how many jobs were marked interrupted.
        """
        try:
            marked = self.recover()
        except SQLAlchemyError as exc:  # e.g. a database not migrated yet: no jobs to mark
            logger.warning("sporal: jobs not checked at start-up (%s)", type(exc).__name__)
            marked = 0
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"sporal-job-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        beat = threading.Thread(target=self._heartbeat, name="sporal-job-heartbeat",
                                daemon=True)
        beat.start()
        self._threads.append(beat)
        return marked

    def close(self, timeout: float = 5.0) -> None:
        """Stop: queued jobs end failed, running ones stop at their next progress step."""
        with self._changed:
            self.closing = True
            pending = dict(self._pending)
            self._pending.clear()
            self._changed.notify_all()
        try:
            if pending:
                self._fail(list(pending), SHUT_DOWN)
        finally:
            for dropped in pending.values():
                dropped.end()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()

    # ------------------------------------------------------------------ admission
    @contextmanager
    def heavy_request(self, project_id: int) -> Iterator[None]:
        """Count a heavy request of ``project_id`` while it runs; 429 past the limit."""
        with self._changed:
            if self._heavy[project_id] >= self.heavy_limit:
                raise TooManyHeavyRequests(project_id, self.heavy_limit)
            self._heavy[project_id] += 1
        try:
            yield
        finally:
            with self._changed:
                self._heavy[project_id] -= 1
                if self._heavy[project_id] <= 0:
                    del self._heavy[project_id]

    @contextmanager
    def reserve(self, project_id: int, kind: str = "") -> Iterator[Reservation]:
        """A place for one job of ``project_id``, taken before its change is stored.

        Raises :class:`~app.errors.JobsBusy` (nothing stored yet) when the process already
        holds ``max_jobs`` jobs; a job queued for the same project does not count when the
        new one (of ``kind``) replaces it.
        """
        with self._changed:
            if self.closing:
                raise JobsBusy(self.max_jobs)
            replaced = kind not in NEVER_SUPERSEDED and any(
                p.project_id == project_id and p.replaceable for p in self._pending.values())
            held = len(self._pending) + len(self._running) + self._reserved - replaced
            if held >= self.max_jobs:
                raise JobsBusy(self.max_jobs)
            self._reserved += 1
        try:
            yield Reservation(self, project_id)
        finally:
            with self._changed:
                self._reserved -= 1

    def submit_once(self, project_id: int, kind: str, run: JobFunction, *,
                    quiet: bool = False) -> JobRecord | None:
        """The project's queued job of ``kind`` if there is one (a job one queued per project
        suffices for, as a refit: it reads the project when it runs), else ``run`` queued as
        one. With ``quiet``, None instead of :class:`~app.errors.JobsBusy` when the process
        holds too many jobs (the next request that wants one schedules it)."""
        with self.database.sessions() as session:
            queued = session.scalar(select(Job.id).where(
                Job.project_id == project_id, Job.kind == kind, Job.state == QUEUED)
                .order_by(Job.id).limit(1))
        if queued is not None:
            return self.get(project_id, queued)
        try:
            return self.submit(project_id, kind, run)
        except JobsBusy:
            if quiet:
                return None
            raise

    def submit(self, project_id: int, kind: str, run: JobFunction, *,
               cleanup: Callable[[], None] | None = None) -> JobRecord:
        """Queue ``run`` as a job of ``project_id`` (reserve, then submit; see the rules)."""
        with self.reserve(project_id, kind) as reservation:
            return reservation.submit(kind, run, cleanup=cleanup)

    def _submit(self, project_id: int, kind: str, run: JobFunction,
                cleanup: Callable[[], None] | None = None) -> JobRecord:
        now = utcnow()
        kept = sorted(NEVER_SUPERSEDED)
        with self.database.sessions() as session:
            with write_transaction(session, project_id):
                self._sweep(session, now)
                replaced = [] if kind in NEVER_SUPERSEDED else list(session.scalars(
                    select(Job).where(Job.project_id == project_id, Job.state == QUEUED,
                                      Job.kind.not_in(kept))))
                job = Job(project_id=project_id, kind=kind, state=QUEUED, progress=0.0,
                          owner=self.owner, created_at=now, updated_at=now)
                session.add(job)
                session.flush()
                for old in replaced:
                    _end(old, CANCELLED, now, reason=SUPERSEDED,
                         message=f"superseded by job {job.id}")
                record = JobRecord.of(job)
        with self._changed:
            dropped = [self._pending.pop(old.id, None) for old in replaced]
            self._pending[record.id] = _Pending(project_id, run, kind, cleanup)
            self._changed.notify_all()
        for pending in dropped:
            if pending is not None:
                pending.end()
        return record

    # ------------------------------------------------------------------ reading, cancelling
    def get(self, project_id: int, job_id: int) -> JobRecord:
        """The job ``job_id`` of ``project_id`` (404 when absent or expired)."""
        with self.database.sessions() as session:
            row = session.get(Job, job_id)
            if row is None or row.project_id != project_id:
                raise JobNotFound(job_id)
            now = utcnow()
            expired = row.finished_at is not None and row.finished_at < now - self.ttl
            if not expired and not self._orphaned(row, now):
                return JobRecord.of(row)
            with write_transaction(session):
                row = session.get(Job, job_id, populate_existing=True)
                if row is not None and row.finished_at is not None and \
                        row.finished_at < now - self.ttl:
                    session.delete(row)  # committed: expired jobs are deleted, not hidden
                    row = None
                elif row is not None and self._orphaned(row, now):
                    _interrupt(row, now, RESTARTED)
                record = None if row is None else JobRecord.of(row)
            if record is None:
                raise JobNotFound(job_id)
            return record

    def cancel(self, project_id: int, job_id: int) -> JobRecord:
        """Cancel a job: a queued one never runs; a running one stops at its next progress
        step (or ends ``cancelled`` when done); a finished one stays as it is."""
        self.get(project_id, job_id)  # 404 and expiry first
        with self._changed:  # a job of this process stops without waiting for the write
            if job_id in self._running:  # below (which may wait for that job's transaction)
                self._cancelling.add(job_id)
        now = utcnow()
        with self.database.sessions() as session:
            with write_transaction(session):
                row = session.get(Job, job_id)
                if row is None:
                    raise JobNotFound(job_id)
                if row.state == QUEUED:
                    _end(row, CANCELLED, now, reason="cancelled")
                elif row.state == RUNNING:
                    row.cancel_requested = True
                    row.updated_at = now
                record = JobRecord.of(row)
        dropped = None
        with self._changed:
            if record.state == CANCELLED:
                dropped = self._pending.pop(job_id, None)
        if dropped is not None:
            dropped.end()
        return record

    # ------------------------------------------------------------------ recovery, expiry
    def recover(self) -> int:
        """Mark failed every queued or running job whose process is gone (start-up)."""
        now = utcnow()
        with self.database.sessions() as session, write_transaction(session):
            rows = session.scalars(select(Job).where(Job.state.in_((QUEUED, RUNNING))))
            orphans = [row for row in rows if self._orphaned(row, now)]
            for row in orphans:
                _interrupt(row, now, RESTARTED)
            self._sweep(session, now)
        if orphans:
            logger.warning("sporal: %d job(s) left by a stopped process marked failed (%s)",
                           len(orphans), RESTARTED)
        return len(orphans)

    def _orphaned(self, row: Job, now: datetime) -> bool:
        """A queued or running job whose process is gone (or, on another host, silent)."""
        if row.state not in (QUEUED, RUNNING) or row.owner == self.owner:
            return False
        host, _, rest = row.owner.partition(":")
        pid = rest.partition(":")[0]
        if host == self.host and pid.isdigit():
            return int(pid) == os.getpid() or not _pid_alive(int(pid))
        return row.updated_at < now - self.stale

    def _sweep(self, session: Session, now: datetime) -> None:
        """Delete the finished jobs past their time (inside a write transaction)."""
        session.execute(delete(Job).where(Job.state.in_(FINISHED),
                                          Job.finished_at < now - self.ttl))

    def _fail(self, job_ids: list[int], reason: str) -> None:
        now = utcnow()
        with self.database.sessions() as session, write_transaction(session):
            for row in session.scalars(select(Job).where(Job.id.in_(job_ids),
                                                         Job.state.in_((QUEUED, RUNNING)))):
                _interrupt(row, now, reason)

    # ------------------------------------------------------------------ running
    def _work(self) -> None:
        """One job thread: claim, run, record; no error of one job ends the thread."""
        while True:
            try:
                claimed = self._next()
            except Exception:  # e.g. a database busy past its timeout: try again
                logger.exception("a job could not be started")
                time.sleep(REPORT_INTERVAL)
                continue
            if claimed is None:
                return
            job_id, pending = claimed
            try:
                self._run(job_id, pending)
            except Exception:  # its end could not be recorded: a restart will mark it
                logger.exception("job %d: its end could not be recorded", job_id)
            finally:
                pending.end()
                with self._changed:
                    self._running.pop(job_id, None)
                    self._cancelling.discard(job_id)
                    self._changed.notify_all()

    def _next(self) -> tuple[int, _Pending] | None:
        """The next job this thread runs (claimed in the database); None when closing."""
        while True:
            with self._changed:
                while not self.closing:
                    busy = set(self._running.values())
                    ready = [(i, p) for i, p in self._pending.items()
                             if p.project_id not in busy]
                    if ready:
                        break
                    self._changed.wait(1.0)
                if self.closing:
                    return None
                job_id, pending = ready[0]
                del self._pending[job_id]
                self._running[job_id] = pending.project_id
            try:
                claimed = self._claim(job_id, pending.project_id)
            except ProjectNotFound:  # deleted with its jobs meanwhile
                claimed = False
            except Exception:  # tried again after a pause
                with self._changed:
                    self._running.pop(job_id, None)
                    self._pending.setdefault(job_id, pending)
                raise
            if claimed is True:
                return job_id, pending
            with self._changed:
                self._running.pop(job_id, None)
                if claimed is None:  # another process runs this project's job: later
                    self._pending.setdefault(job_id, pending)
                    self._changed.wait(REPORT_INTERVAL)
            if claimed is False:  # cancelled elsewhere, or its project deleted
                pending.end()

    def _claim(self, job_id: int, project_id: int) -> bool | None:
        """Mark the job running: True, False (no longer queued), None (wait: another
        process is running a job of the project)."""
        now = utcnow()
        with self.database.sessions() as session:
            with write_transaction(session, project_id):
                row = session.get(Job, job_id)
                if row is None or row.state != QUEUED:
                    return False
                other = session.scalar(select(Job.id).where(
                    Job.project_id == project_id, Job.state == RUNNING).limit(1))
                if other is not None:
                    return None
                row.state, row.started_at, row.updated_at = RUNNING, now, now
                row.owner = self.owner
        return True

    def _run(self, job_id: int, pending: _Pending) -> None:
        context = JobContext(self, job_id, pending.project_id)
        result: dict[str, Any] | None = None
        problem: dict[str, Any] | None = None
        reason = None
        try:
            result = pending.run(context)
        except JobCancelled as cancelled:
            reason = cancelled.reason
        except ServiceError as error:
            problem = problem_body(error.slug, error.detail, _location(pending, job_id),
                                   **error.members)
        except Exception:
            logger.exception("job %d of project %d failed", job_id, pending.project_id)
            internal = InternalError("unexpected error in the job; it was logged")
            problem = problem_body(internal.slug, internal.detail, _location(pending, job_id))
        self._finish(job_id, result, problem, reason)

    def _finish(self, job_id: int, result: dict[str, Any] | None,
                problem: dict[str, Any] | None, reason: str | None) -> None:
        now = utcnow()
        with self.database.sessions() as session, write_transaction(session):
            row = session.get(Job, job_id)
            if row is None or row.state != RUNNING:
                return
            if reason == SHUT_DOWN:
                _interrupt(row, now, SHUT_DOWN)
            elif problem is not None:
                _end(row, FAILED, now, problem=problem)
            elif reason is not None or row.cancel_requested:
                _end(row, CANCELLED, now, reason=reason or "cancelled", result=result)
            else:
                _end(row, SUCCEEDED, now, result=result)
                row.progress = 1.0

    def _heartbeat(self) -> None:
        """Touch this process's queued and running jobs, so other hosts see them alive."""
        interval = max(1.0, self.stale.total_seconds() / 4)
        beat = time.monotonic()
        while True:
            with self._changed:
                while not self.closing and time.monotonic() < beat + interval:
                    self._changed.wait(beat + interval - time.monotonic())
                if self.closing:
                    return
                mine = list(self._pending) + list(self._running)
            beat = time.monotonic()
            if mine:
                try:
                    with self.database.sessions() as session, write_transaction(session):
                        session.execute(update(Job).where(Job.id.in_(mine),
                                                          Job.state.in_((QUEUED, RUNNING)))
                                        .values(updated_at=utcnow()))
                except Exception:  # a busy database: the next beat tries again
                    logger.warning("job heartbeat failed", exc_info=True)

    def idle(self, timeout: float) -> bool:
        """Wait until this process holds no job (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._pending or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.1))
        return True


def _location(pending: _Pending, job_id: int) -> str:
    return f"/projects/{pending.project_id}/jobs/{job_id}"


def _end(row: Job, state: str, now: datetime, *, reason: str | None = None,
         message: str | None = None, result: dict[str, Any] | None = None,
         problem: dict[str, Any] | None = None) -> None:
    row.state, row.finished_at, row.updated_at = state, now, now
    row.reason = reason
    if message is not None:
        row.message = message
    if result is not None:
        row.result = json.dumps(result)
    if problem is not None:
        row.problem = json.dumps(problem)


def _interrupt(row: Job, now: datetime, reason: str) -> None:
    error = JobInterrupted(f"the job was {reason}; what it was to do was not done")
    _end(row, FAILED, now, reason=reason, problem=problem_body(
        error.slug, error.detail, f"/projects/{row.project_id}/jobs/{row.id}"))
