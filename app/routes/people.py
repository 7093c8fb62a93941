"""``/projects/{pid}/annotator-keys`` (a person's key: make, list, revoke) and
``/projects/{pid}/whoami`` (what the request's key is).

Making, listing and revoking annotator keys needs the project's key or the admin key; any
key of the project may ask ``whoami``. docs/teams.md has the table of who may do what.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from app.db import SessionDep
from app.routes.common import SettingsDep, StrictJSONRoute, problem_responses
from app.schemas import (
    AnnotatorKeyCreate,
    AnnotatorKeyCreated,
    AnnotatorKeyPage,
    Name,
    WhoAmI,
)
from app.security import CallerDep, KeyMakerDep, MemberDep, ProjectIdPath
from app.services import people as service
from app.services.projects import get_project

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}", tags=["teams"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)

AnnotatorPath = Annotated[Name, Path(description="The annotator's name.")]


@router.post("/annotator-keys", status_code=201, response_model=AnnotatorKeyCreated,
             dependencies=[KeyMakerDep], responses=problem_responses(413))
def issue_annotator_key(project_id: ProjectIdPath, body: AnnotatorKeyCreate,
                        session: SessionDep) -> AnnotatorKeyCreated:
    """A key for one annotator, shown once (stored hashed): whoever holds it answers as that
    annotator and owns every answer by that name. Calling it again for the same name issues
    a new key and retires the old one. Needs the project's key or the admin key."""
    return service.issue_key(session, project_id, body.annotator)


@router.get("/annotator-keys", response_model=AnnotatorKeyPage, dependencies=[KeyMakerDep])
def list_annotator_keys(project_id: ProjectIdPath, session: SessionDep) -> AnnotatorKeyPage:
    """Every annotator with a live key, and when it was made (never the keys)."""
    get_project(session, project_id)
    return service.list_keys(session, project_id)


@router.delete("/annotator-keys/{annotator:path}", status_code=204, response_class=Response,
               dependencies=[KeyMakerDep])
def revoke_annotator_key(project_id: ProjectIdPath, annotator: AnnotatorPath,
                         session: SessionDep) -> Response:
    """Revoke the annotator's key: it stops working at once, and the pairs `next` leased to
    the annotator go back to the team. Their answers stay theirs."""
    service.revoke_key(session, project_id, annotator)
    return Response(status_code=204)


@router.get("/whoami", response_model=WhoAmI, dependencies=[MemberDep])
def whoami(project_id: ProjectIdPath, caller: CallerDep, session: SessionDep,
           settings: SettingsDep) -> WhoAmI:
    """What the request's key is in this project: its role and, for an annotator key, the
    annotator it speaks for. When the service runs open every caller is the admin."""
    get_project(session, project_id)
    return WhoAmI(role=caller.role, annotator=caller.annotator, open=settings.open_mode)
