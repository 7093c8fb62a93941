"""``/projects/{pid}/quality``: how many of the map's pairs are likely wrong."""

from __future__ import annotations

from fastapi import APIRouter

from app.routes.common import Fresh, ReadProject, StrictJSONRoute, problem_responses
from app.schemas import QualityRead
from app.security import MemberDep
from app.services.quality import quality

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/quality", tags=["labels"],
                   dependencies=[MemberDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=QualityRead)
def get_quality(view: ReadProject, fresh: Fresh = False) -> QualityRead:
    """The expected number of wrong pool pairs among the decided ones (from each label's
    confidence: one wrong label makes every pair it carries wrong) and among the undecided
    ones were the map `predictions` completes taken (from the prediction model's calibrated
    probabilities), each with a 90% interval; counted over the pool's ordered pairs.
    `fresh=true` waits for a prediction model trained on the current labels.
    """
    return quality(view, fresh=fresh)
