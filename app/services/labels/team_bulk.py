"""A team's bulk of answers: planned and computed with no lock held, switched in by one short
write.

``POST labels/bulk`` into a ``consensus`` project and a consensus import's labels keep every
label as an answer and run one full path for them all (a
:class:`~app.services.labels.change.TeamChange` that adds answers and nothing else). Stored
the way a single answer's full path is (:func:`~app.services.labels.change.store_change`:
an ORM row and a flush per answer, an outcome update per answer, a flush per disagreement
opened), 50,000 answers held the database's write lock for seconds while every other
project's writes waited. Here:

1. :func:`prepare` plans the change (:func:`~app.services.labels.change.plan_change`) and
   computes everything the write stores, with no lock held: each new answer's row with its
   final outcome and the label it stands behind
   (:func:`~app.services.labels.change.bulk_outcomes`), the stored answers whose outcome
   moves, the new labels and the stored closure's lines and causes, encoded. A label not
   stored yet is named by a stand-in id (``-k-1``, as in the plan), a concept an import adds
   by a provisional one (:func:`provisional`);
2. :func:`switch` writes it all in one write transaction, with the driver's executemany and
   no ORM object: the labels (whose ids replace the stand-ins), the closure's lines, the
   answers, the outcomes that moved, the disagreements opened and closed
   (:func:`~app.services.labels.change.bulk_disagreements`) and the version. Readers see the
   project as it was until the switch commits and all of the bulk after it; a failure or a
   crash before the commit leaves nothing behind (nothing was written before the switch,
   so nothing is left for :func:`app.services.staging.sweep`).

:func:`post_team_bulk` runs both through :meth:`~app.services.unit.ProjectWork.write`, with
its idempotency hook. A write of another process that moves the project's version between
the plan and the switch makes the bulk plan again (under the lock, as any overtaken write):
the other write's answers are in the new plan, nothing is lost. In one process the project's
lock keeps a concurrent answer to the same project waiting until the bulk committed; it is
then planned on the bulk's answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam
from sqlalchemy.orm import Session

from app.schemas import BulkLabelsCreated, LabelIn, LabelRef, NewlyDecided, label_value
from app.services.labels.change import (
    UNSTORED,
    NewAnswer,
    Recomputed,
    TeamChange,
    bulk_disagreements,
    bulk_outcomes,
    label_version,
    mark_excluded,
    mark_settled,
    new_labels,
    plan_change,
)
from app.services.labels.shared import ClosureDiff, Written, closure_diff
from app.services.labels.store import (
    Encoded,
    Rewrite,
    causes_in,
    encode_update,
    insert_labels,
    release,
    rewrite,
)
from app.services.state import LiveLabel, ProjectState
from app.services.team import LiveAnswer, counting, with_fit
from app.services.unit import ProjectWork
from models import Answer, Project, utcnow
from reasoning.closure import Closure

__all__ = ["PROVISIONAL", "BulkStored", "TeamBulk", "post_team_bulk", "prepare",
           "provisional", "switch"]

PROVISIONAL = 1 << 40
"""The provisional id of the first concept an import adds (the next ones follow): above every
stored id, in the order the concepts will be stored, so that a plan made on provisional ids
orders its labels as it would on the stored ones."""

_answers = cast(Table, Answer.__table__)
_ANSWER_COLUMNS = ("project_id", "a_id", "b_id", "positive", "annotator", "role", "source",
                   "outcome", "label_id", "check_question", "created_at")

Row = tuple[Any, ...]
"""A new answer as :func:`prepare` computes it: ``(a_id, b_id, positive, annotator, role,
source, outcome, label id or stand-in, check_question)``."""


@dataclass(frozen=True)
class TeamBulk:
    """A bulk's change, planned and computed before its write (module docstring).

    ``after``: each pair's live label once switched in (its id, or a stand-in);
    ``answers``: a :data:`Row` per new answer, in order; ``outcomes``: ``(answer id,
    outcome, label)`` of the stored answers whose outcome or label moves; ``labels``: the
    new labels ``(pair, value, annotator)`` in the order they get ids; ``lines`` and
    ``causes``: the stored closure the switch writes, by label id (stand-ins for new
    labels), from the first label that changed on.
    """

    change: TeamChange
    plan: Recomputed
    after: dict[tuple[int, int], int]
    answers: list[Row]
    outcomes: list[tuple[int, str, int | None]]
    labels: list[tuple[tuple[int, int], bool, str | None]]
    lines: list[tuple[int, list[Encoded]]]
    causes: dict[int, int]


@dataclass(frozen=True)
class BulkStored:
    """A switched-in bulk: its plan, the closure before it and the new labels' ids."""

    plan: Recomputed
    before: Closure
    label_ids: list[int]


# ---------------------------------------------------------------------------- no lock held
def prepare(work: ProjectWork, change: TeamChange) -> TeamBulk:
    """Plan ``change`` (answers added, nothing else) and compute every row it writes."""
    assert not (change.retract or change.resolves or change.policy) and all(
        new.check is None for new in change.add), "a bulk only adds answers"
    plan = plan_change(work, change)
    gone = set(plan.remove)
    labels = {pair: (live.id, live.positive) for pair, live in work.state.labels.items()
              if live.id not in gone}
    labels.update({pair: (-k - 1, value) for k, (pair, value) in enumerate(plan.add)})
    new = [LiveAnswer(UNSTORED + k, n.a_id, n.b_id, n.positive, n.annotator,
                      n.role == "reviewer", False, "contested", None)
           for k, n in enumerate(change.add)]
    counted = counting(new, plan.excluded)
    targets = bulk_outcomes(plan.result, [*plan.rows, *counted], labels)
    stored, given = targets[:len(plan.rows)], targets[len(plan.rows):]
    by_answer = {row.id: target for row, target in zip(counted, given, strict=True)}
    answers = [(n.a_id, n.b_id, n.positive, n.annotator, n.role, n.source,
                *by_answer.get(UNSTORED + k, ("excluded", None)), False)
               for k, n in enumerate(change.add)]
    moved = [(row.id, *target) for row, target in zip(plan.rows, stored, strict=True)
             if (row.outcome, row.label_id) != target]
    lines, causes = _encoded(plan)
    return TeamBulk(change, plan, {pair: ref for pair, (ref, _) in labels.items()}, answers,
                    moved, new_labels(plan), lines, causes)


def _encoded(plan: Recomputed) -> tuple[list[tuple[int, list[Encoded]]], dict[int, int]]:
    """The closure's lines and causes the switch stores: the new labels', and after a
    retraction those of every label from the first one retracted on (the replay before it
    is what it was)."""
    if plan.closure is None:
        return [], {}
    cut = min(plan.remove, default=None)

    def kept(label_id: int) -> bool:
        return label_id < 0 or (cut is not None and label_id >= cut)

    concepts = plan.closure.concepts
    lines = [(label_id, encode_update(update_, concepts))
             for (label_id, _), update_ in zip(plan.labels, plan.updates, strict=True)
             if kept(label_id)]
    causes = causes_in(plan.labels, plan.updates, plan.closure)
    return lines, {k: v for k, v in causes.items() if kept(k)}


def provisional(work: ProjectWork, names: Sequence[str]) -> ProjectWork:
    """``work`` as it will be once the concepts ``names`` are stored, to plan an import's
    labels before its switch: a copy of the state (the cache is untouched) with ``names``
    added under provisional ids (:data:`PROVISIONAL` on) and no pool."""
    state = work.state
    scratch = ProjectState(state.project_id)
    scratch.replace_closure(state.closure.copy())
    scratch.labels = dict(state.labels)
    scratch.id_of, scratch.name_of = dict(state.id_of), dict(state.name_of)
    for k, name in enumerate(names):
        scratch.add_concept(PROVISIONAL + k, name)
    return replace(work, state=scratch)


# ---------------------------------------------------------------------------- the switch
def switch(work: ProjectWork, project: Project, bulk: TeamBulk,
           concepts: Mapping[int, int] | None = None) -> BulkStored:
    """Write ``bulk`` inside the write transaction and move the cache.

    ``concepts`` maps provisional concept ids to the stored ones (an import's new concepts,
    stored in this transaction); the cache then stays as it was, for the caller to rebuild
    once the transaction committed.
    """
    session, state, now = work.session, work.state, utcnow()
    key: Callable[[Any], Any] = (lambda c: concepts.get(c, c)) if concepts else _same
    before = state.closure
    project.version += 1  # every stored change: a planner that read the answers before replans
    ids = _switch_labels(work, project, bulk, now, key, moves=not concepts)

    def label(ref: int | None) -> int | None:
        return ids[-ref - 1] if ref is not None and ref < 0 else ref

    _insert_answers(session, project.id, bulk, ids, key, now)
    if bulk.outcomes:
        session.execute(_answers.update().where(_answers.c.id == bindparam("k_id")).values(
            outcome=bindparam("v_outcome"), label_id=bindparam("v_label")),
            [{"k_id": k, "v_outcome": outcome, "v_label": label(ref)}
             for k, outcome, ref in bulk.outcomes])
    mark_excluded(session, bulk.plan.left_out)
    release(session, state, [(key(row[0]), key(row[1])) for row in bulk.answers])
    bulk_disagreements(session, project.id, bulk.plan.result, bulk.change.reason(), now, key)
    mark_settled(project, bulk.plan.result)  # a full consensus of every live answer
    if not concepts:
        work.stage_team(with_fit(state.team, bulk.plan.result, project))
    return BulkStored(bulk.plan, before, ids)


def _switch_labels(work: ProjectWork, project: Project, bulk: TeamBulk, now: datetime,
                   key: Callable[[Any], Any], *, moves: bool) -> list[int]:
    """Store the plan's label changes and the closure's lines (as
    :func:`app.services.labels.change.store_change` does); the new labels' ids. With
    ``moves``, the cached state follows."""
    session, state, plan = work.session, work.state, bulk.plan
    if plan.closure is None:
        return []
    label_version(session, project, plan.remove, now)
    added = bulk.labels
    ids = insert_labels(session, [(project.id, key(a), key(b), value, who, now, project.version)
                                  for (a, b), value, who in added])

    def label(ref: int) -> int:
        return ids[-ref - 1] if ref < 0 else ref

    lines = [(label(k), [(p, by_row, key(line), bits, n) for p, by_row, line, bits, n in enc]
              if not moves else enc) for k, enc in bulk.lines]
    causes = {label(k): label(v) for k, v in bulk.causes.items()}
    rewrite(session, project.id, Rewrite(lines, causes, min([*plan.remove, *ids])))
    release(session, state, [(key(a), key(b)) for (a, b), _, _ in added])
    if moves:
        for label_id in plan.remove:
            state.forget_label(label_id)
        state.replace_closure(plan.closure, plan.values)
        for (pair, value, who), label_id in zip(added, ids, strict=True):
            state.remember(pair, LiveLabel(label_id, value, who, now))
    return ids


def _same(concept: Any) -> Any:
    return concept


def _insert_answers(session: Session, project_id: int, bulk: TeamBulk, ids: list[int],
                    key: Callable[[Any], Any], now: datetime) -> None:
    """Insert the new answers with the driver's executemany, all at the time ``now``
    (through the column type's own processing, once): the new labels' ids for their
    stand-ins, the stored ids of provisional concepts."""
    if not bulk.answers:
        return
    connection = session.connection()
    stamp = _answers.c.created_at.type._cached_bind_processor(connection.dialect)
    at = stamp(now) if stamp is not None else now
    rows = [(project_id, key(a), key(b), positive, who, role, source, outcome,
             ids[-ref - 1] if ref is not None and ref < 0 else ref, check, at)
            for a, b, positive, who, role, source, outcome, ref, check in bulk.answers]
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    connection.exec_driver_sql(
        f"INSERT INTO answers ({', '.join(_ANSWER_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(_ANSWER_COLUMNS))})", rows)


# ---------------------------------------------------------------------------- a bulk post
@dataclass(frozen=True)
class _Answered:
    """A bulk post planned, and its answer built before the switch: ``pending`` are the
    references to new labels, each with its stand-in, whose ids the switch gives."""

    bulk: TeamBulk
    answer: BulkLabelsCreated
    pending: list[tuple[LabelRef, int]]

    def filled(self, ids: list[int]) -> BulkLabelsCreated:
        for ref, stand_in in self.pending:
            ref.id = ids[-stand_in - 1]
        return self.answer


def _answered(work: ProjectWork, labels: Sequence[LabelIn], pairs: Sequence[tuple[int, int]],
              change: TeamChange) -> _Answered:
    """Plan a bulk post and build its answer, with no lock held."""
    state = work.state
    bulk = prepare(work, change)
    plan, name = bulk.plan, state.name_of
    diff = (ClosureDiff() if plan.closure is None
            else closure_diff(state, state.closure, plan.closure))
    refs, pending = [], []
    for item, pair in zip(labels, pairs, strict=True):
        stand_in = bulk.after.get(pair)
        ref = LabelRef(id=stand_in if stand_in is None or stand_in >= 0 else None,
                       a=name[pair[0]], b=name[pair[1]], label=label_value(item.positive))
        refs.append(ref)
        if stand_in is not None and stand_in < 0:
            pending.append((ref, stand_in))
    unchanged = sum(1 for item, pair in zip(labels, pairs, strict=True)
                    if (live := state.labels.get(pair)) is not None
                    and live.positive == item.positive)
    return _Answered(bulk, BulkLabelsCreated(
        created=len(plan.add), unchanged=unchanged,
        newly_decided=NewlyDecided(positive=diff.n_positive, negative=diff.n_negative),
        labels=refs), pending)


def post_team_bulk(work: ProjectWork, labels: Sequence[LabelIn],
                   pairs: Sequence[tuple[int, int]], source: str
                   ) -> Written[BulkLabelsCreated]:
    """Keep every label of a bulk post (its concepts' ids ``pairs``) as an answer: planned,
    computed and answered with no lock held, then switched in (module docstring). The answer
    is the write's result, so that an ``Idempotency-Key`` keeps it with the write."""
    change = TeamChange(add=tuple(NewAnswer(a, b, item.positive, item.annotator,
                                            item.source or source)
                                  for item, (a, b) in zip(labels, pairs, strict=True)))

    def store(work: ProjectWork, project: Project,
              planned: _Answered) -> Written[BulkLabelsCreated]:
        return Written(planned.filled(switch(work, project, planned.bulk).label_ids))

    return work.write(lambda work: _answered(work, labels, pairs, change), store)
