"""``/projects/{pid}/export``: every decided pair as CSV, JSON or GraphML, or the whole project
as JSON Lines in the import format (``format=project``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from app.routes.common import ReadProject, StrictJSONRoute, get_runtime, problem_responses
from app.schemas import ProjectRead
from app.security import ProjectKeyDep
from app.services.export import FORMAT_NAMES, FORMATS, export, get_format
from app.services.quality import quality

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}", tags=["export"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)

if TYPE_CHECKING:
    FormatName = str
else:  # the registry's names, in its order: the schema's enum
    FormatName = Literal[FORMAT_NAMES]


@router.get("/export", response_class=Response, responses={
    200: {"description": "Every decided pair with its source; GraphML: the positive relation "
          "with asserted edges marked; project: the whole project as JSON Lines "
          "(docs/formats.md), which POST .../import reads back.",
          "content": {f.media_type: {"schema": {"type": f.schema}} for f in FORMATS}}})
def export_project(view: ReadProject, request: Request,
                   format: FormatName = FORMAT_NAMES[0]) -> Response:
    """Download every decided pair of the project, or (`project`) the whole project.

    Streamed as it is read (one read transaction: a consistent snapshot), so the first bytes
    come at once and memory stays flat whatever the size of the closure. `json` and `project`
    also say how many of the map's pool pairs are likely wrong (as `GET quality` does, when
    the export was asked).
    """
    chosen = get_format(format)
    project = ProjectRead.model_validate(view.project).model_dump(mode="json")
    measured = quality(view).model_dump(mode="json") if chosen.quality else None
    project_id = view.project.id
    sessions = get_runtime(request).database.sessions

    def stream() -> Iterator[bytes]:
        with sessions() as reading:
            yield from export(reading, project, chosen, measured)

    filename = f"project-{project_id}.{chosen.suffix}"
    return StreamingResponse(stream(), media_type=chosen.media_type,
                             headers={"Content-Disposition": f'attachment; filename="{filename}"'})
