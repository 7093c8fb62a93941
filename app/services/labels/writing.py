"""Asserting labels, one or in bulk: computed on the cached closure, then written at once.

Each label is applied to the project's closure first (no database lock held), then written
together with the lines of pairs it newly decides (:mod:`app.services.labels.store`) in one
short write transaction (:meth:`app.services.unit.ProjectWork.write`): a crash leaves all of
it or none.

A write answers :class:`Written` (the label created, or found asserted the same way already)
or :class:`Refused` (a contradiction, with its proof): a refusal is a *result*, committed by
the unit of work like any other (a refused single label is kept for the annotators' counts),
whether or not the request carries an ``Idempotency-Key``; the route answers it 409 and, under
a key, stores it with the key (:meth:`app.services.unit.ProjectWork.idempotent`). Refusals
before execution (unknown concepts, a self pair, the budget) are raised as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update

from app.errors import BudgetExceeded, BulkContradiction
from app.schemas import (
    BulkLabels,
    BulkLabelsCreated,
    LabelCreated,
    LabelIn,
    LabelRef,
    NewlyDecided,
    label_value,
)
from app.services.annotators import (
    record_answer,
    record_label_answers,
    record_refusal,
    standing,
    stands_behind,
)
from app.services.labels.answering import post_answer, post_bulk_answers
from app.services.labels.asserting import (
    Planned,
    created,
    resolve_bulk,
    store_label,
    within_budget,
)
from app.services.labels.proofs import check_pair, contradiction, proof_chains, proof_refs
from app.services.labels.results import Refused, Written
from app.services.labels.store import (
    Encoded,
    cause_in_store,
    causes_in,
    encode_update,
    insert_labels,
    release,
    set_causes,
    write_encoded,
)
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import AssertedLabel, Project, utcnow
from reasoning.closure import Closure, ContradictionError, Label, Update

__all__ = ["CANONICAL_MIN", "Refused", "Written", "post_bulk", "post_label", "within_budget"]


# ---------------------------------------------------------------------------- one label
@dataclass(frozen=True)
class _Found:
    live: LiveLabel  # the label, asserted the same way already


def post_label(work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
    """Apply one label by the project's policy: ``strict`` (:func:`post_strict`) or
    ``consensus`` (:func:`app.services.labels.answering.post_answer`, never refused)."""
    if work.project.policy == "consensus":
        return post_answer(work, body)
    return post_strict(work, body)


def post_strict(work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
    """Apply one label: created, or found already asserted the same way, or refused.

    Raises :class:`UnknownConcepts`, :class:`InvalidLabel` or :class:`BudgetExceeded` before
    anything changes. A contradiction (with the proof of the opposite label) is returned as
    :class:`Refused`, and the refused answer is kept for the annotators' counts.
    """
    positive = body.positive

    def compute(work: ProjectWork) -> Planned | _Found | Refused:
        state = work.state
        a_id, b_id = check_pair(state, body.a, body.b)
        live = state.labels.get((a_id, b_id))
        if live is not None and live.positive == positive:
            return _Found(live)
        was_decided = state.closure.status(a_id, b_id).value is not None
        within_budget(work, state.closure, a_id, b_id, positive, "this label")
        try:
            update = state.add_label(a_id, b_id, positive)
        except ContradictionError as exc:
            return Refused(contradiction(state, body.a, body.b, positive, exc))
        return Planned(a_id, b_id, update, was_decided)

    def store(work: ProjectWork, project: Project,
              plan: Planned | _Found | Refused) -> Written[LabelCreated] | Refused:
        state = work.state
        if isinstance(plan, _Found):
            return _found(work, project, body, plan.live)
        if isinstance(plan, Refused):
            record_refusal(work.session, project.id, state.id_of[body.a], state.id_of[body.b],
                           positive, body.annotator, body.source or "api")
            return plan
        live = store_label(work, project, body, plan)
        answer = record_answer(work.session, project.id, plan.a_id, plan.b_id, positive,
                               body.annotator, outcome="asserted", source=body.source or "api",
                               label_id=live.id)
        return Written(created(state, body.a, body.b, positive, live, plan.update, answer.id,
                                body.annotator))

    return work.write(compute, store)


def _found(work: ProjectWork, project: Project, body: LabelIn,
           live: LiveLabel) -> Written[LabelCreated]:
    """A label asserted the same way already: the same annotator repeating it gives no new
    answer (200); another annotator's agreeing answer is kept (201)."""
    state = work.state
    if live.annotator == body.annotator or stands_behind(work.session, live.id, body.annotator):
        return Written(created(state, body.a, body.b, body.positive, live, None),
                       created=False)
    answer = record_answer(work.session, project.id, state.id_of[body.a], state.id_of[body.b],
                           body.positive, body.annotator, outcome="agreed",
                           source=body.source or "api", label_id=live.id)
    return Written(created(state, body.a, body.b, body.positive, live, None, answer.id,
                            body.annotator))


# ---------------------------------------------------------------------------- bulk import
@dataclass(frozen=True)
class _BulkItem:
    index: int
    a_id: int
    b_id: int
    positive: bool
    annotator: str | None
    update: Update | None  # None: already asserted the same way (unchanged)
    was_decided: bool


@dataclass(frozen=True)
class _StoreInputs:
    """What the write of a bulk plan needs, computed before the write lock is taken.

    Per new label (in the order stored): its encoded lines; the position of the new label
    whose lines decided its pair (absent: a stored label did); the pool's values after.
    """

    lines: list[list[Encoded]]
    causes: dict[int, int]
    values: Any


@dataclass(frozen=True)
class _BulkPlan:
    closure: Closure
    items: list[_BulkItem]
    inputs: _StoreInputs | None = None


def _with_store_inputs(state: ProjectState, plan: _BulkPlan) -> _BulkPlan:
    """``plan`` with its :class:`_StoreInputs` computed (no lock held)."""
    new = [item for item in plan.items if item.update is not None]
    updates = [item.update for item in new if item.update is not None]
    concepts = plan.closure.concepts
    causes = causes_in([(k, Label(i.a_id, i.b_id, i.positive)) for k, i in enumerate(new)],
                       updates, plan.closure, missing_ok=True)
    return _BulkPlan(plan.closure, plan.items, _StoreInputs(
        [encode_update(u, concepts) for u in updates], causes,
        state.values_under(plan.closure)))


CANONICAL_MIN = 200
"""An import of at least this many labels into a project without labels is applied in the
canonical order (:meth:`reasoning.closure.Closure.canonical_order`): closed at once, each label
deciding one row and one column, so a chain of 20,000 concepts takes seconds. Below it, the
labels are replayed in the order given, which costs little; above, replaying a long chain
label by label costs its pairs (a 900-chain: 70 ms of one thread, long enough to show in
other projects' latency)."""


def _canonical(work: ProjectWork, state: ProjectState, labels: list[LabelIn],
               pairs: list[tuple[int, int]]) -> _BulkPlan | None:
    """The import applied in the canonical order, or None (a contradiction: replay instead).

    The labels' ids then follow that order (the order :attr:`caused_by` is replayed in).
    """
    if state.labels or len(labels) < CANONICAL_MIN:
        return None
    items = [Label(a, b, item.positive) for item, (a, b) in zip(labels, pairs, strict=True)]
    found = Closure.canonical_order(items)
    if found is None:
        return None
    order, n_positive = found
    limit = work.limits.decided_pairs
    if len(state.closure) + 2 * n_positive > limit:  # its negative mirror at least as large
        raise BudgetExceeded("decided_pairs", limit, len(state.closure) + 2 * n_positive,
                             "the import")
    try:
        closure, updates = Closure.replay_effects([items[k] for k in order],
                                                  state.closure.concepts)
    except ContradictionError:
        return None
    if len(closure) > limit:
        raise BudgetExceeded("decided_pairs", limit, len(closure), "the import")
    plan: list[_BulkItem] = []
    for k, applied in zip(order, updates, strict=True):
        a_id, b_id = pairs[k]
        plan.append(_BulkItem(k, a_id, b_id, items[k].positive, labels[k].annotator,
                              applied if applied.recorded else None,
                              applied.recorded and not applied.own_new))
    return _BulkPlan(closure, plan)


def post_bulk(work: ProjectWork, body: BulkLabels,
              source: str = "bulk") -> Written[BulkLabelsCreated] | Refused:
    """Import many labels in one transaction: all applied, or none and every contradiction.

    Labels are applied in the order given, to a copy of the closure; each contradiction (with
    the stored labels or with an earlier label of the import) is listed with its proof, and
    nothing is stored then (:class:`Refused`). A large import into a project without labels
    is applied in the canonical order instead (:data:`CANONICAL_MIN`). In ``consensus``
    every label is an answer and nothing is refused
    (:func:`app.services.labels.answering.post_bulk_answers`).
    """
    if work.project.policy == "consensus":
        return post_bulk_answers(work, body, source)

    def compute(work: ProjectWork) -> _BulkPlan | Refused:
        state = work.state
        pairs = resolve_bulk(state, body.labels)
        plan = _canonical(work, state, body.labels, pairs) or _in_order(work, body.labels, pairs)
        return plan if isinstance(plan, Refused) else _with_store_inputs(state, plan)

    def store(work: ProjectWork, project: Project,
              plan: _BulkPlan | Refused) -> Written[BulkLabelsCreated] | Refused:
        if isinstance(plan, Refused):
            return plan
        ids = _store_bulk(work, project, plan, source)
        return Written(_bulkcreated(work.state, plan, ids))

    return work.write(compute, store)


def _in_order(work: ProjectWork, labels: list[LabelIn],
              pairs: list[tuple[int, int]]) -> _BulkPlan | Refused:
    """The import applied in the order given, to a copy of the closure; or every
    contradiction with its proof."""
    state = work.state
    closure = state.closure.copy()
    pending: dict[tuple[int, int], int] = {}
    items: list[_BulkItem] = []
    contradictions: list[dict[str, Any]] = []
    for index, (item, (a_id, b_id)) in enumerate(zip(labels, pairs, strict=True)):
        status = closure.status(a_id, b_id)
        if status.asserted and status.value == item.positive:
            items.append(_BulkItem(index, a_id, b_id, item.positive, item.annotator,
                                   None, True))
            continue
        within_budget(work, closure, a_id, b_id, item.positive,
                      f"label {index} of the import")
        try:
            update = closure.add_label(a_id, b_id, item.positive)
        except ContradictionError as exc:
            contradictions.append({
                "index": index, "a": item.a, "b": item.b, "label": item.label,
                "proof": proof_refs(state, exc.proof, pending),
                "chains": proof_chains(state, exc.proof),
            })
            continue
        pending[(a_id, b_id)] = index
        items.append(_BulkItem(index, a_id, b_id, item.positive, item.annotator, update,
                               status.value is not None))
    if contradictions:
        return Refused(BulkContradiction(
            f"{len(contradictions)} label(s) contradict the others; nothing was stored",
            contradictions=contradictions))
    return _BulkPlan(closure, items)


def _bulkcreated(state: ProjectState, plan: _BulkPlan,
                  ids: dict[int, int]) -> BulkLabelsCreated:
    """The answer of a stored bulk import (``ids``: the new label id of each item index)."""
    new = [item for item in plan.items if item.update is not None]
    name = state.name_of
    listed = sorted(plan.items, key=lambda i: i.index)
    return BulkLabelsCreated(
        created=len(new), unchanged=len(plan.items) - len(new),
        newly_decided=NewlyDecided(
            positive=sum(i.update.n_positive for i in new if i.update),
            negative=sum(i.update.n_negative for i in new if i.update)),
        labels=[LabelRef(id=ids.get(i.index) or state.labels[(i.a_id, i.b_id)].id,
                         a=name[i.a_id], b=name[i.b_id], label=label_value(i.positive))
                for i in listed],
    )


def _store_agreeing(work: ProjectWork, project: Project, plan: _BulkPlan, source: str) -> None:
    """Keep the answers of other annotators that agree with a label asserted already (one
    query for who stands behind which label, whatever the import's length)."""
    state = work.state
    agreeing = [(item, live) for item in plan.items if item.update is None
                and (live := state.labels.get((item.a_id, item.b_id))) is not None
                and live.annotator != item.annotator]
    behind = standing(work.session, {live.id for _, live in agreeing})
    for item, live in agreeing:
        if (live.id, item.annotator) not in behind:
            behind.add((live.id, item.annotator))  # a repeat within the import: one answer
            record_answer(work.session, project.id, item.a_id, item.b_id, item.positive,
                          item.annotator, outcome="agreed", source=source, label_id=live.id)


def _store_bulk(work: ProjectWork, project: Project, plan: _BulkPlan,
                source: str) -> dict[int, int]:
    """Store the new labels, their answers and effects; the new label id of each item index."""
    _store_agreeing(work, project, plan, source)
    new = [item for item in plan.items if item.update is not None]
    if not new:
        return {}
    state, session = work.state, work.session
    record_since = project.version
    project.version += 1
    now = utcnow()
    ids = insert_labels(session, [(project.id, i.a_id, i.b_id, i.positive, i.annotator, now,
                                   project.version) for i in new])
    closure, inputs = plan.closure, plan.inputs
    assert inputs is not None
    write_encoded(session, project.id, zip(ids, inputs.lines, strict=True))
    # each label's cause: itself, an earlier label of this import, or a stored label
    causes = {ids[k]: ids[cause] for k, cause in inputs.causes.items()}
    for label_id, item in zip(ids, new, strict=True):
        if label_id not in causes:
            cause = cause_in_store(session, closure, project.id, item.a_id, item.b_id,
                                   item.positive)
            assert cause is not None, "a decided pair lies in one stored line"
            causes[label_id] = cause
    session.execute(update(AssertedLabel).where(  # most labels decided their own pair
        AssertedLabel.project_id == project.id, AssertedLabel.version == project.version)
        .values(caused_by=AssertedLabel.id).execution_options(synchronize_session=False))
    set_causes(session, {k: v for k, v in causes.items() if k != v})
    release(session, state, [(i.a_id, i.b_id) for i in new])
    record_label_answers(session, project.id, since_version=record_since, source=source)
    state.replace_closure(closure, inputs.values)
    for item, label_id in zip(new, ids, strict=True):
        state.remember((item.a_id, item.b_id),
                       LiveLabel(label_id, item.positive, item.annotator, now))
    return {item.index: label_id for item, label_id in zip(new, ids, strict=True)}
