"""The ``strict`` policy: every label posted is asserted at once, or refused with the proof
of the opposite when the order already decides its pair the other way.

One label (:meth:`StrictPolicy.post`) is applied to the project's closure first (no database
lock held), then written together with the lines of pairs it newly decides
(:mod:`app.services.labels.store`) in one short write transaction
(:meth:`app.services.unit.ProjectWork.write`): a crash leaves all of it or none. A write
answers :class:`Written` (the label created, or found asserted the same way already) or
:class:`Refused` (a contradiction, with its proof): a refusal is a *result*, committed like any
other (the refused answer is kept for the annotators' counts), whether or not the request
carries an ``Idempotency-Key``; the route answers it 409. Refusals before execution (unknown
concepts, a self pair, the budget) are raised as usual. Bulk labels are all applied or none;
a long run into a project without labels is closed at once in the canonical order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select, update

from app.errors import BulkContradiction, LabelNotFound
from app.schemas import (
    AnswerRetracted,
    BulkLabels,
    BulkLabelsCreated,
    LabelCreated,
    LabelIn,
    LabelRef,
    LabelRetracted,
    NewlyDecided,
    label_value,
)
from app.security import Caller
from app.services.annotators import (
    ACCEPTED,
    record_answer,
    record_label_answers,
    record_refusal,
    retract_label_answers,
    stamp_retracted,
    standing,
    stands_behind,
)
from app.services.asking import TeamQuestion
from app.services.labels.proofs import check_pair, contradiction, proof_chains, proof_refs
from app.services.labels.shared import (
    CANONICAL_MIN,
    Planned,
    Refused,
    Written,
    canonical_run,
    check_retract,
    label_created,
    live_answer,
    live_pair,
    owner_of,
    resolve_bulk,
    store_label,
    within_budget,
)
from app.services.labels.store import (
    Encoded,
    Rewrite,
    cause_in_store,
    causes_in,
    encode_update,
    insert_labels,
    prepare_rewrite,
    release,
    replay_live,
    rewrite,
    set_causes,
    write_encoded,
)
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import Answer, AssertedLabel, Disagreement, Project, utcnow
from reasoning.closure import Closure, ContradictionError, Label, Update

__all__ = ["STRICT", "StrictPolicy"]


# ---------------------------------------------------------------------------- one label
@dataclass(frozen=True)
class _Found:
    live: LiveLabel  # the label, asserted the same way already


def _post(work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
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
            project.version += 1  # every stored answer moves the version
            record_refusal(work.session, project.id, state.id_of[body.a], state.id_of[body.b],
                           positive, body.annotator, body.source or "api")
            return plan
        live = store_label(work, project, body, plan)
        answer = record_answer(work.session, project.id, plan.a_id, plan.b_id, positive,
                               body.annotator, outcome="asserted", source=body.source or "api",
                               label_id=live.id)
        return Written(label_created(state, body, live, annotator=body.annotator,
                                     answer_id=answer.id, update=plan.update))

    return work.write(compute, store)


def _found(work: ProjectWork, project: Project, body: LabelIn,
           live: LiveLabel) -> Written[LabelCreated]:
    """A label asserted the same way already: the same annotator repeating it gives no new
    answer (200); another annotator's agreeing answer is kept (201)."""
    state = work.state
    if live.annotator == body.annotator or stands_behind(work.session, live.id, body.annotator):
        return Written(label_created(state, body, live, annotator=live.annotator),
                       created=False)
    project.version += 1  # every stored answer moves the version
    answer = record_answer(work.session, project.id, state.id_of[body.a], state.id_of[body.b],
                           body.positive, body.annotator, outcome="agreed",
                           source=body.source or "api", label_id=live.id)
    return Written(label_created(state, body, live, annotator=body.annotator,
                                 answer_id=answer.id))


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


def _canonical(work: ProjectWork, state: ProjectState, labels: list[LabelIn],
               pairs: list[tuple[int, int]]) -> _BulkPlan | None:
    """The import applied in the canonical order (:data:`CANONICAL_MIN`), or None (a
    contradiction, or labels stored already: replay in order instead). The labels' ids then
    follow that order (the order :attr:`caused_by` is replayed in)."""
    if state.labels or len(labels) < CANONICAL_MIN:
        return None
    items = [Label(a, b, item.positive) for item, (a, b) in zip(labels, pairs, strict=True)]
    run = canonical_run(state.closure, items, work.limits.decided_pairs)
    if run is None:
        return None
    plan: list[_BulkItem] = []
    for k, applied in zip(run.order, run.updates, strict=True):
        a_id, b_id = pairs[k]
        plan.append(_BulkItem(k, a_id, b_id, items[k].positive, labels[k].annotator,
                              applied if applied.recorded else None,
                              applied.recorded and not applied.own_new))
    return _BulkPlan(run.closure, plan)


def _post_bulk(work: ProjectWork, body: BulkLabels,
               source: str) -> Written[BulkLabelsCreated] | Refused:
    """Import many labels in one transaction: all applied, or none and every contradiction.

    Labels are applied in the order given, to a copy of the closure; each contradiction (with
    the stored labels or with an earlier label of the import) is listed with its proof, and
    nothing is stored then (:class:`Refused`). A large import into a project without labels
    is applied in the canonical order instead (:data:`CANONICAL_MIN`).
    """

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


def _store_agreeing(work: ProjectWork, project: Project, plan: _BulkPlan, source: str) -> int:
    """Keep the answers of other annotators that agree with a label asserted already (one
    query for who stands behind which label, whatever the import's length); how many."""
    state = work.state
    agreeing = [(item, live) for item in plan.items if item.update is None
                and (live := state.labels.get((item.a_id, item.b_id))) is not None
                and live.annotator != item.annotator]
    behind = standing(work.session, {live.id for _, live in agreeing})
    kept = 0
    for item, live in agreeing:
        if (live.id, item.annotator) not in behind:
            behind.add((live.id, item.annotator))  # a repeat within the import: one answer
            record_answer(work.session, project.id, item.a_id, item.b_id, item.positive,
                          item.annotator, outcome="agreed", source=source, label_id=live.id)
            kept += 1
    return kept


def _store_bulk(work: ProjectWork, project: Project, plan: _BulkPlan,
                source: str) -> dict[int, int]:
    """Store the new labels, their answers and effects; the new label id of each item index."""
    agreed = _store_agreeing(work, project, plan, source)
    new = [item for item in plan.items if item.update is not None]
    if not new:
        project.version += bool(agreed)  # every stored answer moves the version
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


# ---------------------------------------------------------------------------- retractions
@dataclass(frozen=True)
class _Retraction:
    label_id: int
    pair: tuple[int, int]
    positive: bool
    closure: Closure
    stored: Rewrite
    values: Any


def _plan_retraction(work: ProjectWork, label_id: int, caller: Caller) -> _Retraction:
    """The closure of the live labels but ``label_id``, replayed in the order they were
    asserted (ids: causes follow that order), no lock held; once ``caller`` may remove the
    answers the label rests on."""
    state = work.state
    pair = live_pair(work, label_id)
    check_retract(work, caller, Answer.label_id == label_id, Answer.outcome.in_(ACCEPTED))
    closure, labels, updates = replay_live(state, without=label_id)
    return _Retraction(label_id, pair, state.labels[pair].positive, closure,
                       prepare_rewrite(closure, labels, updates, since=label_id),
                       state.values_under(closure))


def _store_retraction(work: ProjectWork, project: Project,
                      plan: _Retraction) -> LabelRetracted:
    session, state = work.session, work.state
    label = session.get(AssertedLabel, plan.label_id)
    if label is None or label.project_id != project.id or label.retracted_at is not None:
        raise LabelNotFound(plan.label_id, "this label was already retracted")
    before = len(state.closure)
    project.version += 1
    project.retraction_version = project.version
    label.retracted_at = utcnow()
    label.retracted_version = project.version
    label.caused_by = None
    retract_label_answers(session, [plan.label_id])
    rewrite(session, project.id, plan.stored)
    state.replace_closure(plan.closure, plan.values)
    state.forget_label(plan.label_id)
    name = state.name_of
    return LabelRetracted(id=plan.label_id, a=name[plan.pair[0]], b=name[plan.pair[1]],
                          label=label_value(plan.positive), retracted_at=label.retracted_at,
                          undecided=before - len(plan.closure))


def _retract_label(work: ProjectWork, label_id: int, caller: Caller) -> LabelRetracted:
    """Retract a live label; the closure is recomputed from the remaining labels."""
    return work.write(lambda work: _plan_retraction(work, label_id, caller),
                      _store_retraction)


def _others_behind(work: ProjectWork, answer: Answer) -> int:
    """Live accepted answers other than ``answer`` behind its label."""
    return work.session.scalar(select(func.count(Answer.id)).where(
        Answer.label_id == answer.label_id, Answer.id != answer.id,
        Answer.outcome.in_(ACCEPTED), Answer.retracted_at.is_(None))) or 0


def _retract_answer(work: ProjectWork, answer_id: int, caller: Caller) -> AnswerRetracted:
    """Retract one answer: its label goes when no other live accepted answer stands behind
    it (the label's retraction); else the answer alone is stamped retracted."""
    answer = live_answer(work, answer_id)
    caller.check_retract([owner_of(answer.annotator, answer.role)])
    name = work.state.name_of
    a, b, positive = name[answer.a_id], name[answer.b_id], answer.positive
    label_id = answer.label_id
    stands = (answer.outcome in ACCEPTED and label_id is not None
              and label_id in work.state.pair_of_label)
    if stands and not _others_behind(work, answer):
        assert label_id is not None
        work.end_read()
        retracted = _retract_label(work, label_id, caller)
        return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                               retracted_at=retracted.retracted_at,
                               undecided=retracted.undecided)
    work.end_read()
    now = utcnow()

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        live_answer(work, answer_id)
        project.version += 1  # every stored change of the answers moves the version
        stamp_retracted(work.session, [answer_id], now)

    work.write(lambda work: None, store)
    return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                           retracted_at=now, undecided=0)


# ---------------------------------------------------------------------------- the policy
def _close_disagreements(work: ProjectWork, project: Project, plan: None) -> None:
    """Switch to ``strict``: strict settles nothing by answers, so what stays in dispute is
    not listed as open work."""
    project.policy = STRICT.name
    project.version += 1
    project.consensus_as_of = project.consensus_pending = None  # no consensus kept
    work.session.execute(update(Disagreement).where(
        Disagreement.project_id == project.id, Disagreement.closed_at.is_(None))
        .values(closed_at=utcnow(), closed_reason="policy", reopened_at=None))


class StrictPolicy:
    """The ``strict`` policy (module docstring), as :mod:`app.services.labels.policy`
    calls it."""

    name = "strict"
    refuses = True  # a label against what the order decides is refused with its proof

    def post(self, work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
        return _post(work, body)

    def post_bulk(self, work: ProjectWork, body: BulkLabels,
                  source: str) -> Written[BulkLabelsCreated] | Refused:
        return _post_bulk(work, body, source)

    def retract_label(self, work: ProjectWork, label_id: int,
                      caller: Caller) -> LabelRetracted:
        return _retract_label(work, label_id, caller)

    def retract_answer(self, work: ProjectWork, answer_id: int,
                       caller: Caller) -> AnswerRetracted:
        return _retract_answer(work, answer_id, caller)

    def team_question(self, work: ProjectWork, annotator: str | None,
                      proba: np.ndarray | None) -> TeamQuestion | None:
        """None: in ``strict`` every question is the strategy's new pair."""
        return None

    def adopt(self, work: ProjectWork) -> None:
        """Switch to ``strict``: the current labels stay; the open disagreements close."""
        work.write(lambda work: None, _close_disagreements)


STRICT = StrictPolicy()
