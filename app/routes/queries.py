"""``/projects/{pid}/next``, ``/suggestions`` and ``/predictions``: what to ask next, what was
asked, and the concept map."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.db import SessionDep
from app.routes.common import Limit, Offset, RegistryDep, SettingsDep, problem_responses
from app.schemas import Name, NextQueries, PredictionPage, SuggestionPage
from app.security import ProjectIdPath, ProjectKeyDep
from app.services import queries as service
from app.services.projects import get_project

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}", tags=["questions"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422, 503))

MAX_BATCH = 100


@router.get("/next", response_model=NextQueries)
def next_queries(
    project_id: ProjectIdPath,
    session: SessionDep,
    registry: RegistryDep,
    settings: SettingsDep,
    strategy: Annotated[str, Query(max_length=32, description=(
        "Random, LC, QBC, Random-R, LC-R, QBC-R, CNT, LC-R+, QBC-R+ (any case; `plus` may "
        "stand for `+`, which a query string otherwise reads as a space)."))] = "LC-R+",
    k: Annotated[int, Query(ge=1, le=MAX_BATCH, description="How many questions.")] = 1,
    annotator: Annotated[Name | None, Query(description=(
        "Reserve the returned pairs for this annotator for a lease; other annotators are "
        "not asked them until a label or the lease's end releases them."))] = None,
) -> NextQueries:
    """The next questions, best first; only undecided pool pairs are ever suggested."""
    return NextQueries.model_validate(service.next_queries(
        session, registry, project_id, strategy, k, annotator, settings.lease_seconds))


@router.get("/predictions", response_model=PredictionPage)
def predictions(
    project_id: ProjectIdPath,
    session: SessionDep,
    registry: RegistryDep,
    limit: Limit = 100,
    offset: Offset = 0,
    min_probability: Annotated[float | None, Query(ge=0.0, le=1.0, allow_inf_nan=False,
                                                   description="Keep pairs whose probability "
                                                   "of positive is at least this.")] = None,
) -> PredictionPage:
    """Every pool pair: its label if decided, else the prediction model's probability."""
    return PredictionPage.model_validate(service.predictions(
        session, registry, project_id, limit=limit, offset=offset,
        min_probability=min_probability))


@router.get("/suggestions", response_model=SuggestionPage)
def suggestions(
    project_id: ProjectIdPath,
    session: SessionDep,
    annotator: Annotated[Name | None, Query(description="Only this annotator's questions.")]
    = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> SuggestionPage:
    """The log of the questions `next` suggested, newest first."""
    get_project(session, project_id)
    items, total = service.list_suggestions(session, project_id, annotator=annotator,
                                            limit=limit, offset=offset)
    return SuggestionPage.model_validate({"items": items, "total": total})
