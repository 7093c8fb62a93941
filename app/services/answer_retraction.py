"""``DELETE /projects/{pid}/answers/{id}``: retract one answer.

``strict``: the answer is stamped retracted; its label goes when no other live accepted
answer stands behind it (the label's retraction, :func:`app.services.labels.retract_label`).
``consensus``: the consensus is computed again without it
(:func:`app.services.labels.withdrawing.withdraw_answers`).
"""

from __future__ import annotations

from sqlalchemy import func, select

from app.errors import AnswerNotFound
from app.schemas import AnswerRetracted, label_value
from app.services.annotators import ACCEPTED
from app.services.labels import retract_label
from app.services.labels.withdrawing import changed_count, stamp_retracted, withdraw_answers
from app.services.unit import ProjectWork
from models import Answer, Project, utcnow

__all__ = ["retract_answer"]


def _live_answer(work: ProjectWork, answer_id: int) -> Answer:
    answer = work.session.get(Answer, answer_id)
    if answer is None or answer.project_id != work.state.project_id:
        raise AnswerNotFound(answer_id)
    if answer.retracted_at is not None:
        raise AnswerNotFound(answer_id, "this answer was already retracted")
    return answer


def _others_behind(work: ProjectWork, answer: Answer) -> int:
    """Live accepted answers other than ``answer`` behind its label."""
    return work.session.scalar(select(func.count(Answer.id)).where(
        Answer.label_id == answer.label_id, Answer.id != answer.id,
        Answer.outcome.in_(ACCEPTED), Answer.retracted_at.is_(None))) or 0


def retract_answer(work: ProjectWork, answer_id: int) -> AnswerRetracted:
    """Retract one live answer (module docstring); how many pairs it left undecided."""
    answer = _live_answer(work, answer_id)
    name = work.state.name_of
    a, b, positive = name[answer.a_id], name[answer.b_id], answer.positive
    label_id = answer.label_id
    if work.project.policy == "consensus":
        work.session.rollback()
        applied, now = withdraw_answers(work, frozenset([answer_id]))
        return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                               retracted_at=now, undecided=changed_count(applied))
    stands = (answer.outcome in ACCEPTED and label_id is not None
              and label_id in work.state.pair_of_label)
    if stands and not _others_behind(work, answer):
        assert label_id is not None
        work.session.rollback()
        retracted = retract_label(work, label_id)
        return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                               retracted_at=retracted.retracted_at,
                               undecided=retracted.undecided)
    work.session.rollback()
    now = utcnow()

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        _live_answer(work, answer_id)
        stamp_retracted(work.session, frozenset([answer_id]), now)

    work.write(lambda work: None, store)
    return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                           retracted_at=now, undecided=0)
