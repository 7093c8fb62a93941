"""Listing a project's answers: the evidence behind its asserted labels, oldest first.

Answers on a deleted concept stay, named as the concept was (:func:`shown_name`).
Every answer has an id that grows with its arrival, so a page is the answers after the last id
of the previous one (a keyset cursor): each page costs the same however deep, and answers that
arrive while a client pages appear on its last page, never shifting the others.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, aliased

from app.errors import UnknownConcepts
from app.schemas import AnswerItem, AnswerPage, label_value
from app.services.cursors import ANSWERS
from app.services.state import ProjectState
from models import Answer, Concept

__all__ = ["list_answers", "shown_name"]


def shown_name(concept: Any) -> ColumnElement[str]:
    """A concept's name as the history shows it: a deleted one's (a tombstone's) as it was."""
    return func.coalesce(concept.deleted_name, concept.name)


def _concept_ids(state: ProjectState, *names: str | None) -> list[int | None]:
    unknown = [n for n in names if n is not None and n not in state.id_of]
    if unknown:
        raise UnknownConcepts(unknown)
    return [None if n is None else state.id_of[n] for n in names]


def list_answers(session: Session, state: ProjectState, *, annotator: str | None = None,
                 anonymous: bool = False, a: str | None = None, b: str | None = None,
                 cursor: str | None = None, limit: int = 100) -> AnswerPage:
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
    cursor
        The ``next_cursor`` of the previous page.
    limit
        The page size.
    """
    a_id, b_id = _concept_ids(state, a, b)
    ca, cb = aliased(Concept), aliased(Concept)
    query = (select(Answer.id, shown_name(ca), shown_name(cb), Answer.positive,
                    Answer.annotator, Answer.role, Answer.source, Answer.created_at,
                    Answer.outcome, Answer.retracted_at)
             .join(ca, ca.id == Answer.a_id).join(cb, cb.id == Answer.b_id)
             .where(Answer.project_id == state.project_id))
    if annotator is not None:
        query = query.where(Answer.annotator == annotator)
    if anonymous:
        query = query.where(Answer.annotator.is_(None))
    if a_id is not None:
        query = query.where(Answer.a_id == a_id)
    if b_id is not None:
        query = query.where(Answer.b_id == b_id)
    if cursor is not None:
        query = query.where(Answer.id > ANSWERS.decode(cursor)[0])
    rows = session.execute(query.order_by(Answer.id).limit(limit + 1)).all()
    items: list[dict[str, Any]] = [
        {"id": row[0], "a": row[1], "b": row[2], "label": label_value(row[3]),
         "annotator": row[4], "role": row[5], "source": row[6], "created_at": row[7],
         "outcome": row[8], "retracted_at": row[9]} for row in rows[:limit]]
    following = ANSWERS.encode(items[-1]["id"]) if len(rows) > limit else None
    return AnswerPage(items=[AnswerItem.model_validate(i) for i in items],
                      next_cursor=following)

