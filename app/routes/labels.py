"""``/projects/{pid}/labels``: post, import, retract and list labels."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from app.errors import ConsensusOnly, ProblemResponse, problem_body
from app.routes.common import (
    InFlightDep,
    Limit,
    Offset,
    ReadProject,
    StrictJSONRoute,
    WriteProject,
    documented_as,
    problem_responses,
    validate_body,
)
from app.routes.jobs import job_read
from app.schemas import (
    BulkLabels,
    BulkLabelsCreated,
    JobRead,
    LabelCreated,
    LabelIn,
    LabelPage,
    LabelRetracted,
    LabelValue,
)
from app.security import MAX_ID, Caller, CallerDep, MemberDep
from app.services import labels as service
from app.services.idempotency import Idempotency, InFlight, StoredResponse, request_hash
from app.services.labels import Refused, Written
from app.services.labels.incremental import schedule_refit
from app.services.labels.policy import policy_of
from app.services.team import consensus_as_of, pending_pairs
from app.services.unit import ProjectWork

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/labels", tags=["labels"],
                   dependencies=[MemberDep],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)

IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", min_length=1, max_length=255,
           description="Makes retries safe: a retry with the same key and body replays the "
           "first answer; the same key with another body is 422."),
]


RawBulkLabels = Annotated[dict[str, Any], documented_as(BulkLabels), Body()]

LabelWrite = Callable[[ProjectWork, Any], Written[Any] | Refused]


def _answer(result: Written[Any] | Refused, instance: str) -> StoredResponse:
    """What a label write answers: 201 created, 200 found asserted already, 409 refused."""
    if isinstance(result, Refused):
        error = result.error
        return StoredResponse(error.kind.status,
                      problem_body(error.slug, error.detail, instance, **error.members))
    return StoredResponse(201 if result.created else 200, result.answer.model_dump(mode="json"))


def _response(answer: StoredResponse) -> Response:
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else None
    if answer.status >= 400:  # a refusal (a contradiction with its proof)
        return ProblemResponse(answer.body, status_code=answer.status, headers=headers)
    return JSONResponse(answer.body, status_code=answer.status, headers=headers)


def _as(caller: Caller, label: LabelIn) -> LabelIn:
    """``label`` as the caller may post it: an annotator key's own (403 for another name)."""
    annotator = caller.speaks_for(label.annotator)
    if annotator == label.annotator:
        return label
    return label.model_copy(update={"annotator": annotator})


def _once(write: LabelWrite, kind: str, work: ProjectWork, body: Any, request: Request,
          inflight: InFlight, idempotency_key: str | None) -> Response:
    """Run a label write, at most once per ``Idempotency-Key`` when the client sent one.

    The answer, refusals included, is stored with the key in the write's own transaction.
    """
    instance = request.url.path
    if idempotency_key is None:
        return _response(_answer(write(work, body), instance))
    project_id = work.state.project_id
    ttl = timedelta(seconds=request.app.state.settings.idempotency_ttl_seconds)
    once = Idempotency(project_id, idempotency_key, request_hash(kind, body),
                       lambda result: _answer(result, instance), ttl=ttl)
    with inflight.claim(project_id, idempotency_key):
        outcome = work.idempotent(once, lambda: write(work, body))
    return _response(outcome if isinstance(outcome, StoredResponse) else _answer(outcome, instance))


@router.post("", status_code=201, response_model=LabelCreated,
             responses={200: {"model": LabelCreated,
                              "description": "The same label was already asserted: its id, "
                              "nothing newly decided."},
                        **problem_responses(409, 413)})
def post_label(body: LabelIn, work: WriteProject, request: Request, inflight: InFlightDep,
               caller: CallerDep, idempotency_key: IdempotencyKey = None) -> Response:
    """Assert a label on any two registered concepts; answer what it newly decided.

    A contradiction is 409 with `proof`: the asserted labels that force the opposite. With an
    annotator key the answer is that annotator's (`annotator` absent or theirs; another
    name is 403).
    """
    body = _as(caller, body)
    response = _once(service.post_label, "label", work, body, request, inflight,
                     idempotency_key)
    if pending_pairs(work.project):  # a contested answer repaired locally: refit later
        schedule_refit(request.app.state.jobs, request.app.state.runtime, work.project.id)
    return response


@router.post("/bulk", status_code=201, response_model=BulkLabelsCreated,
             responses=problem_responses(409, 413))
def post_bulk(raw: RawBulkLabels, work: WriteProject, request: Request, inflight: InFlightDep,
              caller: CallerDep, idempotency_key: IdempotencyKey = None) -> Response:
    """Import labels in one transaction: all applied, or none with every contradiction listed.
    With an annotator key every label is that annotator's (as for a single label)."""
    parsed = validate_body(BulkLabels, raw)  # here, in the worker thread, not the event loop
    body = BulkLabels.model_construct(labels=[_as(caller, item) for item in parsed.labels])
    return _once(service.post_bulk, "bulk", work, body, request, inflight, idempotency_key)


@router.post("/refit", status_code=202, response_model=JobRead,
             responses=problem_responses(409))
def refit_labels(view: ReadProject, request: Request) -> JSONResponse:
    """Refit the full consensus of a `consensus` project now, as a job (`Location`): the
    labels of the pairs repaired locally since `consensus.as_of` (`GET labels`) become
    those of a full recompute. One refit waits per project: this answers the one queued
    already, if any. Its result says what changed (`refitted` false: nothing was pending).
    In `strict` there is no consensus to refit: 409 `consensus-only`."""
    if policy_of(view.project).refuses:  # the first answer decides: no consensus kept
        raise ConsensusOnly("a refit needs the consensus policy; the project is "
                            f"{view.project.policy!r}: its labels are its answers already")
    state = request.app.state
    job = schedule_refit(state.jobs, state.runtime, view.project.id, quiet=False)
    assert job is not None  # not quiet: JobsBusy (503) instead
    return JSONResponse(job_read(job).model_dump(mode="json"), status_code=202,
                        headers={"Location": request.scope.get("root_path", "") + job.location})


@router.delete("/{label_id:int}", response_model=LabelRetracted, responses=problem_responses(409))
def retract_label(label_id: Annotated[int, Path(ge=1, le=MAX_ID)],
                  work: WriteProject, caller: CallerDep) -> LabelRetracted:
    """Retract an asserted label; the closure is recomputed from the remaining labels.

    In a `consensus` project this retracts every answer behind the label (its pair, its
    value) and computes the consensus again without them. It removes the answers it rests
    on: an annotator key only when they are all its own, and a reviewer's answer only with
    the reviewer key or the admin key (403 otherwise).
    """
    return service.retract_label(work, label_id, caller)


@router.get("", response_model=LabelPage)
def list_labels(
    view: ReadProject,
    source: Literal["asserted", "inferred", "all"] = "all",
    label: Annotated[LabelValue | None, Query()] = None,
    include_retracted: bool = False,
    caused_by: Annotated[int | None, Query(ge=1, le=MAX_ID, description=(
        "Only the pairs that this asserted label decided (`decided_rest` of its answer)."))]
    = None,
    limit: Limit = 100,
    offset: Offset = 0,
    after: Annotated[str | None, Query(max_length=4096, description=(
        "Start after this cursor: the `next` of the previous page (keyset paging: each page "
        "costs the same however deep; `offset` is ignored)."))] = None,
) -> LabelPage:
    """Every decided pair (any two concepts), newest deciding label first, then by names.

    Page with `next` → `after` (or `offset`); `total` counts every listed item.
    """
    items, total, cursor = service.list_labels(
        view.session, view.state.project_id, source=source, label=label,
        include_retracted=include_retracted,
        limit=limit, offset=offset, caused_by=caused_by, after=after)
    return LabelPage.model_validate({"items": items, "total": total, "next": cursor,
                                     "consensus": consensus_as_of(view.project, view.state)})
