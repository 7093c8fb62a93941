"""A change of a ``consensus`` project's answers, as a value: planned, then stored by one
function.

Every full-path event (``docs/consensus_service.md``) is a :class:`TeamChange`: the answers it
adds, the answers it retracts, the policy it switches to, the disagreement a reviewer's answer
resolves, the annotators whose answers do not count. :func:`plan_change` computes the
consensus after it with no lock held (:func:`reasoning.consensus.consensus` over the live
answers, a reviewer's answer final for its pair, the answer id as the order), and the label
changes that bring the asserted labels to it; :func:`store_change` writes the change and its
plan in the write transaction: the answers, the labels (labels whose value left the consensus
retracted, new ones asserted, the stored closure replayed from the first label that changed,
as a retraction does: :func:`app.services.labels.store.prepare_rewrite`), every answer's
outcome and the open disagreements (each closed one with its reason: :meth:`TeamChange.reason`).
Every stored change moves the project's version, so a
planner in another process that read the answers before it plans again. The consensus fitted
becomes the state's last fit once the transaction commits
(:meth:`app.services.unit.ProjectWork.stage_team`), and its accuracies are stored with the
project (:func:`mark_settled`) for the processes that do not hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from app.schemas import DisagreementPairRef, DisagreementRef
from app.services.annotators import stamp_retracted
from app.services.labels.store import insert_labels, prepare_rewrite, release, rewrite
from app.services.state import LiveLabel, ProjectState
from app.services.team import (
    LiveAnswer,
    accuracy_record,
    counting,
    excluded_annotators,
    live_answers,
    live_of,
    votes,
    with_fit,
)
from app.services.unit import ProjectWork
from models import Answer, AssertedLabel, CheckQuestion, Disagreement, Project, utcnow
from models.tables import DisagreementResolution
from reasoning.closure import Closure, Label, Update
from reasoning.consensus import Consensus, Vote, consensus

__all__ = [
    "Applied",
    "Fitted",
    "NewAnswer",
    "Recomputed",
    "TeamChange",
    "answer_check",
    "bulk_disagreements",
    "bulk_outcomes",
    "latest_resolution",
    "label_version",
    "mark_excluded",
    "mark_settled",
    "new_labels",
    "plan_change",
    "run_change",
    "store_answers",
    "store_change",
    "sync_outcomes",
]

UNSTORED = 2**62
"""The order of answers not stored yet: after every stored one."""


@dataclass(frozen=True)
class NewAnswer:
    """An answer a change adds (stored ``contested``; its outcome follows the consensus).

    ``check``: the check question it answers (:class:`models.CheckQuestion` id), if any.
    """

    a_id: int
    b_id: int
    positive: bool
    annotator: str | None
    source: str = "api"
    role: str = "annotator"
    check: int | None = None


@dataclass(frozen=True)
class TeamChange:
    """One full-path event of a ``consensus`` project, as data.

    ``add``: the answers it adds; ``retract``: the answer ids it retracts; ``policy``: the
    policy the project switches to; ``resolves``: the disagreement that ``add``'s reviewer
    answer resolves; ``exclude``: the annotators whose answers do not count (None: the
    project's stored exclusions, :func:`app.services.team.excluded_annotators`; an exclude
    or include names the set after it); ``pair``: the pair whose disagreement the response
    reports; ``closes``: why the disagreements its refit closes closed, for a correction of
    the concepts (``merge``, ``deletion``).
    """

    add: tuple[NewAnswer, ...] = ()
    retract: frozenset[int] = frozenset()
    policy: str | None = None
    resolves: int | None = None
    exclude: frozenset[str] | None = None
    pair: tuple[int, int] | None = None
    closes: str | None = None

    def reason(self) -> str:
        """Why the disagreements this change's refit closes closed
        (:data:`models.tables.CLOSED_REASONS`)."""
        if self.closes is not None:
            return self.closes
        if self.resolves is not None:
            return "reviewer"
        if self.exclude is not None and not self.add and not self.retract:
            return "exclusion"  # an annotator excluded or included again
        if self.retract and not self.add:
            return "retraction"
        return "answers"

    def votes(self) -> list[Vote]:
        """The answers added, as the consensus takes them (after every stored answer)."""
        return [Vote(new.a_id, new.b_id, new.positive, new.annotator,
                     reviewer=new.role == "reviewer", check=new.check is not None,
                     order=UNSTORED + k) for k, new in enumerate(self.add)]


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
    extra: tuple[Vote, ...] = ()
    excluded: frozenset[str] = frozenset()  # the annotators whose answers do not count
    left_out: tuple[LiveAnswer, ...] = ()  # their live answers (outcome ``excluded``)


@dataclass(frozen=True)
class Fitted:
    """The consensus of the live answers as read at one project version, computed before
    the project's lock was taken (a refit): valid while the version has not moved."""

    version: int
    live: list[LiveAnswer]
    excluded: frozenset[str]
    result: Consensus


def plan_change(work: ProjectWork, change: TeamChange,
                fitted: Fitted | None = None) -> Recomputed:
    """The consensus after ``change`` and the label changes it makes (no lock held): of
    the live answers that count, the excluded annotators' left out. ``fitted``: the answers
    and their consensus read and computed already at the state's version (a refit, with no
    answer added or retracted)."""
    session, pid = work.session, work.state.project_id
    if fitted is not None:
        excluded, live = fitted.excluded, fitted.live
    else:
        excluded = excluded_annotators(session, pid) if change.exclude is None \
            else change.exclude
        live = [r for r in live_answers(session, pid) if r.id not in change.retract]
    rows = counting(live, excluded)
    kept = {r.id for r in rows}
    extra = [v for v in change.votes() if v.reviewer or v.annotator not in excluded]
    plan = _plan(work.state, rows, extra, None if fitted is None else fitted.result)
    return replace(plan, excluded=excluded,
                   left_out=tuple(r for r in live if r.id not in kept))


def _plan(state: ProjectState, rows: list[LiveAnswer], extra: Sequence[Vote],
          fitted: Consensus | None = None) -> Recomputed:
    """The consensus of ``rows`` (and ``extra``, answers not stored yet; ``fitted`` when
    computed already) and its changes."""
    result = fitted if fitted is not None else consensus([*votes(rows), *extra],
                                                         state.closure.concepts)
    current = state.labels
    decided = cast(dict[tuple[int, int], bool], result.labels)
    remove = sorted(live.id for pair, live in current.items()
                    if decided.get(pair) != live.positive)
    add = sorted((pair, value) for pair, value in decided.items()
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


# ---------------------------------------------------------------------------- the store
@dataclass(frozen=True)
class Applied:
    """A stored full-path event: the plan, the answers it added, the closure before, the
    pair's disagreement, the new labels' ids and every disagreement the refit opened, closed
    or kept open (``changed``)."""

    plan: Recomputed
    answers: list[LiveAnswer]
    before: Closure
    disagreement: DisagreementRef | None
    label_ids: dict[tuple[int, int], int]
    stored_at: datetime
    changed: dict[tuple[int, int], DisagreementRef] = field(default_factory=dict)

    def beside(self, pair: tuple[int, int]) -> tuple[int, int]:
        """How many disagreements on other pairs than ``pair`` (either direction) the refit
        closed and opened."""
        both = {pair, (pair[1], pair[0])}
        states = [ref.state for key, ref in self.changed.items() if key not in both]
        return states.count("closed"), states.count("opened")

    def on_pair(self, pair: tuple[int, int], name: dict[int, str]) -> list[DisagreementPairRef]:
        """The disagreements of ``pair`` and of its reverse that the refit opened, closed or
        kept open."""
        return [DisagreementPairRef(id=ref.id, a=name[key[0]], b=name[key[1]], state=ref.state)
                for key in (pair, (pair[1], pair[0])) if (ref := self.changed.get(key))]


def run_change(work: ProjectWork, change: TeamChange) -> Applied:
    """Run a full-path event through the unit of work: plan it (no lock held), then store
    it in one write transaction."""
    return work.write(lambda work: plan_change(work, change),
                      lambda work, project, plan: store_change(work, project, change, plan))


def store_change(work: ProjectWork, project: Project, change: TeamChange,
                 plan: Recomputed) -> Applied:
    """Store ``change`` and its ``plan`` (inside the write transaction); move the cache."""
    session, state, now = work.session, work.state, utcnow()
    before = state.closure
    added = store_answers(work, project, change.add)
    stamp_retracted(session, change.retract, now)
    if change.policy is not None:
        project.policy = change.policy
    if change.resolves is not None:
        _resolved(session, change.resolves, added[-1].id, now)
    if change.retract:
        _undone(session, project.id, change.retract)
    project.version += 1  # every stored change: a planner that read the answers before replans
    ids = _apply(work, project, plan)
    counted = counting(added, plan.excluded)
    sync_outcomes(session, plan.result, plan.rows + counted, state)
    ids_counted = {r.id for r in counted}
    mark_excluded(session, [*plan.left_out, *(r for r in added if r.id not in ids_counted)])
    states = sync_disagreements(session, project.id, plan.result, change.reason(), now)
    mark_settled(project, plan.result)
    work.stage_team(with_fit(state.team, plan.result, project))
    ref = states.get(change.pair) if change.pair is not None else None
    return Applied(plan, added, before, ref, ids, now, states)


def mark_settled(project: Project, fit: Consensus) -> None:
    """The full consensus ``fit`` of every live answer was stored: it is that of the
    project's version now, its accuracies are kept with that version (for a process holding
    no fit to rebuild it, :func:`app.services.team.last_fit`), and no pair waits for a refit
    any more (``docs/consensus.md``, "Incremental consensus")."""
    project.consensus_as_of = project.version
    project.consensus_accuracy = accuracy_record(fit, project.version)
    project.consensus_pending = None


def store_answers(work: ProjectWork, project: Project,
                   new: tuple[NewAnswer, ...]) -> list[LiveAnswer]:
    """Store the answers ``new`` (``contested`` until their outcomes follow the consensus),
    mark the check questions they answer, release the leases on their pairs."""
    if not new:
        return []
    session, now = work.session, utcnow()
    rows = [Answer(project_id=project.id, a_id=n.a_id, b_id=n.b_id, positive=n.positive,
                   annotator=n.annotator, role=n.role, source=n.source, outcome="contested",
                   check_question=n.check is not None, created_at=now) for n in new]
    session.add_all(rows)
    session.flush()
    for answer, item in zip(rows, new, strict=True):
        answer_check(session, item.check, answer.id)
    release(work.session, work.state, [(n.a_id, n.b_id) for n in new])
    return [live_of(row) for row in rows]


def answer_check(session: Session, check: int | None, answer_id: int) -> None:
    """Mark the check question ``check`` (if any) answered by ``answer_id``."""
    if check is not None:
        session.execute(update(CheckQuestion).where(CheckQuestion.id == check)
                        .values(answer_id=answer_id))


def _resolved(session: Session, disagreement_id: int, answer_id: int, now: datetime) -> None:
    """Close the disagreement a reviewer's answer resolves (if still open: reason
    ``reviewer``), keep the resolution and make it the latest."""
    session.execute(update(Disagreement).where(
        Disagreement.id == disagreement_id, Disagreement.closed_at.is_(None))
        .values(closed_at=now, closed_reason="reviewer")
        .execution_options(synchronize_session=False))
    session.execute(update(Disagreement).where(Disagreement.id == disagreement_id)
                    .values(resolution_id=answer_id, reopened_at=None)
                    .execution_options(synchronize_session=False))
    session.add(DisagreementResolution(disagreement_id=disagreement_id, answer_id=answer_id))


def latest_resolution(session: Session, disagreement_id: int) -> int | None:
    """The reviewer's answer of the disagreement's latest live resolution (None: none)."""
    return session.scalar(
        select(DisagreementResolution.answer_id)
        .join(Answer, Answer.id == DisagreementResolution.answer_id)
        .where(DisagreementResolution.disagreement_id == disagreement_id,
               Answer.retracted_at.is_(None))
        .order_by(DisagreementResolution.id.desc()).limit(1))


def _undone(session: Session, project_id: int, retracted: frozenset[int]) -> None:
    """Resolutions undone by the retraction of their answers (stamped already): each
    disagreement whose latest resolution went names its previous live one; one that a
    resolution had closed and that none stands for any more opens again, unless another is
    open on its pair, for the refit to decide (it closes again, reason ``retraction``, when
    the pair is no longer contested)."""
    rows = session.execute(select(Disagreement.id, Disagreement.a_id, Disagreement.b_id,
                                  Disagreement.closed_reason).where(
        Disagreement.project_id == project_id,
        Disagreement.resolution_id.in_(sorted(retracted)))).all()
    for k, a, b, reason in rows:
        values: dict[str, Any] = {"resolution_id": latest_resolution(session, k)}
        busy = session.scalar(select(Disagreement.id).where(
            Disagreement.project_id == project_id, Disagreement.a_id == a,
            Disagreement.b_id == b, Disagreement.closed_at.is_(None)).limit(1))
        if reason == "reviewer" and busy is None and values["resolution_id"] is None:
            values.update(closed_at=None, closed_reason=None)
        session.execute(update(Disagreement).where(Disagreement.id == k).values(**values)
                        .execution_options(synchronize_session=False))


def label_version(session: Session, project: Project, remove: Sequence[int],
                  now: datetime) -> None:
    """The project's version for a refit's label changes, and the labels ``remove``
    retracted at it (their causes cleared: the closure is rewritten from them)."""
    project.version += 1
    if remove:
        project.retraction_version = project.version
        session.execute(update(AssertedLabel).where(AssertedLabel.id.in_(remove)).values(
            retracted_at=now, retracted_version=project.version, caused_by=None)
            .execution_options(synchronize_session=False))


def _apply(work: ProjectWork, project: Project, plan: Recomputed) -> dict[tuple[int, int], int]:
    """Store the label changes of ``plan`` and move the cached state; the new labels' ids."""
    session, state = work.session, work.state
    if plan.closure is None:
        return {}
    now = utcnow()
    label_version(session, project, plan.remove, now)
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


def new_labels(plan: Recomputed) -> list[tuple[tuple[int, int], bool, str | None]]:
    """The labels ``plan`` asserts, in the order they get ids, each with the annotator of
    the first answer that gave its value (as :func:`store_change` stores them)."""
    annotators = _first_annotators(plan)
    return [(pair, value, annotators.get(pair)) for pair, value in plan.add]


# ---------------------------------------------------------------------------- outcomes
def sync_outcomes(session: Session, result: Consensus, rows: Sequence[LiveAnswer],
                  state: ProjectState) -> None:
    """Bring every live answer's outcome and label to the consensus.

    On a disputed pair (or one that gave way) every answer is ``contested``; elsewhere an
    answer that gives the pair's value stands behind its label: ``asserted`` (it created the
    label: the first such answer of a label) or ``agreed``; one against it is ``contested``.
    """
    labels = {pair: (live.id, live.positive) for pair, live in state.labels.items()}
    changes = [{"k_id": row.id, "v_outcome": target[0], "v_label": target[1]}
               for row, target in zip(rows, bulk_outcomes(result, rows, labels), strict=True)
               if (row.outcome, row.label_id) != target]
    if changes:
        table = cast(Table, Answer.__table__)
        session.execute(table.update().where(table.c.id == bindparam("k_id")).values(
            outcome=bindparam("v_outcome"), label_id=bindparam("v_label")), changes)


def mark_excluded(session: Session, rows: Sequence[LiveAnswer]) -> None:
    """Mark the answers ``rows`` of excluded annotators ``excluded``: kept, not counted,
    standing behind no label (an include brings them back to the consensus)."""
    ids = [r.id for r in rows if (r.outcome, r.label_id) != ("excluded", None)]
    if ids:
        session.execute(update(Answer).where(Answer.id.in_(ids))
                        .values(outcome="excluded", label_id=None)
                        .execution_options(synchronize_session=False))


def _close_settled(session: Session, project_id: int, contested: Container[Any],
                   reason: str, now: datetime) -> tuple[dict[tuple[int, int], int], list[int]]:
    """The project's open disagreements (pair → id), and those of them closed here (with
    ``reason``, at ``now``): every one whose pair is no longer ``contested``, except those a
    reviewer reopened (only a resolution closes them)."""
    held: set[int] = set()
    open_rows: dict[tuple[int, int], int] = {}
    for k, a, b, reopened in session.execute(
            select(Disagreement.id, Disagreement.a_id, Disagreement.b_id,
                   Disagreement.reopened_at).where(
                Disagreement.project_id == project_id, Disagreement.closed_at.is_(None))):
        open_rows[(a, b)] = k
        if reopened is not None:
            held.add(k)
    closing = [k for pair, k in open_rows.items() if pair not in contested and k not in held]
    if closing:
        session.execute(update(Disagreement).where(Disagreement.id.in_(closing))
                        .values(closed_at=now, closed_reason=reason)
                        .execution_options(synchronize_session=False))
    return open_rows, closing


def sync_disagreements(session: Session, project_id: int, result: Consensus,
                       reason: str = "answers", now: datetime | None = None
                       ) -> dict[tuple[int, int], DisagreementRef]:
    """Open a disagreement for each newly contested pair, close (with ``reason``, at ``now``:
    the change's time) those no longer contested, except those a reviewer reopened (only a
    resolution closes them); per pair that changed or stays open, its reference."""
    now = now or utcnow()
    open_rows, closing = _close_settled(session, project_id, result.contested, reason, now)
    states: dict[tuple[int, int], DisagreementRef] = {}
    for pair, k in open_rows.items():
        states[pair] = DisagreementRef(id=k, state="closed" if k in closing else "open")
    for pair in cast(dict[tuple[int, int], Any], result.contested):
        if pair not in open_rows:
            row = Disagreement(project_id=project_id, a_id=pair[0], b_id=pair[1], opened_at=now)
            session.add(row)
            session.flush()
            states[pair] = DisagreementRef(id=row.id, state="opened")
    return states


# ---------------------------------------------------------------------------- in bulk
def bulk_outcomes(result: Consensus, rows: Sequence[LiveAnswer],
                  labels: Mapping[tuple[int, int], tuple[int, bool]]
                  ) -> list[tuple[str, int | None]]:
    """Per answer of ``rows``, its outcome and label once the live labels are ``labels``
    (pair → ``(label id, value)``; a label not stored yet under a stand-in id): what
    :func:`sync_outcomes` writes, and what a bulk computes before its write transaction."""
    targets: list[tuple[str, int | None]] = []
    first: set[int] = set()
    for row in rows:
        pair = (row.a_id, row.b_id)
        live = labels.get(pair)
        if pair in result.contested or live is None or live[1] != row.positive:
            target: tuple[str, int | None] = ("contested", None)
        elif live[0] not in first and (row.outcome == "asserted" or row.label_id != live[0]):
            target = ("asserted", live[0])
            first.add(live[0])
        else:
            target = ("agreed", live[0])
        targets.append(target)
    return targets


def bulk_disagreements(session: Session, project_id: int, result: Consensus, reason: str,
                       now: datetime, key: Callable[[Any], int] = int) -> None:
    """:func:`sync_disagreements` for a bulk: the disagreements it opens inserted at once
    (no flush per row); ``key`` maps the consensus's concepts to concept ids."""
    contested = [(key(a), key(b)) for a, b in cast(dict[tuple[Any, Any], Any], result.contested)]
    open_rows, _ = _close_settled(session, project_id, set(contested), reason, now)
    opening = [{"project_id": project_id, "a_id": a, "b_id": b, "opened_at": now}
               for a, b in contested if (a, b) not in open_rows]
    if opening:
        session.execute(insert(Disagreement), opening)
