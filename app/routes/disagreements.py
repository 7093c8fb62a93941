"""``/projects/{pid}/disagreements`` (list, read one, resolve, undo, reopen) and ``DELETE
/projects/{pid}/answers/{id}``.

Disagreements are the pairs in dispute in a ``consensus`` project; resolving one, undoing a
resolution and reopening one need the admin key or the project's reviewer key (``POST
/projects/{pid}/reviewer-key``) when keys are configured.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from app.routes.common import Limit, ReadProject, StrictJSONRoute, WriteProject, problem_responses
from app.schemas import (
    AnswerRetracted,
    DisagreementItem,
    DisagreementPage,
    DisagreementReviewed,
    Resolution,
)
from app.security import MAX_ID, CallerDep, MemberDep, ProjectKeyDep, ReviewerDep
from app.services import disagreements as service
from app.services.labels import retract_answer as retract
from app.services.labels.change import Applied
from app.services.labels.consensus import (
    reopen_disagreement,
    resolve_disagreement,
    undo_resolution,
)

__all__ = ["router"]

DisagreementId = Annotated[int, Path(ge=1, le=MAX_ID)]

router = APIRouter(prefix="/projects/{project_id}", tags=["teams"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)


@router.get("/disagreements", response_model=DisagreementPage, dependencies=[ProjectKeyDep])
def list_disagreements(
    view: ReadProject,
    state: Annotated[Literal["open", "closed", "all"], Query(description=(
        "Which disagreements: open (default), closed, or all."))] = "open",
    cursor: Annotated[str | None, Query(max_length=4096, description=(
        "Start after this cursor: the `next_cursor` of the previous page."))] = None,
    limit: Limit = 100,
) -> DisagreementPage:
    """The pairs in dispute (consensus): answered both ways and not settled, or answered
    against what stronger labels imply; with the answers on each side and the proof of the
    pair's value now, every resolution, and why and when each closed one closed
    (`closed_reason`: answers, reviewer, retraction, policy, merge, deletion,
    exclusion).

    Oldest first, in pages: pass `next_cursor` as `cursor` for the next one (null on the
    last page). A disagreement on a deleted concept stays listed, named as it was."""
    return service.list_disagreements(view, state, cursor, limit)


@router.get("/disagreements/{disagreement_id}", response_model=DisagreementItem,
            dependencies=[ProjectKeyDep])
def read_disagreement(disagreement_id: DisagreementId, view: ReadProject) -> DisagreementItem:
    """One disagreement, as the listing shows it: both sides' live answers, the proof, every
    resolution (who, when, value, undone when) and, once closed, why and when."""
    return service.disagreement_item(view, disagreement_id)


def _reviewed(work: WriteProject, disagreement_id: int,
              applied: Applied | None) -> DisagreementReviewed:
    """The disagreement after a reviewer's step, with the others its refit closed and
    opened."""
    counts = (0, 0)
    if applied is not None:
        row = service.find_disagreement(work.session, work.state.project_id, disagreement_id)
        counts = applied.beside((row.a_id, row.b_id))
    item = service.reviewed_item(work, disagreement_id, *counts)
    work.session.rollback()
    return item


@router.post("/disagreements/{disagreement_id}/resolve", response_model=DisagreementReviewed,
             dependencies=[ReviewerDep], responses=problem_responses(413))
def resolve(disagreement_id: DisagreementId, body: Resolution,
            work: WriteProject) -> DisagreementReviewed:
    """Settle a disagreement with the reviewer's value: kept as an answer with the role
    `reviewer` (source `review`), which the consensus takes as final for the pair (of two
    resolutions, the later stands). `closed_others`: how many other disagreements the refit
    closed (reason `reviewer`). Needs the admin key or the project's reviewer key."""
    return _reviewed(work, disagreement_id, resolve_disagreement(work, disagreement_id, body))


@router.post("/disagreements/{disagreement_id}/undo", response_model=DisagreementReviewed,
             dependencies=[ReviewerDep], responses=problem_responses(409, 413))
def undo(disagreement_id: DisagreementId, work: WriteProject) -> DisagreementReviewed:
    """Undo the disagreement's latest live resolution: the reviewer's answer is retracted and
    the consensus decides again. The disagreement opens again if that resolution had closed
    it, and closes again (`retraction`) when the answers settle the pair. 409
    `review-conflict` when no resolution of it stands. Needs the admin key or the project's
    reviewer key."""
    return _reviewed(work, disagreement_id, undo_resolution(work, disagreement_id))


@router.post("/disagreements/{disagreement_id}/reopen", response_model=DisagreementReviewed,
             dependencies=[ReviewerDep], responses=problem_responses(409, 413))
def reopen(disagreement_id: DisagreementId, work: WriteProject) -> DisagreementReviewed:
    """Open a closed disagreement again for review, even if the answers settle it: it stays
    open until a reviewer resolves it (or the policy switches); no label changes. An open
    one is returned as it is. 409 `review-conflict` when another disagreement is open on its
    pair. Needs the admin key or the project's reviewer key."""
    reopen_disagreement(work, disagreement_id)
    return _reviewed(work, disagreement_id, None)


@router.delete("/answers/{answer_id}", response_model=AnswerRetracted,
               dependencies=[MemberDep], responses=problem_responses(409))
def retract_answer(answer_id: Annotated[int, Path(ge=1, le=MAX_ID)],
                   work: WriteProject, caller: CallerDep) -> AnswerRetracted:
    """Retract one answer. `strict`: its label goes when no other live answer stands behind
    it. `consensus`: the consensus is computed again without it, and the labels follow.
    (In `consensus`, `DELETE /labels/{id}` retracts every answer behind that label.)
    An annotator key retracts its own answers only; a reviewer's answer needs the reviewer
    key or the admin key (403 otherwise)."""
    return retract(work, answer_id, caller)
