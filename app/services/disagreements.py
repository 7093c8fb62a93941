"""Disagreements of a ``consensus`` project, as a reader sees them.

A disagreement (:class:`models.Disagreement`) is opened and closed by the consensus itself
(:func:`app.services.labels.change.sync_disagreements`); a reviewer resolves one with an
answer of the role ``reviewer`` (:func:`app.services.labels.consensus.resolve_disagreement`),
which the consensus takes as final for its pair (of two resolutions of one pair, the later
stands). Each item lists every resolution (who, when, what, undone when) and, once closed, why
it closed (``closed_reason``).
"""

from __future__ import annotations

from typing import Any, Literal, cast

from sqlalchemy import Select, select, tuple_
from sqlalchemy.orm import Session

from app.errors import DisagreementNotFound
from app.schemas import (
    ClosedReason,
    DisagreementAnswer,
    DisagreementItem,
    DisagreementPage,
    DisagreementReviewed,
    LabelRef,
    ResolutionItem,
    label_value,
)
from app.services.cursors import DISAGREEMENTS
from app.services.labels.proofs import proof_chains, proof_refs
from app.services.state import ProjectState
from app.services.unit import ProjectView
from models import Answer, Concept, Disagreement
from models.tables import DisagreementResolution

__all__ = ["disagreement_item", "find_disagreement", "list_disagreements", "page_query",
           "reviewed_item"]


def _names(session: Session, state: ProjectState,
           pairs: set[tuple[int, int]]) -> dict[int, str]:
    """The name of every concept of ``pairs``: a deleted one's (a tombstone) as it was."""
    names = dict(state.name_of)
    gone = {c for pair in pairs for c in pair if c not in names}
    if gone:
        for concept_id, deleted_name in session.execute(select(
                Concept.id, Concept.deleted_name).where(Concept.id.in_(sorted(gone)))):
            names[concept_id] = deleted_name or ""
    return names


def _answers(session: Session, state: ProjectState, pairs: set[tuple[int, int]],
             name: dict[int, str]) -> dict[tuple[int, int], list[DisagreementAnswer]]:
    """The live answers on ``pairs``, per pair, in arrival order."""
    out: dict[tuple[int, int], list[DisagreementAnswer]] = {pair: [] for pair in pairs}
    if not pairs:
        return out
    rows = session.scalars(select(Answer).where(
        Answer.project_id == state.project_id, Answer.retracted_at.is_(None),
        tuple_(Answer.a_id, Answer.b_id).in_(sorted(pairs))).order_by(Answer.id))
    for row in rows:
        bucket = out.get((row.a_id, row.b_id))
        if bucket is not None:
            bucket.append(DisagreementAnswer(
                id=row.id, a=name[row.a_id], b=name[row.b_id], label=label_value(row.positive),
                annotator=row.annotator, role="reviewer" if row.role == "reviewer"
                else "annotator", source=row.source, created_at=row.created_at,
                outcome=row.outcome, retracted_at=row.retracted_at))
    return out


def _resolutions(session: Session, ids: list[int]) -> dict[int, list[ResolutionItem]]:
    """Every resolution of the disagreements ``ids``, per disagreement, oldest first."""
    out: dict[int, list[ResolutionItem]] = {k: [] for k in ids}
    if not ids:
        return out
    for k, answer_id, annotator, positive, created, retracted in session.execute(
            select(DisagreementResolution.disagreement_id, Answer.id, Answer.annotator,
                   Answer.positive, Answer.created_at, Answer.retracted_at)
            .join(Answer, Answer.id == DisagreementResolution.answer_id)
            .where(DisagreementResolution.disagreement_id.in_(ids))
            .order_by(DisagreementResolution.id)):
        out[k].append(ResolutionItem(answer_id=answer_id, annotator=annotator,
                                     label=label_value(positive), resolved_at=created,
                                     undone_at=retracted))
    return out


def _item(state: ProjectState, row: Disagreement, answers: list[DisagreementAnswer],
          resolutions: list[ResolutionItem], name: dict[int, str]) -> DisagreementItem:
    live = row.a_id in state.name_of and row.b_id in state.name_of  # else a deleted concept
    status = state.closure.status(row.a_id, row.b_id) if live else None
    proof = state.closure.proof(row.a_id, row.b_id) \
        if status is not None and status.value is not None else None
    return DisagreementItem(
        id=row.id, a=name[row.a_id], b=name[row.b_id],
        state="open" if row.closed_at is None else "closed",
        opened_at=row.opened_at, closed_at=row.closed_at,
        closed_reason=cast(ClosedReason | None,
                           row.closed_reason if row.closed_at is not None else None),
        reopened_at=row.reopened_at, resolutions=resolutions,
        consensus=None if status is None or status.value is None
        else label_value(status.value),
        positive=[ans for ans in answers if ans.label == "positive"],
        negative=[ans for ans in answers if ans.label == "negative"],
        proof=[LabelRef.model_validate(ref) for ref in proof_refs(state, proof)] if proof
        else [],
        chains=proof_chains(state, proof) if proof is not None else [])


def _items(view: ProjectView, rows: list[Disagreement]) -> list[DisagreementItem]:
    """The listing's items of ``rows``, each with its answers and resolutions."""
    state, session = view.state, view.session
    pairs = {(r.a_id, r.b_id) for r in rows}
    name = _names(session, state, pairs)
    answers = _answers(session, state, pairs, name)
    resolved = _resolutions(session, [r.id for r in rows])
    return [_item(state, r, answers[(r.a_id, r.b_id)], resolved[r.id], name) for r in rows]


def page_query(project_id: int, state_filter: Literal["open", "closed", "all"],
               after: int | None, limit: int) -> Select[Any]:
    """The query of a page: the project's disagreements in ``state_filter`` after the id
    ``after`` (None: from the first), at most ``limit``, in id order."""
    query = select(Disagreement).where(Disagreement.project_id == project_id)
    if state_filter == "open":
        query = query.where(Disagreement.closed_at.is_(None))
    elif state_filter == "closed":
        query = query.where(Disagreement.closed_at.is_not(None))
    if after is not None:
        query = query.where(Disagreement.id > after)
    return query.order_by(Disagreement.id).limit(limit)


def list_disagreements(view: ProjectView, state_filter: Literal["open", "closed", "all"],
                       cursor: str | None = None, limit: int = 100) -> DisagreementPage:
    """One page of the project's disagreements (``open``, ``closed`` or ``all``), oldest
    first: those after ``cursor`` (the previous page's ``next_cursor``), at most ``limit``.

    A page is read along the index ``(project_id, id)``: the first page of a big project
    costs what the page holds, and disagreements opened while a client pages come on its
    last page, never shifting the others.
    """
    after = DISAGREEMENTS.decode(cursor)[0] if cursor is not None else None
    rows = list(view.session.scalars(page_query(view.state.project_id, state_filter,
                                                after, limit + 1)))
    following = DISAGREEMENTS.encode(rows[limit - 1].id) if len(rows) > limit else None
    return DisagreementPage(items=_items(view, rows[:limit]), next_cursor=following)


def find_disagreement(session: Session, project_id: int, disagreement_id: int) -> Disagreement:
    """The project's disagreement ``disagreement_id``; 404 when there is none."""
    row = session.get(Disagreement, disagreement_id, populate_existing=True)
    if row is None or row.project_id != project_id:
        raise DisagreementNotFound(disagreement_id)
    return row


def disagreement_item(view: ProjectView, disagreement_id: int) -> DisagreementItem:
    """One disagreement of the project, with both sides' live answers and the proof."""
    return _items(view, [find_disagreement(view.session, view.state.project_id,
                                           disagreement_id)])[0]


def reviewed_item(view: ProjectView, disagreement_id: int, closed_others: int = 0,
                  opened_others: int = 0) -> DisagreementReviewed:
    """One disagreement after a reviewer's step, with how many others its refit closed and
    opened."""
    item = disagreement_item(view, disagreement_id)
    return DisagreementReviewed(**item.model_dump(), closed_others=closed_others,
                                opened_others=opened_others)
