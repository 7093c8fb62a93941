"""``/projects/{pid}/pairs``: the pool of candidate pairs, and the status of any pair."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Body, Query, Response

from app.routes.common import (
    Fresh,
    Limit,
    Offset,
    ReadProject,
    StrictJSONRoute,
    WriteProject,
    documented_as,
    problem_responses,
    validate_body,
)
from app.schemas import Name, PairPage, PairsCreate, PairsCreated, PairStatus
from app.security import MemberDep, ProjectKeyDep
from app.services import pairs as service
from app.services.corrections import delete_pair
from app.services.labels import pair_status
from app.services.queries import prediction_of

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/pairs", tags=["pairs"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)

ConceptQuery = Annotated[Name, Query(description="A concept's name.")]
RawPairs = Annotated[dict[str, Any], documented_as(PairsCreate), Body()]


@router.post("", dependencies=[ProjectKeyDep], status_code=201, response_model=PairsCreated,
             responses=problem_responses(409, 413))
def add_pairs(raw: RawPairs, work: WriteProject) -> PairsCreated:
    """Register pool pairs with their features; all or nothing.

    Unknown concepts, self pairs, a feature vector of another length than the project's, or a
    registered pair sent again with other features: 422 naming each offending item.
    """
    body = validate_body(PairsCreate, raw)  # here, in the worker thread, not the event loop
    return service.add_pairs(work, body.pairs)


@router.get("", dependencies=[MemberDep], response_model=PairPage)
def list_pairs(view: ReadProject, limit: Limit = 100, offset: Offset = 0) -> PairPage:
    """The pool in registration order, with each pair's features and status."""
    return service.list_pairs(view, limit, offset)


@router.get("/status", dependencies=[MemberDep], response_model=PairStatus)
def get_pair_status(view: ReadProject, a: ConceptQuery, b: ConceptQuery,
                    fresh: Fresh = False) -> PairStatus:
    """Whether `a` is a prerequisite of `b`: the status, its source and its proof.

    For an undecided pool pair, `prediction` is the newest prediction model's probability of
    positive (`model` says which; `fresh=true` waits for one trained on the current labels).
    """
    status = pair_status(view.state, a, b, view.session)
    row = view.state.pool.row_of.get((view.state.id_of[a], view.state.id_of[b]))
    if status.status == "undecided" and row is not None:
        proba, info = prediction_of(view, fresh=fresh)
        if proba is not None and not np.isnan(proba[row]):
            status.prediction = float(proba[row])
        status.model = info
    return status


@router.delete("",
               dependencies=[ProjectKeyDep],
               status_code=204, response_class=Response, responses=problem_responses(409))
def delete_pool_pair(work: WriteProject, a: ConceptQuery, b: ConceptQuery) -> Response:
    """Take `(a, b)` out of the pool.

    Refused (409 `in-use`, `labels` names it) while a live label is asserted on the pair:
    retract it first. A pair that is not in the pool is 422.
    """
    delete_pair(work, a, b)
    return Response(status_code=204)
