"""Disagreements of a ``consensus`` project: listing them, and a reviewer resolving one.

A disagreement (:class:`models.Disagreement`) is opened and closed by the consensus itself
(:func:`app.services.labels.consensus.sync_disagreements`); a reviewer's resolution is an
answer with the role ``reviewer`` and the source ``review``, which the consensus takes as
final for its pair (of two resolutions of one pair, the later stands).
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import DisagreementNotFound
from app.schemas import (
    DisagreementAnswer,
    DisagreementItem,
    DisagreementPage,
    LabelRef,
    Resolution,
    label_value,
)
from app.services.annotators import record_answer
from app.services.labels.consensus import Change, LiveAnswer, live_of, recompute
from app.services.labels.proofs import proof_chains, proof_refs
from app.services.state import ProjectState
from app.services.unit import ProjectView, ProjectWork
from models import Answer, Disagreement, Project, utcnow
from reasoning.consensus import Answer as Core

__all__ = ["list_disagreements", "resolve"]

_LAST = 2**62


def _answers(session: Session, state: ProjectState,
             pairs: set[tuple[int, int]]) -> dict[tuple[int, int], list[DisagreementAnswer]]:
    """The live answers on ``pairs``, per pair, in arrival order."""
    out: dict[tuple[int, int], list[DisagreementAnswer]] = {pair: [] for pair in pairs}
    if not pairs:
        return out
    a_ids = {a for a, _ in pairs}
    rows = session.scalars(select(Answer).where(
        Answer.project_id == state.project_id, Answer.retracted_at.is_(None),
        Answer.a_id.in_(a_ids)).order_by(Answer.id))
    name = state.name_of
    for row in rows:
        bucket = out.get((row.a_id, row.b_id))
        if bucket is not None:
            bucket.append(DisagreementAnswer(
                id=row.id, a=name[row.a_id], b=name[row.b_id], label=label_value(row.positive),
                annotator=row.annotator, role="reviewer" if row.role == "reviewer"
                else "annotator", source=row.source, created_at=row.created_at,
                outcome=row.outcome, retracted_at=row.retracted_at))
    return out


def _item(state: ProjectState, row: Disagreement,
          answers: list[DisagreementAnswer]) -> DisagreementItem:
    status = state.closure.status(row.a_id, row.b_id)
    proof = state.closure.proof(row.a_id, row.b_id) if status.value is not None else None
    name = state.name_of
    return DisagreementItem(
        id=row.id, a=name[row.a_id], b=name[row.b_id],
        state="open" if row.closed_at is None else "closed",
        opened_at=row.opened_at, closed_at=row.closed_at,
        consensus=None if status.value is None else label_value(status.value),
        positive=[ans for ans in answers if ans.label == "positive"],
        negative=[ans for ans in answers if ans.label == "negative"],
        proof=[LabelRef.model_validate(ref) for ref in proof_refs(state, proof)] if proof
        else [],
        chains=proof_chains(state, proof) if proof is not None else [])


def list_disagreements(view: ProjectView,
                       state_filter: Literal["open", "closed", "all"]) -> DisagreementPage:
    """The project's disagreements (``open``, ``closed`` or ``all``), oldest first."""
    state = view.state
    query = select(Disagreement).where(Disagreement.project_id == state.project_id)
    if state_filter == "open":
        query = query.where(Disagreement.closed_at.is_(None))
    elif state_filter == "closed":
        query = query.where(Disagreement.closed_at.is_not(None))
    rows = list(view.session.scalars(query.order_by(Disagreement.id)))
    answers = _answers(view.session, state, {(r.a_id, r.b_id) for r in rows})
    return DisagreementPage(items=[_item(state, r, answers[(r.a_id, r.b_id)]) for r in rows])


def _disagreement(session: Session, project_id: int, disagreement_id: int) -> Disagreement:
    row = session.get(Disagreement, disagreement_id)
    if row is None or row.project_id != project_id:
        raise DisagreementNotFound(disagreement_id)
    return row


def resolve(work: ProjectWork, disagreement_id: int, body: Resolution) -> DisagreementItem:
    """Resolve a disagreement with the reviewer's value: recorded as a reviewer's answer
    (final for the pair), the consensus recomputed, the disagreement closed."""
    found = _disagreement(work.session, work.state.project_id, disagreement_id)
    pair = (found.a_id, found.b_id)
    positive = body.label == "positive"
    work.session.rollback()

    def store(session: Session, project: Project) -> list[LiveAnswer]:
        answer = record_answer(session, project.id, pair[0], pair[1], positive, body.annotator,
                               outcome="asserted", source="review", role="reviewer")
        row = _disagreement(session, project.id, disagreement_id)
        row.closed_at = row.closed_at or utcnow()
        row.resolution_id = answer.id
        session.flush()
        return [live_of(answer)]

    extra = Core(pair[0], pair[1], positive, body.annotator, reviewer=True, order=_LAST)
    recompute(work, Change(extra=(extra,), store=store, pair=pair))
    row = _disagreement(work.session, work.state.project_id, disagreement_id)
    answers = _answers(work.session, work.state, {pair})
    item = _item(work.state, row, answers[pair])
    work.session.rollback()
    return item

