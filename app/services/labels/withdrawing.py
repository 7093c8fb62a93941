"""Withdrawing answers in a ``consensus`` project: the consensus is computed again without
them, and the asserted labels and the closure follow (:mod:`app.services.labels.consensus`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.errors import LabelNotFound
from app.schemas import LabelRetracted, label_value
from app.services.labels.consensus import Applied, Change, pair_answers, recompute
from app.services.unit import ProjectWork
from models import Answer, AssertedLabel, Project, utcnow

__all__ = ["changed_count", "stamp_retracted", "withdraw_answers", "withdraw_label"]


def stamp_retracted(session: Session, answer_ids: frozenset[int], now: datetime) -> None:
    """Stamp the answers ``answer_ids`` retracted (in the write transaction)."""
    if answer_ids:
        session.execute(update(Answer).where(Answer.id.in_(answer_ids),
                                             Answer.retracted_at.is_(None))
                        .values(retracted_at=now).execution_options(synchronize_session=False))


def changed_count(applied: Applied) -> int:
    """How many pairs the event left undecided or decided the other way."""
    before, plan = applied.before, applied.plan
    if plan.closure is None:
        return 0
    old_down, _, old_neg, _ = before.reach()
    new_down, _, new_neg, _ = plan.closure.reach()
    return sum((old_down[x] & ~new_down[x]).bit_count() + (old_neg[x] & ~new_neg[x]).bit_count()
               for x in range(len(old_down)))


def withdraw_answers(work: ProjectWork, answer_ids: frozenset[int],
                     pair: tuple[int, int] | None = None) -> tuple[Applied, datetime]:
    """Retract the answers ``answer_ids`` and bring the labels to the consensus of the rest."""
    now = utcnow()

    def store(session: Session, project: Project) -> list:
        stamp_retracted(session, answer_ids, now)
        return []

    return recompute(work, Change(without=answer_ids, store=store, pair=pair)), now


def withdraw_label(work: ProjectWork, label_id: int) -> LabelRetracted:
    """``DELETE`` of a label in ``consensus``: every live answer behind it (its pair, its
    value) is retracted and the consensus computed again without them."""
    state = work.state
    pair = state.pair_of_label.get(label_id)
    if pair is None:
        label = work.session.get(AssertedLabel, label_id)
        if label is not None and label.project_id == state.project_id:
            raise LabelNotFound(label_id, "this label was already retracted")
        raise LabelNotFound(label_id)
    positive = state.labels[pair].positive
    behind = frozenset(r.id for r in pair_answers(work.session, state.project_id, *pair)
                       if r.positive == positive)
    work.session.rollback()
    applied, now = withdraw_answers(work, behind, pair)
    name = state.name_of
    return LabelRetracted(id=label_id, a=name[pair[0]], b=name[pair[1]],
                          label=label_value(positive), retracted_at=now,
                          undecided=changed_count(applied))
