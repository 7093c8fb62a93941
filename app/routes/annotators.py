"""``/projects/{pid}/annotators``: how many questions each annotator answered."""

from __future__ import annotations

from fastapi import APIRouter

from app.routes.common import ReadProject, StrictJSONRoute, problem_responses
from app.schemas import AnnotatorPage
from app.security import ProjectKeyDep
from app.services.annotators import annotator_counts

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/annotators", tags=["annotators"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AnnotatorPage)
def annotators(view: ReadProject) -> AnnotatorPage:
    """Every annotator of the project with the answers it gave, accepted and refused."""
    return annotator_counts(view.session, view.state.project_id)
