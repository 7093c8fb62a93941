"""What every label policy shares: a label asserted and stored, the answer a label write
returns, the canonical replay of a long run, and what changed between two closures.

``strict`` asserts every label this way (:mod:`app.services.labels.strict`); ``consensus``
asserts an answer on a pair nobody answered that the closure does not contradict the same way
(its fast path, :mod:`app.services.labels.consensus`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import select

from app.errors import (
    AnswerNotFound,
    BudgetExceeded,
    BulkContradiction,
    Contradiction,
    InvalidItems,
    LabelNotFound,
    UnknownConcepts,
)
from app.schemas import (
    MAX_DECIDED_LISTED,
    DecidedPair,
    DisagreementRef,
    LabelCreated,
    LabelIn,
    NewlyDecided,
    label_value,
)
from app.security import AnswerOwner, Caller
from app.services.labels.proofs import pair_problem
from app.services.labels.store import cause_in_store, release, write_effects
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import Answer, AssertedLabel, Project, utcnow
from reasoning.closure import Closure, ContradictionError, Label, Update, bit_positions

__all__ = [
    "CANONICAL_MIN",
    "CanonicalRun",
    "ClosureDiff",
    "Planned",
    "Refused",
    "Written",
    "canonical_run",
    "closure_diff",
    "label_created",
    "check_retract",
    "live_answer",
    "live_pair",
    "owner_of",
    "resolve_bulk",
    "store_label",
    "within_budget",
]

M = TypeVar("M", bound=BaseModel)


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Written(Generic[M]):
    """A label write that went through: its answer, ``created`` (a bulk import always is),
    or not (the one label posted was already asserted the same way)."""

    answer: M
    created: bool = True


@dataclass(frozen=True)
class Refused:
    """A label write refused by the order: nothing asserted; ``error`` holds the proof."""

    error: Contradiction | BulkContradiction


# ---------------------------------------------------------------------------- what changed
@dataclass(frozen=True)
class ClosureDiff:
    """What changed from one closure to another (same concepts).

    ``decided``: pairs newly decided, listed up to :data:`MAX_DECIDED_LISTED`; ``undecided``:
    pairs no longer decided or decided the other way, listed with their value before;
    ``n_positive``, ``n_negative``: the pairs newly decided each way; ``n_undecided``: every
    pair no longer decided or decided the other way.
    """

    decided: list[DecidedPair] = field(default_factory=list)
    undecided: list[DecidedPair] = field(default_factory=list)
    n_positive: int = 0
    n_negative: int = 0
    n_undecided: int = 0


def closure_diff(state: ProjectState, before: Closure, after: Closure) -> ClosureDiff:
    """What changed from ``before`` to ``after`` (:class:`ClosureDiff`), named by ``state``."""
    name: dict[Any, str] = state.name_of
    concepts = after.concepts
    old_down, _, old_neg, _ = before.reach()
    new_down, _, new_neg, _ = after.reach()
    decided: list[DecidedPair] = []
    undecided: list[DecidedPair] = []
    counts = [0, 0, 0]  # newly positive, newly negative, no longer decided as before
    for x in range(len(concepts)):
        changes = ((new_down[x] & ~old_down[x], True, decided, 0),
                   (new_neg[x] & ~old_neg[x], False, decided, 1),
                   (old_down[x] & ~new_down[x], True, undecided, 2),
                   (old_neg[x] & ~new_neg[x], False, undecided, 2))
        for bits, value, out, count in changes:
            counts[count] += bits.bit_count()
            if bits and len(out) < MAX_DECIDED_LISTED:
                out += [DecidedPair(a=name[concepts[x]], b=name[concepts[y]],
                                    label=label_value(value))
                        for y in bit_positions(bits)[:MAX_DECIDED_LISTED - len(out)]]
    return ClosureDiff(decided, undecided, *counts)


def _decided_list(state: ProjectState, update: Update) -> list[DecidedPair]:
    """The first :data:`MAX_DECIDED_LISTED` pairs ``update`` decided (an answer stays small)."""
    name: dict[Any, str] = state.name_of
    listed = [DecidedPair(a=name[a], b=name[b], label=label_value(True))
              for a, b in update.pairs(True, MAX_DECIDED_LISTED)]
    return listed + [DecidedPair(a=name[a], b=name[b], label=label_value(False))
                     for a, b in update.pairs(False, MAX_DECIDED_LISTED - len(listed))]


def label_created(state: ProjectState, body: LabelIn, live: LiveLabel | None, *,
                  annotator: str | None, answer_id: int | None = None,
                  created_at: datetime | None = None, update: Update | None = None,
                  diff: ClosureDiff | None = None, disagreement: DisagreementRef | None = None,
                  check_failed: bool = False) -> LabelCreated:
    """The answer to one label post: the label on the pair (``live``; id 0 when none), the
    answer kept (``answer_id``), and what it newly decided: by the label alone (``update``:
    the first pairs listed, the rest paged by ``decided_rest``) or through a changed
    consensus (``diff``, with what it made undecided)."""
    if update is not None:
        diff = ClosureDiff(_decided_list(state, update), [], update.n_positive,
                           update.n_negative)
    diff = diff or ClosureDiff()
    total = diff.n_positive + diff.n_negative
    rest = (f"/projects/{state.project_id}/labels?caused_by={live.id}&source=inferred"
            if update is not None and live is not None and total > MAX_DECIDED_LISTED
            else None)
    return LabelCreated(
        id=live.id if live is not None else 0, answer_id=answer_id, a=body.a, b=body.b,
        label=label_value(body.positive), annotator=annotator,
        created_at=created_at or (live.created_at if live is not None else utcnow()),
        newly_decided=NewlyDecided(positive=diff.n_positive, negative=diff.n_negative),
        decided=diff.decided, decided_total=total, decided_rest=rest,
        undecided=diff.undecided, disagreement=disagreement, check_failed=check_failed)


# ---------------------------------------------------------------------------- one label
@dataclass(frozen=True)
class Planned:
    """A label applied to the cached closure, to be stored."""

    a_id: int
    b_id: int
    update: Update
    was_decided: bool


def within_budget(work: ProjectWork, closure: Closure, a_id: Any, b_id: Any, positive: bool,
                  what: str) -> None:
    """Refuse, before the work, a label that would grow the closure past the budget."""
    limit = work.limits.decided_pairs
    if len(closure) >= limit - len(closure.concepts) ** 2:  # else no label can reach it
        would_reach = len(closure) + closure.growth(a_id, b_id, positive)
        if would_reach > limit:
            raise BudgetExceeded("decided_pairs", limit, would_reach, what)


def store_label(work: ProjectWork, project: Project, body: LabelIn,
                plan: Planned) -> LiveLabel:
    """Store the label and the lines it decided; the label as the state now holds it."""
    state, session = work.state, work.session
    project.version += 1
    label = AssertedLabel(project_id=project.id, a_id=plan.a_id, b_id=plan.b_id,
                          positive=body.positive, annotator=body.annotator, created_at=utcnow(),
                          version=project.version)
    session.add(label)
    session.flush()
    # decided before: the label whose effect holds the pair stays its cause
    label.caused_by = cause_in_store(session, state.closure, project.id, plan.a_id,
                                     plan.b_id, body.positive) if plan.was_decided else label.id
    write_effects(session, project.id, [(label.id, plan.update)], state.closure.concepts)
    release(session, state, [(plan.a_id, plan.b_id)])
    state.remember_label(label)
    return state.labels[(plan.a_id, plan.b_id)]


def resolve_bulk(state: ProjectState, labels: list[LabelIn]) -> list[tuple[int, int]]:
    """The concept ids of every label's pair; every offending item listed in a 422."""
    unknown: list[str] = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(labels):
        problem = pair_problem(state.id_of, item.a, item.b)
        if problem is not None:
            unknown.extend(problem.unknown)
            errors.append({"index": index, "a": item.a, "b": item.b, "reason": problem.reason})
    if unknown:
        raise UnknownConcepts(unknown, errors)
    if errors:
        raise InvalidItems(errors, "labels")
    return [(state.id_of[item.a], state.id_of[item.b]) for item in labels]


def live_answer(work: ProjectWork, answer_id: int) -> Answer:
    """The project's live answer ``answer_id``; 404 when there is none (or it was
    retracted)."""
    answer = work.session.get(Answer, answer_id)
    if answer is None or answer.project_id != work.state.project_id:
        raise AnswerNotFound(answer_id)
    if answer.retracted_at is not None:
        raise AnswerNotFound(answer_id, "this answer was already retracted")
    return answer


def owner_of(annotator: str | None, role: str) -> AnswerOwner:
    """Whose an answer is, as :meth:`app.security.Caller.check_retract` asks."""
    return AnswerOwner(annotator, role == "reviewer")


def check_retract(work: ProjectWork, caller: Caller, *where: Any) -> None:
    """Ask ``caller`` whether it may remove the project's live answers that match ``where``
    (:class:`~app.errors.Forbidden` otherwise), before anything is removed."""
    rows = work.session.execute(select(Answer.annotator, Answer.role).where(
        Answer.project_id == work.state.project_id, Answer.retracted_at.is_(None), *where))
    caller.check_retract(owner_of(row.annotator, row.role) for row in rows)


def live_pair(work: ProjectWork, label_id: int) -> tuple[int, int]:
    """The pair of the project's live label ``label_id``; 404 when there is none (or it was
    retracted already)."""
    pair = work.state.pair_of_label.get(label_id)
    if pair is None:
        label = work.session.get(AssertedLabel, label_id)
        if label is not None and label.project_id == work.state.project_id:
            raise LabelNotFound(label_id, "this label was already retracted")
        raise LabelNotFound(label_id)
    return pair


# ---------------------------------------------------------------------------- a long run
CANONICAL_MIN = 200
"""An import of at least this many labels into a project without labels is applied in the
canonical order (:meth:`reasoning.closure.Closure.canonical_order`): closed at once, each label
deciding one row and one column, so a chain of 20,000 concepts takes seconds. Below it, the
labels are replayed in the order given, which costs little; above, replaying a long chain
label by label costs its pairs (a 900-chain: 70 ms of one thread, long enough to show in
other projects' latency)."""


@dataclass(frozen=True)
class CanonicalRun:
    """A run of labels closed at once: the closure after, the labels' positions in the order
    applied, and each applied label's update (``recorded``: it decided something)."""

    closure: Closure
    order: list[int]
    updates: list[Update]


def canonical_run(closure: Closure, items: list[Label], limit: int) -> CanonicalRun | None:
    """``items`` applied in the canonical order to ``closure``'s concepts (which hold no
    label), or None (a contradiction among them: replay them in order instead).

    Raises :class:`BudgetExceeded` when the run would decide more than ``limit`` pairs.
    """
    found = Closure.canonical_order(items)
    if found is None:
        return None
    order, n_positive = found
    if len(closure) + 2 * n_positive > limit:  # its negative mirror at least as large
        raise BudgetExceeded("decided_pairs", limit, len(closure) + 2 * n_positive,
                             "the import")
    try:
        after, updates = Closure.replay_effects([items[k] for k in order], closure.concepts)
    except ContradictionError:
        return None
    if len(after) > limit:
        raise BudgetExceeded("decided_pairs", limit, len(after), "the import")
    return CanonicalRun(after, order, updates)
