"""``/projects/{pid}/annotators``: how many questions each annotator answered, and what a lead
does about one of them (exclude, include again, re-ask)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.routes.common import ReadProject, StrictJSONRoute, WriteProject, problem_responses
from app.schemas import AnnotatorExcluded, AnnotatorPage, AnnotatorReasked
from app.security import CallerDep, ProjectKeyDep
from app.services import team_actions
from app.services.annotators import annotator_counts
from models import NAME_LENGTH

__all__ = ["router"]

AnnotatorName = Annotated[str, Path(min_length=1, max_length=NAME_LENGTH,
                                    description="The annotator's name, as their answers give it.")]

router = APIRouter(prefix="/projects/{project_id}/annotators", tags=["annotators"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AnnotatorPage)
def annotators(view: ReadProject) -> AnnotatorPage:
    """Every annotator of the project with the answers it gave, accepted and refused."""
    return annotator_counts(view.session, view.state.project_id)


@router.post("/{annotator}/exclude", response_model=AnnotatorExcluded,
             responses=problem_responses(409))
def exclude(annotator: AnnotatorName, work: WriteProject, caller: CallerDep) -> AnnotatorExcluded:
    """Exclude an annotator (consensus): their answers stop counting (they are kept, and so
    are their later answers, with the outcome `excluded`) and the consensus is computed again
    without them. The answer says what changed: labels created and retracted, disagreements
    opened and closed, their answers no longer counting. Excluding an excluded annotator
    changes nothing (200, `changed` false). 409 `consensus-only` in `strict`; 404
    `annotator-not-found` when no answer comes from them. Needs the project, reviewer or
    admin key."""
    return team_actions.exclude_annotator(work, annotator, caller)


@router.delete("/{annotator}/exclude", response_model=AnnotatorExcluded,
               responses=problem_responses(409))
def include(annotator: AnnotatorName, work: WriteProject) -> AnnotatorExcluded:
    """Include an excluded annotator again: their answers count again and the consensus is
    computed again with them; the answer says what changed. Including an annotator who is
    not excluded changes nothing (200, `changed` false). 409 `consensus-only` in `strict`;
    404 `annotator-not-found`. Needs the project, reviewer or admin key."""
    return team_actions.include_annotator(work, annotator)


@router.post("/{annotator}/reask", response_model=AnnotatorReasked,
             responses=problem_responses(409))
def reask(annotator: AnnotatorName, work: WriteProject) -> AnnotatorReasked:
    """Re-ask what only this annotator answered (consensus): every pair whose live answers
    all come from them becomes a second-opinion question for the others (`next` serves it
    with the reason `second-opinion`, never to them, until another annotator answers it).
    `pairs`: how many were re-asked now. 409 `consensus-only` in `strict`; 404
    `annotator-not-found`. Needs the project, reviewer or admin key."""
    return team_actions.reask_annotator(work, annotator)
