"""``/projects/{pid}/annotators``: how many questions each annotator answered."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.routes.common import ReadProject, StrictJSONRoute, problem_responses
from app.security import ProjectKeyDep
from app.services.annotators import annotator_counts

__all__ = ["AnnotatorCounts", "AnnotatorPage", "router"]

router = APIRouter(prefix="/projects/{project_id}/annotators", tags=["annotators"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


class AnnotatorCounts(BaseModel):
    annotator: str | None = Field(description="null: labels posted without an annotator.")
    answered: int = Field(description="accepted + retracted + refused.")
    accepted: int = Field(description="Labels asserted and still live.")
    retracted: int = Field(description="Labels asserted, retracted since.")
    refused: int = Field(description="Answers refused as contradictions (409).")


class AnnotatorPage(BaseModel):
    items: list[AnnotatorCounts]


@router.get("", response_model=AnnotatorPage)
def annotators(view: ReadProject) -> AnnotatorPage:
    """Every annotator of the project with the answers it gave, accepted and refused."""
    return AnnotatorPage.model_validate(
        {"items": annotator_counts(view.session, view.state.project_id)})
