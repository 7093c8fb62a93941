"""``/projects/{pid}/disagreements`` (list, resolve) and ``DELETE /projects/{pid}/answers/{id}``.

Disagreements are the pairs in dispute in a ``consensus`` project; resolving one needs the
admin key or the project's reviewer key (``POST /projects/{pid}/reviewer-key``) when keys
are configured.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from app.routes.common import ReadProject, StrictJSONRoute, WriteProject, problem_responses
from app.schemas import AnswerRetracted, DisagreementItem, DisagreementPage, Resolution
from app.security import MAX_ID, CallerDep, MemberDep, ProjectKeyDep, ReviewerDep
from app.services import disagreements as service
from app.services.labels import retract_answer as retract
from app.services.labels.consensus import resolve_disagreement

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}", tags=["teams"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)


@router.get("/disagreements", response_model=DisagreementPage, dependencies=[ProjectKeyDep])
def list_disagreements(
    view: ReadProject,
    state: Annotated[Literal["open", "closed", "all"], Query(description=(
        "Which disagreements: open (default), closed, or all."))] = "open",
) -> DisagreementPage:
    """The pairs in dispute (consensus): answered both ways and not settled, or answered
    against what stronger labels imply; with the answers on each side and the proof of the
    pair's value now. A disagreement closes when later answers settle it or a reviewer
    resolves it."""
    return service.list_disagreements(view, state)


@router.post("/disagreements/{disagreement_id}/resolve", response_model=DisagreementItem,
             dependencies=[ReviewerDep], responses=problem_responses(413))
def resolve(disagreement_id: Annotated[int, Path(ge=1, le=MAX_ID)], body: Resolution,
            work: WriteProject) -> DisagreementItem:
    """Settle a disagreement with the reviewer's value: kept as an answer with the role
    `reviewer` (source `review`), which the consensus takes as final for the pair (of two
    resolutions, the later stands). Needs the admin key or the project's reviewer key."""
    resolve_disagreement(work, disagreement_id, body)
    item = service.disagreement_item(work, disagreement_id)
    work.session.rollback()
    return item


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
