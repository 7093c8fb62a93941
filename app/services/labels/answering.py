"""Label posts in a ``consensus`` project: every one an answer, none refused.

One label (:func:`post_answer`): an annotator repeating their own latest answer on the pair
adds nothing (200, as in ``strict``); an answer on a pair nobody answered that the closure
does not contradict takes the fast path, asserted exactly like a ``strict`` label; an answer
that gives its pair's label the value every answer on it gives is kept as ``agreed`` (no
label can change; the reliabilities are refitted at the next full event); every other
answer runs the full consensus (:func:`app.services.labels.consensus.recompute`). Bulk labels
and imports (:func:`post_bulk_answers`): every label an answer; one full consensus for all of
them (a set without contradictions is closed at once by it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.schemas import (
    BulkLabels,
    BulkLabelsCreated,
    DecidedPair,
    LabelCreated,
    LabelIn,
    LabelRef,
    NewlyDecided,
    label_value,
)
from app.services.annotators import record_answer
from app.services.labels.asserting import (
    Planned,
    created,
    resolve_bulk,
    store_label,
    within_budget,
)
from app.services.labels.consensus import (
    Applied,
    Change,
    LiveAnswer,
    Recomputed,
    changed_pairs,
    live_of,
    pair_answers,
    plan_change,
    recompute,
    store_change,
)
from app.services.labels.proofs import check_pair
from app.services.labels.results import Written
from app.services.labels.store import release
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import Answer, CheckQuestion, Project, utcnow
from reasoning.closure import ContradictionError
from reasoning.consensus import Answer as Core

__all__ = ["post_answer", "post_bulk_answers", "served_check"]

_LAST = 2**62
"""The order of answers not stored yet: after every stored one."""


def served_check(session: Session, project_id: int, annotator: str | None, a_id: int,
                 b_id: int) -> int | None:
    """The check question on ``(a_id, b_id)`` served to ``annotator`` and not answered yet."""
    who = (CheckQuestion.annotator.is_(None) if annotator is None
           else CheckQuestion.annotator == annotator)
    return session.scalar(select(CheckQuestion.id).where(
        CheckQuestion.project_id == project_id, CheckQuestion.a_id == a_id,
        CheckQuestion.b_id == b_id, CheckQuestion.answer_id.is_(None), who)
        .order_by(CheckQuestion.id.desc()).limit(1))


def _answered_check(session: Session, check: int | None, answer_id: int) -> None:
    if check is not None:
        session.execute(update(CheckQuestion).where(CheckQuestion.id == check)
                        .values(answer_id=answer_id))


@dataclass(frozen=True)
class _Repeat:
    row: LiveAnswer  # the annotator's own latest answer, the same value


@dataclass(frozen=True)
class _Agrees:
    live: LiveLabel  # the pair's label, which every answer on the pair gives
    check: int | None


@dataclass(frozen=True)
class _Slow:
    change: Change  # the answer, to the whole consensus
    plan: Recomputed


@dataclass(frozen=True)
class _Fast:
    planned: Planned
    check: int | None


def post_answer(work: ProjectWork, body: LabelIn) -> Written[LabelCreated]:
    """Keep one answer and bring the asserted labels to the consensus (module docstring)."""
    positive = body.positive

    def compute(work: ProjectWork) -> _Repeat | _Agrees | _Slow | _Fast:
        state, session = work.state, work.session
        a_id, b_id = check_pair(state, body.a, body.b)
        rows = pair_answers(session, state.project_id, a_id, b_id)
        mine = [r for r in rows if r.annotator == body.annotator and not r.reviewer]
        if mine and mine[-1].positive == positive:
            return _Repeat(mine[-1])
        check = served_check(session, state.project_id, body.annotator, a_id, b_id)
        live = state.labels.get((a_id, b_id))
        if rows and live is not None and live.positive == positive and all(
                r.positive == positive for r in rows):
            return _Agrees(live, check)  # nothing to dispute: no label can change
        if not rows:
            was_decided = state.closure.status(a_id, b_id).value is not None
            within_budget(work, state.closure, a_id, b_id, positive, "this label")
            try:
                applied = state.add_label(a_id, b_id, positive)
            except ContradictionError:
                pass
            else:
                return _Fast(Planned(a_id, b_id, applied, was_decided), check)
        change = _full_change(work, body, check)
        return _Slow(change, plan_change(work, change))

    def store(work: ProjectWork, project: Project,
              plan: _Repeat | _Agrees | _Slow | _Fast) -> Written[LabelCreated]:
        if isinstance(plan, _Repeat):
            return Written(_repeated(work.state, body, plan.row), created=False)
        if isinstance(plan, _Slow):
            applied = store_change(work, project, plan.change, plan.plan)
            return Written(_full_created(work.state, body, applied,
                                         any(e.check for e in plan.change.extra)))
        if isinstance(plan, _Agrees):
            return Written(_agreed(work, project, body, plan))
        live = store_label(work, project, body, plan.planned)
        answer = record_answer(work.session, project.id, plan.planned.a_id, plan.planned.b_id,
                               positive, body.annotator, outcome="asserted",
                               source=body.source or "api", label_id=live.id,
                               check_question=plan.check is not None)
        _answered_check(work.session, plan.check, answer.id)
        made = created(work.state, body.a, body.b, positive, live, plan.planned.update,
                       answer.id, body.annotator)
        return Written(made.model_copy(update={"created_at": answer.created_at}))

    return work.write(compute, store)


def _agreed(work: ProjectWork, project: Project, body: LabelIn,
            plan: _Agrees) -> LabelCreated:
    """Keep an answer that agrees with its pair's label and every answer on it."""
    state, session = work.state, work.session
    a_id, b_id = state.id_of[body.a], state.id_of[body.b]
    answer = record_answer(session, project.id, a_id, b_id, body.positive, body.annotator,
                           outcome="agreed", source=body.source or "api",
                           label_id=plan.live.id, check_question=plan.check is not None)
    _answered_check(session, plan.check, answer.id)
    release(session, state, [(a_id, b_id)])
    return LabelCreated(id=plan.live.id, answer_id=answer.id, a=body.a, b=body.b,
                        label=body.label, annotator=body.annotator,
                        created_at=answer.created_at,
                        newly_decided=NewlyDecided(positive=0, negative=0), decided=[],
                        decided_total=0)


def _repeated(state: ProjectState, body: LabelIn, row: LiveAnswer) -> LabelCreated:
    """The answer to a repeat: the label on the pair (id 0: none), nothing changed."""
    live = state.labels.get((row.a_id, row.b_id))
    return LabelCreated(id=live.id if live is not None else 0, answer_id=None, a=body.a,
                        b=body.b, label=body.label, annotator=body.annotator,
                        created_at=live.created_at if live is not None else utcnow(),
                        newly_decided=NewlyDecided(positive=0, negative=0), decided=[],
                        decided_total=0)


def _full_change(work: ProjectWork, body: LabelIn, check: int | None) -> Change:
    """An answer on an answered pair, or against the closure: the whole consensus again."""
    state = work.state
    a_id, b_id = state.id_of[body.a], state.id_of[body.b]

    def store(session: Session, project: Project) -> list[LiveAnswer]:
        answer = record_answer(session, project.id, a_id, b_id, body.positive, body.annotator,
                               outcome="contested", source=body.source or "api",
                               check_question=check is not None)
        _answered_check(session, check, answer.id)
        release(session, state, [(a_id, b_id)])  # the answer answers the question
        return [live_of(answer)]

    extra = Core(a_id, b_id, body.positive, body.annotator, check=check is not None,
                 order=_LAST)
    return Change(extra=(extra,), store=store, pair=(a_id, b_id))


def _full_created(state: ProjectState, body: LabelIn, applied: Applied,
                  check: bool) -> LabelCreated:
    answer = applied.answers[0]
    live = state.labels.get((answer.a_id, answer.b_id))
    decided: list[DecidedPair] = []
    undecided: list[DecidedPair] = []
    n_pos = n_neg = 0
    if applied.plan.closure is not None:
        decided, undecided, n_pos, n_neg = changed_pairs(state, applied.before, state.closure)
    return LabelCreated(
        id=live.id if live is not None else 0, answer_id=answer.id, a=body.a, b=body.b,
        label=body.label, annotator=body.annotator,
        created_at=live.created_at if live is not None else utcnow(),
        newly_decided=NewlyDecided(positive=n_pos, negative=n_neg), decided=decided,
        decided_total=n_pos + n_neg, undecided=undecided,
        disagreement=applied.disagreement, check_failed=check and not body.positive)


# ---------------------------------------------------------------------------- bulk
def post_bulk_answers(work: ProjectWork, body: BulkLabels,
                      source: str) -> Written[BulkLabelsCreated]:
    """Keep every label of a bulk post or an import as an answer; one consensus for all."""
    state = work.state
    pairs = resolve_bulk(state, body.labels)
    before = {pair: live.positive for pair, live in state.labels.items()}
    extra = tuple(Core(a, b, item.positive, item.annotator, order=_LAST + k)
                  for k, (item, (a, b)) in enumerate(zip(body.labels, pairs, strict=True)))

    def store(session: Session, project: Project) -> list[LiveAnswer]:
        now = utcnow()
        rows = [Answer(project_id=project.id, a_id=a, b_id=b, positive=item.positive,
                       annotator=item.annotator, role="annotator",
                       source=item.source or source, outcome="contested",
                       check_question=False, created_at=now)
                for item, (a, b) in zip(body.labels, pairs, strict=True)]
        session.add_all(rows)
        session.flush()
        release(session, state, pairs)
        return [live_of(row) for row in rows]

    applied = recompute(work, Change(extra=extra, store=store))
    n_pos = n_neg = 0
    if applied.plan.closure is not None:
        _, _, n_pos, n_neg = changed_pairs(work.state, applied.before, work.state.closure)
    labels = work.state.labels
    name = state.name_of
    return Written(BulkLabelsCreated(
        created=len(applied.label_ids),
        unchanged=sum(1 for item, pair in zip(body.labels, pairs, strict=True)
                      if before.get(pair) == item.positive),
        newly_decided=NewlyDecided(positive=n_pos, negative=n_neg),
        labels=[LabelRef(id=labels[pair].id if pair in labels else None, a=name[pair[0]],
                         b=name[pair[1]], label=label_value(item.positive))
                for item, pair in zip(body.labels, pairs, strict=True)]))
