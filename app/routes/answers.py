"""``/projects/{pid}/answers``: every answer kept, the evidence behind the asserted labels; as
JSON pages, or the whole listing as one CSV download."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.errors import Forbidden, ValidationFailed
from app.routes.common import (
    CSV_RESPONSE,
    Limit,
    ReadProject,
    StrictJSONRoute,
    TableFormat,
    csv_download,
    get_runtime,
    problem_responses,
)
from app.schemas import AnswerItem, AnswerPage, Name
from app.security import Caller, CallerDep, MemberDep
from app.services.answers import (
    ANSWER_CSV_COLUMNS,
    AnswerFilter,
    answer_filter,
    iter_answers,
    list_answers,
)
from app.services.export import csv_chunks

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/answers", tags=["answers"],
                   dependencies=[MemberDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


def _whose(caller: Caller, annotator: str | None, anonymous: bool) -> str | None:
    """The annotator a listing is restricted to: an annotator key reads its own answers only;
    ``anonymous`` and ``annotator`` exclude each other."""
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
    return annotator


def _csv(view: ReadProject, request: Request, chosen: AnswerFilter) -> Response:
    """Every answer ``chosen`` holds, page-less, streamed as CSV in a session of its own."""
    sessions = get_runtime(request).database.sessions

    def stream() -> Iterator[dict]:
        with sessions() as reading:
            for item in iter_answers(reading, chosen):
                yield AnswerItem.model_validate(item).model_dump(mode="json")

    return csv_download(csv_chunks(ANSWER_CSV_COLUMNS, stream()),
                        f"project-{view.project.id}-answers.csv")


@router.get("", response_model=AnswerPage, responses={200: CSV_RESPONSE})
def answers(
    view: ReadProject,
    caller: CallerDep,
    request: Request,
    annotator: Annotated[Name | None, Query(description=(
        "Only this annotator's answers. With an annotator key: that key's annotator, "
        "whether named or not (another name is 403)."))] = None,
    anonymous: Annotated[bool, Query(description=(
        "Only the answers posted without an annotator (not with `annotator`)."))] = False,
    a: Annotated[Name | None, Query(description="Only answers whose first concept is this.")]
    = None,
    b: Annotated[Name | None, Query(description="Only answers whose second concept is this.")]
    = None,
    minority: Annotated[bool, Query(description=(
        "Only the live answers that disagree with the consensus of `GET agreement` (per "
        "annotator and pair the latest; a reviewer's never)."))] = False,
    cursor: Annotated[str | None, Query(max_length=4096, description=(
        "Start after this cursor: the `next_cursor` of the previous page."))] = None,
    limit: Limit = 100,
    format: TableFormat = "json",
) -> AnswerPage | Response:
    """Every answer of the project, oldest first, retracted ones included.

    Each label posted (single, bulk, imported, a reviewer's resolution) is one answer, whatever
    became of it (`outcome`). The labels listing shows what is decided; this shows the evidence.
    Page with `next_cursor` → `cursor`. An annotator key reads its own answers only.
    `format=csv`: every answer of the listing (the filters apply, `cursor` and `limit` do not)
    as one CSV download, a column per field of an item.
    """
    annotator = _whose(caller, annotator, anonymous)
    if format == "csv":
        return _csv(view, request, answer_filter(
            view.session, view.state, annotator=annotator, anonymous=anonymous, a=a, b=b,
            minority=minority))
    return list_answers(view.session, view.state, annotator=annotator, anonymous=anonymous,
                        a=a, b=b, minority=minority, cursor=cursor, limit=limit)
