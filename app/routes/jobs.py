"""``/projects/{pid}/jobs/{id}``: heavy work run in the background, and how routes hand it over.

A route that changes what the pool's features are computed from (links, concept texts,
names) takes :data:`HeavyChange`: it counts the project's heavy requests (429 past
SPORAL_HEAVY_REQUESTS_PER_PROJECT, before the request waits for anything) and, through
:meth:`Changes.apply`, either does the whole change in the request as before, or stores the
change alone and answers ``202 Accepted`` with a job that recomputes the features (when the
client sends ``Prefer: respond-async``, or the recompute is at least
SPORAL_RECOMPUTE_ASYNC_THRESHOLD concepts with texts x pool pairs).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.errors import PROBLEM_MEDIA_TYPE
from app.routes.common import StrictJSONRoute, problem_responses
from app.runtime import Runtime
from app.schemas import JobAccepted, JobRead, Problem
from app.security import MAX_ID, ProjectIdPath, ProjectKeyDep
from app.services import corpus
from app.services.jobs import JobRecord, JobRunner
from app.services.unit import ProjectWork
from app.settings import Settings

__all__ = ["Changes", "HeavyChange", "HeavyTextChange", "JobsDep", "PreferHeader",
           "accepted", "asks_async", "change_responses", "job_read", "router"]

A = TypeVar("A", bound=BaseModel)

RECOMPUTE = "recompute-features"

router = APIRouter(prefix="/projects/{project_id}/jobs", tags=["jobs"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422),
                   route_class=StrictJSONRoute)


async def get_runner(request: Request) -> JobRunner:
    """The application's job runner (a dependency that takes no thread)."""
    runner: JobRunner = request.app.state.jobs
    return runner


JobsDep = Annotated[JobRunner, Depends(get_runner)]


def job_read(job: JobRecord) -> JobRead:
    return JobRead(id=job.id, project_id=job.project_id, kind=job.kind,
                   state=job.state,  # type: ignore[arg-type]
                   progress=job.progress, message=job.message, reason=job.reason,
                   cancel_requested=job.cancel_requested, result=job.result,
                   problem=None if job.problem is None else Problem(**job.problem),
                   created_at=job.created_at, started_at=job.started_at,
                   finished_at=job.finished_at, location=job.location)


JobIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="The job's id.")]


@router.get("/{job_id}", response_model=JobRead)
def read_job(project_id: ProjectIdPath, job_id: JobIdPath, jobs: JobsDep) -> JobRead:
    """A job's state, progress, and its result or problem (404 once expired)."""
    return job_read(jobs.get(project_id, job_id))


@router.delete("/{job_id}", response_model=JobRead)
def cancel_job(project_id: ProjectIdPath, job_id: JobIdPath, jobs: JobsDep) -> JobRead:
    """Cancel a job: a queued one never runs (state `cancelled`); a running one stops at its
    next progress step, before it stores anything (`cancel_requested` until then); a finished
    one is left as it is."""
    return job_read(jobs.cancel(project_id, job_id))


def asks_async(prefer: str | None) -> bool:
    """``Prefer: respond-async`` (RFC 7240), among other preferences or alone."""
    if not prefer:
        return False
    return any(token.split(";")[0].strip().lower() == "respond-async"
               for token in prefer.split(","))


@dataclass(frozen=True)
class Changes:
    """How one heavy request hands its recompute to a job (see :meth:`apply`)."""

    runner: JobRunner
    runtime: Runtime
    settings: Settings
    asked: bool
    root_path: str

    def apply(self, work: ProjectWork, store: Callable[[bool], tuple[A, bool]]) -> A | JSONResponse:
        """``store(True)`` (change and recompute, the synchronous answer) or ``store(False)``
        (the change alone; it returns the answer and whether anything changed) and a job.

        The job's place is taken before the change is stored: past SPORAL_MAX_JOBS the
        request is refused (503) with nothing stored.
        """
        size = corpus.recompute_size(work)
        if size == 0 or (not self.asked and size < self.settings.recompute_async_threshold):
            return store(True)[0]
        pid = work.project.id
        with self.runner.reserve(pid) as place:
            answer, changed = store(False)
            if not changed:
                return answer
            job = place.submit(RECOMPUTE, partial(corpus.recompute_features, self.runtime,
                                                  pid, answer=answer.model_dump(mode="json")))
        return accepted(job, answer.model_dump(mode="json"), asked=self.asked,
                        root_path=self.root_path)


def accepted(job: JobRecord, stored: dict[str, Any], *, asked: bool,
             root_path: str = "") -> JSONResponse:
    """``202 Accepted`` with ``job`` (its ``Location``) and what the request ``stored``;
    ``Preference-Applied: respond-async`` when the client ``asked`` for it."""
    body = JobAccepted(**job_read(job).model_dump(), stored=stored)
    headers = {"Location": root_path + job.location}
    if asked:
        headers["Preference-Applied"] = "respond-async"
    return JSONResponse(body.model_dump(mode="json"), status_code=202, headers=headers)


PreferHeader = Annotated[str | None, Header(
    alias="Prefer", description="`respond-async`: answer 202 with a job for the recompute, "
    "whatever the project's size.")]


def _changes(request: Request, asked: bool) -> Changes:
    state = request.app.state
    return Changes(state.jobs, state.runtime, state.settings, asked,
                   request.scope.get("root_path", ""))


async def _heavy(project_id: ProjectIdPath, request: Request,
                 prefer: PreferHeader = None) -> AsyncIterator[Changes]:
    runner: JobRunner = request.app.state.jobs
    with runner.heavy_request(project_id):
        yield _changes(request, asks_async(prefer))


async def _heavy_if_texts(project_id: ProjectIdPath, request: Request,
                          prefer: PreferHeader = None) -> AsyncIterator[Changes]:
    try:
        body = await request.json()  # already parsed for the route: no second parse
    except ValueError:  # no body, or not JSON: the route answers 422, no texts here
        body = None
    concepts = body.get("concepts") if isinstance(body, dict) else None
    texts = isinstance(concepts, list) and any(
        isinstance(c, dict) and c.get("text") is not None for c in concepts)
    runner: JobRunner = request.app.state.jobs
    with runner.heavy_request(project_id) if texts else nullcontext():
        yield _changes(request, asks_async(prefer))


# Declared before the unit of work in a route's parameters: a request over the project's
# limit is refused on the event loop, before it takes a thread or waits for the lock.
HeavyChange = Annotated[Changes, Depends(_heavy)]
HeavyTextChange = Annotated[Changes, Depends(_heavy_if_texts)]


def change_responses() -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries of a heavy change: 202 with the job, 429 over the project's limit."""
    return {
        202: {"model": JobAccepted,
              "description": "The change is stored; the pool's features are recomputed by "
                             "the job at `Location` (`Prefer: respond-async`, or a large "
                             "project). Until it succeeds the pool keeps its features.",
              "headers": {"Location": {"schema": {"type": "string"},
                                       "description": "The job's path."}}},
        429: {"description": "The project has SPORAL_HEAVY_REQUESTS_PER_PROJECT heavy "
                             "requests in flight; retry after `Retry-After`. Problem types: "
                             "`/problems/too-many-requests`.",
              "content": {PROBLEM_MEDIA_TYPE: {"schema": Problem.model_json_schema()}}},
    }
