"""``/projects/{pid}/answers``: every answer kept, the evidence behind the asserted labels."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.errors import Forbidden, ValidationFailed
from app.routes.common import Limit, ReadProject, StrictJSONRoute, problem_responses
from app.schemas import AnswerPage, Name
from app.security import CallerDep, MemberDep
from app.services.answers import list_answers

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/answers", tags=["answers"],
                   dependencies=[MemberDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AnswerPage)
def answers(
    view: ReadProject,
    caller: CallerDep,
    annotator: Annotated[Name | None, Query(description=(
        "Only this annotator's answers. With an annotator key: that key's annotator, "
        "whether named or not (another name is 403)."))] = None,
    anonymous: Annotated[bool, Query(description=(
        "Only the answers posted without an annotator (not with `annotator`)."))] = False,
    a: Annotated[Name | None, Query(description="Only answers whose first concept is this.")]
    = None,
    b: Annotated[Name | None, Query(description="Only answers whose second concept is this.")]
    = None,
    cursor: Annotated[str | None, Query(max_length=4096, description=(
        "Start after this cursor: the `next_cursor` of the previous page."))] = None,
    limit: Limit = 100,
) -> AnswerPage:
    """Every answer of the project, oldest first, retracted ones included.

    Each label posted (single, bulk, imported, a reviewer's resolution) is one answer, whatever
    became of it (`outcome`). The labels listing shows what is decided; this shows the evidence.
    Page with `next_cursor` → `cursor`. An annotator key reads its own answers only.
    """
    if caller.role == "annotator":
        annotator = caller.speaks_for(annotator)
        if anonymous:
            raise Forbidden("an annotator key reads its own answers only")
    if anonymous and annotator is not None:
        raise ValidationFailed("`anonymous=true` lists the answers without an annotator; "
                               "it cannot be combined with `annotator`",
                               errors=[{"loc": ["query", "anonymous"],
                                        "msg": "cannot be combined with annotator",
                                        "type": "value_error"}])
    return list_answers(view.session, view.state, annotator=annotator, anonymous=anonymous,
                        a=a, b=b, cursor=cursor, limit=limit)
