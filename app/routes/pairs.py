"""``/projects/{pid}/pairs``: the pool of candidate pairs, and the status of any pair."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.db import SessionDep
from app.routes.common import Limit, Offset, RegistryDep, problem_responses
from app.schemas import Name, PairPage, PairsCreate, PairsCreated, PairStatus
from app.security import ProjectIdPath, ProjectKeyDep
from app.services import pairs as service
from app.services.labels import pair_status
from app.services.learning import pool_predictions
from app.services.projects import get_project
from app.services.state import catch_up

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/pairs", tags=["pairs"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422, 503))

ConceptQuery = Annotated[Name, Query(description="A concept's name.")]


@router.post("", status_code=201, response_model=PairsCreated,
             responses=problem_responses(409, 413))
def add_pairs(project_id: ProjectIdPath, body: PairsCreate, session: SessionDep,
              registry: RegistryDep) -> PairsCreated:
    """Register pool pairs with their features; all or nothing.

    Unknown concepts, self pairs, a feature vector of another length than the project's, or a
    registered pair sent again with other features: 422 naming each offending item.
    """
    created, unchanged, length = service.add_pairs(session, registry, project_id, body.pairs)
    return PairsCreated(created=created, unchanged=unchanged, feature_length=length)


@router.get("", response_model=PairPage)
def list_pairs(project_id: ProjectIdPath, session: SessionDep, registry: RegistryDep,
               limit: Limit = 100, offset: Offset = 0) -> PairPage:
    """The pool in registration order, with each pair's features and status."""
    with registry.locked(project_id) as state:
        catch_up(session, state, get_project(session, project_id))
        items, total = service.list_pairs(session, state, limit, offset)
    return PairPage(items=items, total=total)


@router.get("/status", response_model=PairStatus)
def get_pair_status(project_id: ProjectIdPath, a: ConceptQuery, b: ConceptQuery,
                    session: SessionDep, registry: RegistryDep) -> PairStatus:
    """Whether `a` is a prerequisite of `b`: the status, its source and its proof.

    For an undecided pool pair, `prediction` is the prediction model's probability of positive.
    """
    with registry.locked(project_id) as state:
        project = get_project(session, project_id)
        catch_up(session, state, project)
        status = pair_status(state, a, b)
        row = state.pool_row.get((state.id_of[a], state.id_of[b]))
        kind = project.prediction_model
    if status["status"] == "undecided" and row is not None:
        session.rollback()
        result = pool_predictions(registry, state, kind)
        if result.probabilities is not None and row < len(result.probabilities) \
                and result.values[row] < 0:
            status["prediction"] = float(result.probabilities[row])
    return PairStatus.model_validate(status)
