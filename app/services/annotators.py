"""Answers and per-annotator counts.

Every label posted is kept as an :class:`models.Answer` (the evidence), whatever became of it:
it asserted its pair, agreed with the label asserted there, was refused as a contradiction
(``strict``) or disputes the pair (``contested``, ``consensus``). The counts of ``GET
.../annotators`` are read from the answers, so every annotator who answered is listed.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from app.schemas import AnnotatorCounts, AnnotatorPage
from models import Answer, utcnow

__all__ = [
    "ACCEPTED",
    "annotator_counts",
    "record_answer",
    "record_label_answers",
    "record_refusal",
    "retract_label_answers",
    "stamp_retracted",
    "standing",
    "stands_behind",
]

ACCEPTED = ("asserted", "agreed")
"""The outcomes of answers that stand behind an asserted label (their ``label_id``)."""


def record_answer(session: Session, project_id: int, a_id: int, b_id: int, positive: bool,
                  annotator: str | None, *, outcome: str, source: str = "api",
                  label_id: int | None = None, role: str = "annotator",
                  check_question: bool = False) -> Answer:
    """Keep one answer, in the caller's write transaction; the row, with its id."""
    answer = Answer(project_id=project_id, a_id=a_id, b_id=b_id, positive=positive,
                    annotator=annotator, role=role, source=source, outcome=outcome,
                    check_question=check_question, label_id=label_id, created_at=utcnow())
    session.add(answer)
    session.flush()
    return answer


def standing(session: Session, label_ids: Collection[int]) -> set[tuple[int, str | None]]:
    """``(label id, annotator)`` of every live answer standing behind the labels
    ``label_ids``: the same label again from that annotator is no new answer."""
    if not label_ids:
        return set()
    rows = session.execute(select(Answer.label_id, Answer.annotator).where(
        Answer.label_id.in_(label_ids), Answer.outcome.in_(ACCEPTED),
        Answer.retracted_at.is_(None)))
    return {(label_id, annotator) for label_id, annotator in rows if label_id is not None}


def stands_behind(session: Session, label_id: int, annotator: str | None) -> bool:
    """Whether ``annotator`` has a live answer standing behind the label ``label_id``."""
    return (label_id, annotator) in standing(session, [label_id])


def record_refusal(session: Session, project_id: int, a_id: int, b_id: int, positive: bool,
                   annotator: str | None, source: str = "api") -> Answer:
    """Keep one refused answer of ``annotator``, in the write transaction that refused it
    (:mod:`app.services.labels.strict`)."""
    return record_answer(session, project_id, a_id, b_id, positive, annotator,
                         outcome="refused", source=source)


def record_label_answers(session: Session, project_id: int, *, since_version: int,
                         source: str) -> None:
    """Keep the answers behind the labels asserted after ``since_version`` (a bulk write or an
    import): one per label, in the labels' order, in the caller's write transaction."""
    session.execute(text(
        "INSERT INTO answers (project_id, a_id, b_id, positive, annotator, role, source, "
        "outcome, check_question, label_id, created_at) "
        "SELECT project_id, a_id, b_id, positive, annotator, 'annotator', :source, "
        "'asserted', :no, id, created_at FROM asserted_labels "
        "WHERE project_id = :pid AND version > :version ORDER BY id"),
        {"pid": project_id, "version": since_version, "source": source, "no": False})


def stamp_retracted(session: Session, answer_ids: Collection[int], now: datetime) -> None:
    """Stamp the answers ``answer_ids`` retracted (in the caller's write transaction)."""
    if answer_ids:
        session.execute(update(Answer).where(Answer.id.in_(answer_ids),
                                             Answer.retracted_at.is_(None))
                        .values(retracted_at=now).execution_options(synchronize_session=False))


def retract_label_answers(session: Session, label_ids: list[int]) -> None:
    """Stamp the answers that stood behind retracted labels as retracted too."""
    if label_ids:
        session.execute(update(Answer).where(
            Answer.label_id.in_(label_ids), Answer.outcome.in_(ACCEPTED),
            Answer.retracted_at.is_(None)).values(retracted_at=utcnow())
            .execution_options(synchronize_session=False))


def annotator_counts(session: Session, project_id: int) -> AnnotatorPage:
    """The counts of every annotator of the project, by name.

    ``answered`` = ``accepted`` (standing behind a live label) + ``retracted`` + ``refused`` +
    ``contested`` + ``excluded``; answers posted without an annotator count under ``None``
    (listed last).
    """
    live = Answer.retracted_at.is_(None)
    rows = session.execute(
        select(Answer.annotator,
               func.count(Answer.id).filter(live, Answer.outcome.in_(ACCEPTED)),
               func.count(Answer.id).filter(Answer.retracted_at.is_not(None)),
               func.count(Answer.id).filter(live, Answer.outcome == "refused"),
               func.count(Answer.id).filter(live, Answer.outcome == "contested"),
               func.count(Answer.id).filter(live, Answer.outcome == "excluded"),
               func.count(Answer.id))
        .where(Answer.project_id == project_id).group_by(Answer.annotator))
    counts: list[dict[str, Any]] = [
        {"annotator": name, "accepted": accepted, "retracted": retracted, "refused": refused,
         "contested": contested, "excluded": excluded, "answered": answered}
        for name, accepted, retracted, refused, contested, excluded, answered in rows]
    counts.sort(key=lambda c: (c["annotator"] is None, c["annotator"] or ""))
    return AnnotatorPage(items=[AnnotatorCounts(**item) for item in counts])
