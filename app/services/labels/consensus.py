"""The ``consensus`` policy: the asserted labels are the consensus of every live answer.

No answer is refused for contradicting what is decided. The asserted labels are
:func:`reasoning.consensus.consensus` over the project's live answers (concept ids as keys;
a reviewer's answer final for its pair; check answers marked; the answer id as the order),
and whenever that changes, the asserted labels and the stored closure follow through the same
replay as a retraction (:func:`app.services.labels.store.prepare_rewrite`, ``rewrite``):
labels whose value left the consensus are retracted, new ones asserted, the closure replayed
from the first label that changed.

Two ways in (``docs/consensus.md``, *The service*):

* **The fast path**: an answer on a pair that nobody answered yet, which the closure does not
  contradict, is applied exactly like a ``strict`` label (no EM): the consensus of a set of
  answers without contradictions is their labels, so this is the consensus again whenever no
  pair gave way before.
* **The full path** (:func:`recompute`): every other answer (on an answered or disputed pair,
  or contradicting the closure), a retraction of an answer, a reviewer's resolution and a
  change of policy refit the reliabilities and compute the whole consensus again. Between
  such events the reliabilities are those of the last fit.

Every full path also brings the answers' outcomes (``asserted``, ``agreed``, ``contested``)
and the open disagreements (:class:`models.Disagreement`) up to date.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from weakref import WeakKeyDictionary

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from app.schemas import MAX_DECIDED_LISTED, DecidedPair, DisagreementRef, label_value
from app.services.labels.store import insert_labels, prepare_rewrite, release, rewrite
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import Answer, AssertedLabel, Disagreement, Project, utcnow
from reasoning.closure import Closure, Label, Update, bit_positions
from reasoning.consensus import Answer as Core
from reasoning.consensus import Consensus, consensus

__all__ = [
    "Applied",
    "Change",
    "LiveAnswer",
    "Recomputed",
    "adopt_consensus",
    "changed_pairs",
    "core_answers",
    "last_fit",
    "live_answers",
    "live_of",
    "plan_change",
    "pair_answers",
    "recompute",
    "store_change",
    "sync_disagreements",
    "sync_outcomes",
]


@dataclass(frozen=True)
class LiveAnswer:
    """A live (not retracted) answer as the consensus reads it."""

    id: int
    a_id: int
    b_id: int
    positive: bool
    annotator: str | None
    reviewer: bool
    check: bool
    outcome: str
    label_id: int | None


_COLUMNS = (Answer.id, Answer.a_id, Answer.b_id, Answer.positive, Answer.annotator,
            Answer.role, Answer.check_question, Answer.outcome, Answer.label_id)


def _live(row: Any) -> LiveAnswer:
    return LiveAnswer(int(row[0]), int(row[1]), int(row[2]), bool(row[3]), row[4],
                      row[5] == "reviewer", bool(row[6]), row[7], row[8])


def live_answers(session: Session, project_id: int) -> list[LiveAnswer]:
    """Every live answer of the project, in arrival order (ids)."""
    rows = session.execute(select(*_COLUMNS).where(
        Answer.project_id == project_id, Answer.retracted_at.is_(None)).order_by(Answer.id))
    return [_live(row) for row in rows]


def pair_answers(session: Session, project_id: int, a_id: int, b_id: int) -> list[LiveAnswer]:
    """The live answers on one pair, in arrival order."""
    rows = session.execute(select(*_COLUMNS).where(
        Answer.project_id == project_id, Answer.a_id == a_id, Answer.b_id == b_id,
        Answer.retracted_at.is_(None)).order_by(Answer.id))
    return [_live(row) for row in rows]


def core_answers(rows: Sequence[LiveAnswer]) -> list[Core]:
    """The answers as :func:`reasoning.consensus.consensus` takes them."""
    return [Core(r.a_id, r.b_id, r.positive, r.annotator, reviewer=r.reviewer, check=r.check,
                 order=r.id) for r in rows]


# ---------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Recomputed:
    """A consensus and the label changes that bring the asserted labels to it."""

    result: Consensus
    rows: list[LiveAnswer]
    remove: list[int]  # label ids whose value left the consensus
    add: list[tuple[tuple[int, int], bool]]  # new labels, in the order they get ids
    closure: Closure | None  # None: the asserted labels stay
    labels: list[tuple[int, Label]] = field(default_factory=list)  # replay order; new: -k-1
    updates: list[Update] = field(default_factory=list)
    values: Any = None
    extra: tuple[Core, ...] = ()


def _plan(state: ProjectState, rows: list[LiveAnswer], extra: Sequence[Core]) -> Recomputed:
    """The consensus of ``rows`` (and ``extra``, answers not stored yet) and its changes."""
    result = consensus([*core_answers(rows), *extra], state.closure.concepts)
    current = state.labels
    remove = sorted(live.id for pair, live in current.items()
                    if result.labels.get(pair) != live.positive)
    add: list[tuple[tuple[int, int], bool]] = sorted(
        (pair, value) for pair, value in _int_pairs(result.labels).items()
        if pair not in current or current[pair].positive != value)
    if not remove and not add:
        return Recomputed(result, rows, [], [], None, extra=tuple(extra))
    gone = set(remove)
    kept = sorted((live.id, Label(a, b, live.positive)) for (a, b), live in current.items()
                  if live.id not in gone)
    labels = kept + [(-k - 1, Label(a, b, value)) for k, ((a, b), value) in enumerate(add)]
    closure, updates = Closure.replay_effects([lab for _, lab in labels],
                                              state.closure.concepts)
    return Recomputed(result, rows, remove, add, closure, labels, updates,
                      state.values_under(closure), tuple(extra))


def _int_pairs(labels: dict[Any, bool]) -> dict[tuple[int, int], bool]:
    """The consensus's labels keyed by concept id pairs (the service's keys)."""
    return labels


_FITS: WeakKeyDictionary[ProjectState, Consensus] = WeakKeyDictionary()
"""Per cached project state, the consensus of the project's last full-path event in this
process: the annotators' reliabilities that ``next`` weighs answers by between events."""


def last_fit(state: ProjectState, rows: Sequence[LiveAnswer]) -> Consensus:
    """The consensus of the project's last full-path event in this process; without one,
    the consensus of ``rows`` (the live answers), kept until the next event."""
    fitted = _FITS.get(state)
    if fitted is None:
        fitted = _FITS[state] = consensus(core_answers(rows), state.closure.concepts)
    return fitted


# ---------------------------------------------------------------------------- the change
@dataclass(frozen=True)
class Change:
    """What a full-path event changes besides the consensus.

    ``extra``: the answers the event adds (not stored yet; their ``order`` above every id);
    ``without``: the answer ids it retracts; ``store``: writes the event in the write
    transaction (before the labels follow) and returns the answers it added, stored.
    """

    extra: tuple[Core, ...] = ()
    without: frozenset[int] = frozenset()
    store: Callable[[Session, Project], list[LiveAnswer]] = lambda session, project: []
    pair: tuple[int, int] | None = None  # the pair whose disagreement the answer reports


@dataclass(frozen=True)
class Applied:
    """A stored full-path event: the plan, the new answer, the closure before, the pair's
    disagreement and the pairs that changed."""

    plan: Recomputed
    answers: list[LiveAnswer]
    before: Closure
    disagreement: DisagreementRef | None
    label_ids: dict[tuple[int, int], int]


def recompute(work: ProjectWork, change: Change) -> Applied:
    """Run a full-path event through the unit of work: compute the consensus (no lock
    held), then store the event, the label changes, the answers' outcomes and the
    disagreements in one write transaction."""

    return work.write(lambda work: plan_change(work, change),
                      lambda work, project, plan: store_change(work, project, change, plan))


def plan_change(work: ProjectWork, change: Change) -> Recomputed:
    """The consensus after ``change`` and the label changes it makes (no lock held)."""
    rows = [r for r in live_answers(work.session, work.state.project_id)
            if r.id not in change.without]
    return _plan(work.state, rows, change.extra)


def store_change(work: ProjectWork, project: Project, change: Change,
                 plan: Recomputed) -> Applied:
    """Store ``change`` and its ``plan`` (inside the write transaction); move the cache."""
    before = work.state.closure
    added = change.store(work.session, project)
    _FITS[work.state] = plan.result
    ids = _apply(work, project, plan)
    sync_outcomes(work.session, plan.result, plan.rows + added, work.state)
    states = sync_disagreements(work.session, project.id, plan.result)
    ref = states.get(change.pair) if change.pair is not None else None
    return Applied(plan, added, before, ref, ids)


def live_of(answer: Answer) -> LiveAnswer:
    """A stored answer row as the consensus reads it."""
    return LiveAnswer(answer.id, answer.a_id, answer.b_id, answer.positive, answer.annotator,
                      answer.role == "reviewer", answer.check_question, answer.outcome,
                      answer.label_id)


def _apply(work: ProjectWork, project: Project, plan: Recomputed) -> dict[tuple[int, int], int]:
    """Store the label changes of ``plan`` and move the cached state; the new labels' ids."""
    session, state = work.session, work.state
    if plan.closure is None:
        return {}
    now = utcnow()
    project.version += 1
    if plan.remove:
        project.retraction_version = project.version
        session.execute(update(AssertedLabel).where(AssertedLabel.id.in_(plan.remove)).values(
            retracted_at=now, retracted_version=project.version, caused_by=None)
            .execution_options(synchronize_session=False))
    annotators = _first_annotators(plan)
    ids = insert_labels(session, [(project.id, a, b, value, annotators.get((a, b)), now,
                                   project.version) for (a, b), value in plan.add])
    labels = [(ids[-k - 1] if k < 0 else k, lab) for k, lab in plan.labels]
    since = min([*plan.remove, *ids])
    rewrite(session, project.id, prepare_rewrite(plan.closure, labels, plan.updates, since))
    release(session, state, [pair for pair, _ in plan.add])
    for label_id in plan.remove:
        state.forget_label(label_id)
    state.replace_closure(plan.closure, plan.values)
    new = dict(zip([pair for pair, _ in plan.add], ids, strict=True))
    for (pair, value), label_id in zip(plan.add, ids, strict=True):
        state.remember(pair, LiveLabel(label_id, value, annotators.get(pair), now))
    return new


def _first_annotators(plan: Recomputed) -> dict[tuple[int, int], str | None]:
    """Per new label, the annotator of the first answer that gave its value."""
    wanted = dict(plan.add)
    first: dict[tuple[int, int], str | None] = {}
    given: list[tuple[Any, bool, str | None]] = [
        ((r.a_id, r.b_id), r.positive, r.annotator) for r in plan.rows]
    given += [((e.a, e.b), e.positive, e.annotator) for e in plan.extra]
    for pair, positive, annotator in given:
        if wanted.get(pair) == positive and pair not in first:
            first[pair] = annotator
    return first


# ---------------------------------------------------------------------------- outcomes
def sync_outcomes(session: Session, result: Consensus, rows: Sequence[LiveAnswer],
                  state: ProjectState) -> None:
    """Bring every live answer's outcome and label to the consensus.

    On a disputed pair (or one that gave way) every answer is ``contested``; elsewhere an
    answer that gives the pair's value stands behind its label: ``asserted`` (it created the
    label: the first such answer of a label) or ``agreed``; one against it is ``contested``.
    """
    changes: list[dict[str, Any]] = []
    first: set[int] = set()
    for row in rows:
        pair = (row.a_id, row.b_id)
        live = state.labels.get(pair)
        if pair in result.contested or live is None or live.positive != row.positive:
            target: tuple[str, int | None] = ("contested", None)
        elif live.id not in first and (row.outcome == "asserted" or row.label_id != live.id):
            target = ("asserted", live.id)
        else:
            target = ("agreed", live.id)
        if target[0] == "asserted" and target[1] is not None:
            first.add(target[1])
        if (row.outcome, row.label_id) != target:
            changes.append({"k_id": row.id, "v_outcome": target[0], "v_label": target[1]})
    if changes:
        table = cast(Table, Answer.__table__)
        session.execute(table.update().where(table.c.id == bindparam("k_id")).values(
            outcome=bindparam("v_outcome"), label_id=bindparam("v_label")), changes)


def sync_disagreements(session: Session, project_id: int,
                       result: Consensus) -> dict[tuple[int, int], DisagreementRef]:
    """Open a disagreement for each newly contested pair, close those no longer contested
    (settled by answers); per pair that changed or stays open, its reference."""
    open_rows = {(a, b): k for k, a, b in session.execute(
        select(Disagreement.id, Disagreement.a_id, Disagreement.b_id).where(
            Disagreement.project_id == project_id, Disagreement.closed_at.is_(None)))}
    states: dict[tuple[int, int], DisagreementRef] = {}
    now = utcnow()
    closing = [k for pair, k in open_rows.items() if pair not in result.contested]
    if closing:
        session.execute(update(Disagreement).where(Disagreement.id.in_(closing))
                        .values(closed_at=now).execution_options(synchronize_session=False))
    for pair, k in open_rows.items():
        states[pair] = DisagreementRef(id=k, state="closed" if k in closing else "open")
    contested: dict[tuple[int, int], bool] = _int_pairs(dict.fromkeys(result.contested, True))
    for pair in contested:
        if pair not in open_rows:
            row = Disagreement(project_id=project_id, a_id=pair[0], b_id=pair[1], opened_at=now)
            session.add(row)
            session.flush()
            states[pair] = DisagreementRef(id=row.id, state="opened")
    return states


# ---------------------------------------------------------------------------- what changed
def changed_pairs(state: ProjectState, before: Closure, after: Closure
                  ) -> tuple[list[DecidedPair], list[DecidedPair], int, int]:
    """What changed from ``before`` to ``after`` (same concepts): the pairs newly decided
    (listed up to :data:`MAX_DECIDED_LISTED`), the pairs no longer decided or decided the
    other way (listed with their value before), and the counts of new positives, negatives."""
    name: dict[Any, str] = state.name_of
    concepts = after.concepts
    old_down, _, old_neg, _ = before.reach()
    new_down, _, new_neg, _ = after.reach()
    decided: list[DecidedPair] = []
    undecided: list[DecidedPair] = []
    n_pos = n_neg = 0
    for x in range(len(concepts)):
        gained_pos = new_down[x] & ~old_down[x]
        gained_neg = new_neg[x] & ~old_neg[x]
        n_pos += gained_pos.bit_count()
        n_neg += gained_neg.bit_count()
        for bits, value, out in ((gained_pos, True, decided), (gained_neg, False, decided),
                                 (old_down[x] & ~new_down[x], True, undecided),
                                 (old_neg[x] & ~new_neg[x], False, undecided)):
            if bits and len(out) < MAX_DECIDED_LISTED:
                out += [DecidedPair(a=name[concepts[x]], b=name[concepts[y]],
                                    label=label_value(value))
                        for y in bit_positions(bits)[:MAX_DECIDED_LISTED - len(out)]]
    return decided, undecided, n_pos, n_neg



def adopt_consensus(work: ProjectWork) -> Applied:
    """Switch the project to ``consensus``: the consensus of every live answer becomes the
    asserted labels, in the same write transaction as the policy."""

    def store(session: Session, project: Project) -> list[LiveAnswer]:
        project.policy = "consensus"
        project.version += 1
        return []

    return recompute(work, Change(store=store))
