"""Per-annotator counts: answers accepted (asserted labels, live or retracted) and refused (409).

A refused answer changes nothing in the order, so it is kept apart from the labels, in
``refused_answers``, only to be counted: one row per contradiction answered to a ``POST`` of a
label (a replayed idempotent answer is not counted again).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.schemas import AnnotatorCounts, AnnotatorPage
from models import AssertedLabel, RefusedAnswer, utcnow

__all__ = ["annotator_counts", "record_refusal"]


def record_refusal(session: Session, project_id: int, a_id: int, b_id: int, positive: bool,
                   annotator: str | None) -> None:
    """Keep one refused answer of ``annotator``, in the caller's write transaction (the one
    that refused it: :func:`app.services.labels.writing.post_label`)."""
    session.add(RefusedAnswer(project_id=project_id, a_id=a_id, b_id=b_id, positive=positive,
                              annotator=annotator, created_at=utcnow()))


def annotator_counts(session: Session, project_id: int) -> AnnotatorPage:
    """The counts of every annotator of the project, by name.

    ``answered`` = ``accepted`` (live labels) + ``retracted`` + ``refused``; labels posted
    without an annotator count under ``None`` (listed last).
    """
    live = func.count(AssertedLabel.id).filter(AssertedLabel.retracted_at.is_(None))
    labels = session.execute(
        select(AssertedLabel.annotator, live, func.count(AssertedLabel.id))
        .where(AssertedLabel.project_id == project_id).group_by(AssertedLabel.annotator))
    refusals = session.execute(
        select(RefusedAnswer.annotator, func.count(RefusedAnswer.id))
        .where(RefusedAnswer.project_id == project_id).group_by(RefusedAnswer.annotator))
    counts: dict[str | None, dict[str, Any]] = {}

    def row(name: str | None) -> dict[str, Any]:
        return counts.setdefault(name, {"annotator": name, "answered": 0, "accepted": 0,
                                        "retracted": 0, "refused": 0})

    for name, accepted, asserted in labels:
        row(name).update(accepted=accepted, retracted=asserted - accepted)
    for name, refused in refusals:
        row(name)["refused"] = refused
    for item in counts.values():
        item["answered"] = item["accepted"] + item["retracted"] + item["refused"]
    ordered = sorted(counts.values(), key=lambda c: (c["annotator"] is None, c["annotator"] or ""))
    return AnnotatorPage(items=[AnnotatorCounts(**item) for item in ordered])
