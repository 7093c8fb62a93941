"""Asserting labels, one or in bulk: computed on the cached closure, then written at once.

Each label is applied to the project's closure first (no database lock held), then written
together with the lines of pairs it newly decides (:mod:`app.services.labels.store`) in one
short write transaction (:meth:`app.services.unit.ProjectWork.write`): a crash leaves all of
it or none.

With an ``Idempotency-Key``, the outcome of executing the request (its 2xx answer, or the 409
of a contradiction) is stored with the key in that same transaction, and a retry replays it.
Refusals before execution (unknown concepts, ...) are not stored: a fixed retry may pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update

from app.errors import (
    BudgetExceeded,
    BulkContradiction,
    Contradiction,
    InvalidItems,
    UnknownConcepts,
)
from app.schemas import (
    MAX_DECIDED_LISTED,
    BulkLabels,
    BulkLabelsCreated,
    DecidedPair,
    LabelCreated,
    LabelIn,
    LabelRef,
    NewlyDecided,
    label_value,
)
from app.services.idempotency import Idempotency
from app.services.labels.proofs import check_pair, contradiction, proof_chains, proof_refs
from app.services.labels.store import (
    Encoded,
    cause_in_store,
    causes_in,
    encode_update,
    insert_labels,
    release,
    set_causes,
    write_effects,
    write_encoded,
)
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork, Superseded
from models import AssertedLabel, Project, utcnow
from reasoning.closure import Closure, ContradictionError, Label, Update

__all__ = ["Outcome", "post_bulk", "post_label"]

Outcome = tuple[int, dict[str, Any]]
"""``(status, body)`` of a label write: what is answered, and stored under a key."""


def _refusal(idempotency: Idempotency | None,
             error: Contradiction | BulkContradiction) -> Outcome:
    """A contradiction as the outcome of execution (with a key), else raised as usual."""
    if idempotency is None:
        raise error
    return error.kind.status, idempotency.problem(error)


def _execute(work: ProjectWork, idempotency: Idempotency | None, compute: Any,
             store: Any) -> Outcome:
    """``work.write(compute, store)``, replaying and storing outcomes under the key."""
    if idempotency is not None:
        stored = idempotency.lookup(work.session)
        work.session.rollback()
        if stored is not None:
            return stored

    def store_once(work: ProjectWork, project: Project, plan: Any) -> Outcome:
        if idempotency is not None:
            stored = idempotency.lookup(work.session)
            if stored is not None:  # the first request committed meanwhile, elsewhere
                raise Superseded(stored)
        outcome: Outcome = plan if isinstance(plan, tuple) else store(work, project, plan)
        if idempotency is not None:
            idempotency.store(work.session, *outcome)
        return outcome

    return work.write(compute, store_once)


# ---------------------------------------------------------------------------- one label
@dataclass(frozen=True)
class _Planned:
    a_id: int
    b_id: int
    positive: bool
    update: Update
    was_decided: bool


def _decided(state: ProjectState, update: Update) -> list[DecidedPair]:
    """The first :data:`MAX_DECIDED_LISTED` pairs ``update`` decided (an answer stays small)."""
    name: dict[Any, str] = state.name_of
    listed = [DecidedPair(a=name[a], b=name[b], label="positive")
              for a, b in update.pairs(True, MAX_DECIDED_LISTED)]
    return listed + [DecidedPair(a=name[a], b=name[b], label="negative")
                     for a, b in update.pairs(False, MAX_DECIDED_LISTED - len(listed))]


def _created(state: ProjectState, a: str, b: str, positive: bool, live: LiveLabel,
             update: Update | None) -> dict[str, Any]:
    n_positive = update.n_positive if update is not None else 0
    n_negative = update.n_negative if update is not None else 0
    total = n_positive + n_negative
    rest = (f"/projects/{state.project_id}/labels?caused_by={live.id}&source=inferred"
            if total > MAX_DECIDED_LISTED else None)
    return LabelCreated(
        id=live.id, a=a, b=b, label=label_value(positive), annotator=live.annotator,
        created_at=live.created_at,
        newly_decided=NewlyDecided(positive=n_positive, negative=n_negative),
        decided=_decided(state, update) if update is not None else [],
        decided_total=total, decided_rest=rest,
    ).model_dump(mode="json")


def within_budget(work: ProjectWork, closure: Closure, a_id: int, b_id: int, positive: bool,
                  what: str) -> None:
    """Refuse, before the work, a label that would grow the closure past the budget."""
    limit = work.limits.decided_pairs
    if len(closure) >= limit - len(closure.concepts) ** 2:  # else no label can reach it
        would_reach = len(closure) + closure.growth(a_id, b_id, positive)
        if would_reach > limit:
            raise BudgetExceeded("decided_pairs", limit, would_reach, what)


def post_label(work: ProjectWork, body: LabelIn,
               idempotency: Idempotency | None = None) -> Outcome:
    """Apply one label: 201 new, 200 already asserted the same way.

    Raises :class:`UnknownConcepts`, :class:`InvalidLabel` or :class:`Contradiction` (with the
    proof of the opposite label) before anything changes; with an idempotency key the
    contradiction is answered (and stored) as ``(409, problem)`` instead.
    """
    positive = body.positive

    def compute(work: ProjectWork) -> _Planned | Outcome:
        state = work.state
        a_id, b_id = check_pair(state, body.a, body.b)
        live = state.labels.get((a_id, b_id))
        if live is not None and live.positive == positive:
            return 200, _created(state, body.a, body.b, positive, live, None)
        was_decided = state.closure.status(a_id, b_id).value is not None
        within_budget(work, state.closure, a_id, b_id, positive, "this label")
        try:
            update = state.add_label(a_id, b_id, positive)
        except ContradictionError as exc:
            return _refusal(idempotency, contradiction(state, body.a, body.b, positive, exc))
        return _Planned(a_id, b_id, positive, update, was_decided)

    def store(work: ProjectWork, project: Project, plan: _Planned) -> Outcome:
        state, session = work.state, work.session
        project.version += 1
        label = AssertedLabel(project_id=project.id, a_id=plan.a_id, b_id=plan.b_id,
                              positive=positive, annotator=body.annotator, created_at=utcnow(),
                              version=project.version)
        session.add(label)
        session.flush()
        # decided before: the label whose effect holds the pair stays its cause
        label.caused_by = cause_in_store(session, state.closure, project.id, plan.a_id,
                                         plan.b_id, positive) if plan.was_decided else label.id
        write_effects(session, project.id, [(label.id, plan.update)], state.closure.concepts)
        release(session, state, [(plan.a_id, plan.b_id)])
        state.remember_label(label)
        live = state.labels[(plan.a_id, plan.b_id)]
        return 201, _created(state, body.a, body.b, positive, live, plan.update)

    return _execute(work, idempotency, compute, store)


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
class _BulkPlan:
    closure: Closure
    items: list[_BulkItem]
    prepared: _Prepared | None = None


@dataclass(frozen=True)
class _Prepared:
    """What the write of a bulk plan needs, computed before the write lock is taken.

    Per new label (in the order stored): its encoded lines; the position of the new label
    whose lines decided its pair (absent: a stored label did); the pool's values after.
    """

    lines: list[list[Encoded]]
    causes: dict[int, int]
    values: Any


def _prepared(state: ProjectState, plan: _BulkPlan) -> _BulkPlan:
    new = [item for item in plan.items if item.update is not None]
    updates = [item.update for item in new if item.update is not None]
    concepts = plan.closure.concepts
    causes = causes_in([(k, Label(i.a_id, i.b_id, i.positive)) for k, i in enumerate(new)],
                       updates, plan.closure, missing_ok=True)
    return _BulkPlan(plan.closure, plan.items, _Prepared(
        [encode_update(u, concepts) for u in updates], causes,
        state.values_under(plan.closure)))


def _resolve_bulk(state: ProjectState, labels: list[LabelIn]) -> list[tuple[int, int]]:
    unknown: list[str] = []
    errors: list[dict[str, Any]] = []
    pairs: list[tuple[int, int]] = []
    for index, item in enumerate(labels):
        missing = [n for n in (item.a, item.b) if n not in state.id_of]
        if missing:
            unknown.extend(missing)
            errors.append({"index": index, "a": item.a, "b": item.b,
                           "reason": "unknown concept " + ", ".join(repr(m) for m in missing)})
            continue
        pair = (state.id_of[item.a], state.id_of[item.b])
        if pair[0] == pair[1]:
            errors.append({"index": index, "a": item.a, "b": item.b,
                           "reason": "a label needs two different concepts"})
        pairs.append(pair)
    if unknown:
        raise UnknownConcepts(unknown, errors)
    if errors:
        raise InvalidItems(errors, "labels")
    return pairs


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
              idempotency: Idempotency | None = None) -> Outcome:
    """Import many labels in one transaction: all applied, or none and every contradiction.

    Labels are applied in the order given, to a copy of the closure; each contradiction (with
    the stored labels or with an earlier label of the import) is listed with its proof, and
    nothing is stored then. A large import into a project without labels is applied in the
    canonical order instead (:data:`CANONICAL_MIN`).
    """

    def compute(work: ProjectWork) -> _BulkPlan | Outcome:
        state = work.state
        pairs = _resolve_bulk(state, body.labels)
        fast = _canonical(work, state, body.labels, pairs)
        if fast is not None:
            return _prepared(state, fast)
        closure = state.closure.copy()
        pending: dict[tuple[int, int], int] = {}
        items: list[_BulkItem] = []
        contradictions: list[dict[str, Any]] = []
        for index, (item, (a_id, b_id)) in enumerate(zip(body.labels, pairs, strict=True)):
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
            return _refusal(idempotency, BulkContradiction(
                f"{len(contradictions)} label(s) contradict the others; nothing was stored",
                contradictions=contradictions))
        return _prepared(state, _BulkPlan(closure, items))

    def store(work: ProjectWork, project: Project, plan: _BulkPlan) -> Outcome:
        ids = _store_bulk(work, project, plan)
        state = work.state
        new = [item for item in plan.items if item.update is not None]
        name = state.name_of
        listed = sorted(plan.items, key=lambda i: i.index)
        return 201, BulkLabelsCreated(
            created=len(new), unchanged=len(plan.items) - len(new),
            newly_decided=NewlyDecided(
                positive=sum(i.update.n_positive for i in new if i.update),
                negative=sum(i.update.n_negative for i in new if i.update)),
            labels=[LabelRef(id=ids.get(i.index) or state.labels[(i.a_id, i.b_id)].id,
                             a=name[i.a_id], b=name[i.b_id], label=label_value(i.positive))
                    for i in listed],
        ).model_dump(mode="json")

    return _execute(work, idempotency, compute, store)


def _store_bulk(work: ProjectWork, project: Project, plan: _BulkPlan) -> dict[int, int]:
    """Store the new labels and their effects; the new label id of each item index."""
    new = [item for item in plan.items if item.update is not None]
    if not new:
        return {}
    state, session = work.state, work.session
    project.version += 1
    now = utcnow()
    ids = insert_labels(session, [(project.id, i.a_id, i.b_id, i.positive, i.annotator, now,
                                   project.version) for i in new])
    closure, prepared = plan.closure, plan.prepared
    assert prepared is not None
    write_encoded(session, project.id, zip(ids, prepared.lines, strict=True))
    # each label's cause: itself, an earlier label of this import, or a stored label
    causes = {ids[k]: ids[cause] for k, cause in prepared.causes.items()}
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
    state.replace_closure(closure, prepared.values)
    for item, label_id in zip(new, ids, strict=True):
        state.remember((item.a_id, item.b_id),
                       LiveLabel(label_id, item.positive, item.annotator, now))
    return {item.index: label_id for item, label_id in zip(new, ids, strict=True)}
