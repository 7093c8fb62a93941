"""Per-annotator counts: answers accepted (asserted labels, live or retracted) and refused (409).

A refused answer changes nothing in the order, so it is kept apart from the labels, in
``refused_answers``, only to be counted: one row per contradiction answered to a ``POST`` of a
label (a replayed idempotent answer is not counted again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import Contradiction
from app.schemas import LabelIn
from app.services.idempotency import Idempotency
from app.services.unit import ProjectWork
from models import AssertedLabel, RefusedAnswer, utcnow

__all__ = ["annotator_counts", "counting_refusals", "record_refusal"]

Outcome = tuple[int, dict[str, Any]]
PostLabel = Callable[..., Outcome]


def record_refusal(work: ProjectWork, body: LabelIn) -> None:
    """Store one refused answer of ``body.annotator`` (its own short write transaction)."""
    id_of = work.state.id_of
    with write_transaction(work.session, work.state.project_id):
        work.session.add(RefusedAnswer(
            project_id=work.state.project_id, a_id=id_of[body.a], b_id=id_of[body.b],
            positive=body.positive, annotator=body.annotator, created_at=utcnow()))


def counting_refusals(post_label: PostLabel) -> PostLabel:
    """``post_label`` that also records each contradiction it answers (raised or returned)."""

    def post(work: ProjectWork, body: LabelIn, idempotency: Idempotency | None = None) -> Outcome:
        try:
            outcome = post_label(work, body, idempotency)
        except Contradiction:
            record_refusal(work, body)
            raise
        if outcome[0] == Contradiction.status and not (idempotency and idempotency.replayed):
            record_refusal(work, body)
        return outcome

    return post


def annotator_counts(session: Session, project_id: int) -> list[dict[str, Any]]:
    """``{"annotator", "answered", "accepted", "retracted", "refused"}`` per annotator, by name.

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
    return sorted(counts.values(), key=lambda c: (c["annotator"] is None, c["annotator"] or ""))
