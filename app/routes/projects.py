"""``/projects``: create, list, read (with counts), update, delete, rotate the key."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.db import SessionDep
from app.routes.common import (
    Limit,
    Offset,
    ReadProject,
    RegistryDep,
    SettingsDep,
    StrictJSONRoute,
    get_runtime,
    problem_responses,
)
from app.schemas import (
    ApiKeyRead,
    ProjectCreate,
    ProjectCreated,
    ProjectDetail,
    ProjectList,
    ProjectRead,
    ProjectUpdate,
    ReviewerKeyRead,
)
from app.security import AdminDep, KeyMakerDep, MemberDep, ProjectIdPath, ProjectKeyDep
from app.services import projects as service

__all__ = ["admin_router", "router"]

admin_router = APIRouter(prefix="/projects", tags=["projects"], dependencies=[AdminDep],
                         responses=problem_responses(401, 403, 422, 503),
                         route_class=StrictJSONRoute)
router = APIRouter(prefix="/projects/{project_id}", tags=["projects"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)


@admin_router.post("", status_code=201, response_model=ProjectCreated,
                   responses=problem_responses(413))
def create_project(body: ProjectCreate, session: SessionDep,
                   settings: SettingsDep) -> ProjectCreated:
    """Create a project. Its `api_key` is in this answer only (it is stored hashed)."""
    project, key = service.create_project(session, body, settings.default_prediction_model)
    return ProjectCreated.model_validate({**ProjectRead.model_validate(project).model_dump(),
                                          "api_key": key})


@admin_router.get("", response_model=ProjectList)
def list_projects(session: SessionDep, limit: Limit = 100, offset: Offset = 0) -> ProjectList:
    """Every project, oldest first."""
    projects, total = service.list_projects(session, limit, offset)
    return ProjectList(items=[ProjectRead.model_validate(p) for p in projects], total=total)


@admin_router.delete("/{project_id}", status_code=204,
                     responses=problem_responses(404, 409))
def delete_project(project_id: ProjectIdPath, session: SessionDep,
                   registry: RegistryDep) -> Response:
    """Delete a project with everything in it."""
    service.delete_project(session, registry, project_id)
    return Response(status_code=204)


@router.get("", response_model=ProjectDetail, dependencies=[MemberDep])
def get_project(view: ReadProject) -> ProjectDetail:
    """The project with its counts and the Theorem 2 bounds on the questions still needed."""
    return service.project_detail(view.project, view.state)


@router.patch("", response_model=ProjectRead, dependencies=[ProjectKeyDep],
              responses=problem_responses(409, 413))
def update_project(project_id: ProjectIdPath, body: ProjectUpdate, session: SessionDep,
                   request: Request) -> ProjectRead:
    """Change the name, description, prediction model, policy or question of a project.

    `strict` → `consensus` computes the consensus of every answer kept and asserts it;
    `consensus` → `strict` keeps the current consensus as the asserted labels.
    """
    return ProjectRead.model_validate(
        service.update_project(session, project_id, body, get_runtime(request)))


@router.post("/reviewer-key", response_model=ReviewerKeyRead, dependencies=[KeyMakerDep])
def rotate_reviewer_key(project_id: ProjectIdPath, session: SessionDep) -> ReviewerKeyRead:
    """A new reviewer key for the project (it resolves disagreements); the old one stops
    working at once. Needs the admin key or the project's key."""
    return ReviewerKeyRead(reviewer_key=service.rotate_reviewer_key(session, project_id))


@router.post("/api-key", response_model=ApiKeyRead, dependencies=[KeyMakerDep])
def rotate_api_key(project_id: ProjectIdPath, session: SessionDep) -> ApiKeyRead:
    """A new key for the project; the old key stops working at once. Needs the admin key or
    the project's key (a reviewer key makes no keys)."""
    return ApiKeyRead(api_key=service.rotate_key(session, project_id))
