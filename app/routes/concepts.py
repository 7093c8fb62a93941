"""``/projects/{pid}/concepts``: register and list concepts."""

from __future__ import annotations

from fastapi import APIRouter

from app.db import SessionDep
from app.routes.common import Limit, Offset, StrictJSONRoute, WriteProject, problem_responses
from app.schemas import ConceptPage, ConceptRead, ConceptsCreate, ConceptsCreated
from app.security import ProjectIdPath, ProjectKeyDep
from app.services import concepts as service
from app.services.projects import get_project

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/concepts", tags=["concepts"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)


@router.post("", status_code=201, response_model=ConceptsCreated,
             responses=problem_responses(409, 413))
def add_concepts(body: ConceptsCreate, work: WriteProject) -> ConceptsCreated:
    """Register concepts by name; a name already registered is not an error."""
    created, concepts = service.add_concepts(work, body.concepts)
    return ConceptsCreated(created=created,
                           concepts=[ConceptRead.model_validate(c) for c in concepts])


@router.get("", response_model=ConceptPage)
def list_concepts(project_id: ProjectIdPath, session: SessionDep, limit: Limit = 100,
                  offset: Offset = 0) -> ConceptPage:
    """The concepts in registration order."""
    get_project(session, project_id)
    concepts, total = service.list_concepts(session, project_id, limit, offset)
    return ConceptPage(items=[ConceptRead.model_validate(c) for c in concepts], total=total)
