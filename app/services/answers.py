"""Listing a project's answers: the evidence behind its asserted labels, oldest first.

Answers on a deleted concept stay, named as the concept was (:func:`shown_name`).
Every answer has an id that grows with its arrival, so a page is the answers after the last id
of the previous one (a keyset cursor): each page costs the same however deep, and answers that
arrive while a client pages appear on its last page, never shifting the others. The minority
answers (``minority=true``: those that disagree with the consensus of the agreement view) page
the same way: their ids come from the agreement view's cached computation
(:func:`app.services.agreement.minority_answer_ids`), read in id order after the cursor. The
whole listing, page-less, is :func:`iter_answers` (the CSV download).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session, aliased

from app.errors import UnknownConcepts
from app.schemas import AnswerItem, AnswerPage, label_value
from app.services.agreement import minority_answer_ids
from app.services.cursors import ANSWERS
from app.services.state import ProjectState
from models import Answer, Concept

__all__ = ["ANSWER_CSV_COLUMNS", "AnswerFilter", "answer_filter", "iter_answers",
           "list_answers", "shown_name"]

ANSWER_CSV_COLUMNS = list(AnswerItem.model_fields)
"""The columns of ``GET answers?format=csv``: the fields of a listed answer, in order."""

_CHUNK = 500
"""Answers read per query while iterating (and minority ids per ``IN`` list)."""


@dataclass(frozen=True)
class AnswerFilter:
    """Which answers a listing holds, resolved to ids: ``minority`` the ids of the minority
    answers (ascending) when only those are listed, else None."""

    project_id: int
    annotator: str | None = None
    anonymous: bool = False
    a_id: int | None = None
    b_id: int | None = None
    minority: tuple[int, ...] | None = None


def shown_name(concept: Any) -> ColumnElement[str]:
    """A concept's name as the history shows it: a deleted one's (a tombstone's) as it was."""
    return func.coalesce(concept.deleted_name, concept.name)


def _concept_ids(state: ProjectState, *names: str | None) -> list[int | None]:
    unknown = [n for n in names if n is not None and n not in state.id_of]
    if unknown:
        raise UnknownConcepts(unknown)
    return [None if n is None else state.id_of[n] for n in names]


def answer_filter(session: Session, state: ProjectState, *, annotator: str | None = None,
                  anonymous: bool = False, a: str | None = None, b: str | None = None,
                  minority: bool = False) -> AnswerFilter:
    """The filter of a listing (:func:`list_answers` has the parameters); an unknown concept
    name is :class:`UnknownConcepts`."""
    a_id, b_id = _concept_ids(state, a, b)
    ids = minority_answer_ids(session, state, annotator=annotator,
                              anonymous=anonymous) if minority else None
    return AnswerFilter(state.project_id, annotator, anonymous, a_id, b_id, ids)


def _query(chosen: AnswerFilter) -> Select:
    ca, cb = aliased(Concept), aliased(Concept)
    query = (select(Answer.id, shown_name(ca), shown_name(cb), Answer.positive,
                    Answer.annotator, Answer.role, Answer.source, Answer.created_at,
                    Answer.outcome, Answer.retracted_at)
             .join(ca, ca.id == Answer.a_id).join(cb, cb.id == Answer.b_id)
             .where(Answer.project_id == chosen.project_id))
    if chosen.annotator is not None:
        query = query.where(Answer.annotator == chosen.annotator)
    if chosen.anonymous:
        query = query.where(Answer.annotator.is_(None))
    if chosen.a_id is not None:
        query = query.where(Answer.a_id == chosen.a_id)
    if chosen.b_id is not None:
        query = query.where(Answer.b_id == chosen.b_id)
    return query.order_by(Answer.id)


def _item(row: Any) -> dict[str, Any]:
    return {"id": row[0], "a": row[1], "b": row[2], "label": label_value(row[3]),
            "annotator": row[4], "role": row[5], "source": row[6], "created_at": row[7],
            "outcome": row[8], "retracted_at": row[9]}


def iter_answers(session: Session, chosen: AnswerFilter, after: int = 0, *,
                 chunk: int = _CHUNK) -> Iterator[dict[str, Any]]:
    """Every answer ``chosen`` holds after the id ``after``, oldest first, read ``chunk`` at a
    time (one query per chunk, each a keyset page; the minority ids at most :data:`_CHUNK`
    to an ``IN`` list)."""
    query = _query(chosen)
    if chosen.minority is not None:
        pending = [i for i in chosen.minority if i > after]
        step = min(chunk, _CHUNK)
        for start in range(0, len(pending), step):
            for row in session.execute(query.where(Answer.id.in_(pending[start:start + step]))):
                yield _item(row)
        return
    while True:
        rows = session.execute(query.where(Answer.id > after).limit(chunk)).all()
        yield from (_item(row) for row in rows)
        if len(rows) < chunk:
            return
        after = rows[-1][0]


def list_answers(session: Session, state: ProjectState, *, annotator: str | None = None,
                 anonymous: bool = False, a: str | None = None, b: str | None = None,
                 minority: bool = False, cursor: str | None = None,
                 limit: int = 100) -> AnswerPage:
    """One page of the project's answers (retracted ones included), oldest first.

    Parameters
    ----------
    session, state
        The read session and the project's cached state (its concept names).
    annotator
        Only this annotator's answers.
    anonymous
        Only the answers posted without an annotator.
    a, b
        Only answers on pairs whose first concept is ``a`` and/or whose second is ``b``
        (names; an unknown name is :class:`UnknownConcepts`).
    minority
        Only the answers that disagree with the consensus of the agreement view.
    cursor
        The ``next_cursor`` of the previous page.
    limit
        The page size.
    """
    chosen = answer_filter(session, state, annotator=annotator, anonymous=anonymous, a=a, b=b,
                           minority=minority)
    after = 0 if cursor is None else ANSWERS.decode(cursor)[0]
    items = list(islice(iter_answers(session, chosen, after, chunk=limit + 1), limit + 1))
    following = ANSWERS.encode(items[limit - 1]["id"]) if len(items) > limit else None
    return AnswerPage(items=[AnswerItem.model_validate(i) for i in items[:limit]],
                      next_cursor=following)
