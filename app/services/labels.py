"""Asserted labels: apply them with the reasoning core, retract them, list and explain pairs.

Every posted label is applied to the project's cached closure (:mod:`app.services.state`) and
written, together with every pair it newly decides (``caused_by`` = the label), in the one
write transaction that holds the project's lock: a crash leaves all of it or none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from pydantic import TypeAdapter
from sqlalchemy import Table, and_, bindparam, delete, func, literal, null, select, union_all
from sqlalchemy.orm import Session, aliased

from app.db import write_transaction
from app.errors import (
    BulkContradiction,
    Contradiction,
    InvalidItems,
    InvalidLabel,
    LabelNotFound,
    UnknownConcepts,
)
from app.schemas import BulkLabels, LabelIn
from app.services.concepts import resolve
from app.services.idempotency import Idempotency
from app.services.state import ProjectState, StateRegistry, catch_up
from models import AssertedLabel, ClosurePair, Concept, Project, Reservation, utcnow
from reasoning.closure import Closure, ContradictionError, Proof, Update

__all__ = [
    "label_name",
    "list_labels",
    "pair_status",
    "post_bulk",
    "post_label",
    "replay",
    "retract_label",
]


def label_name(positive: bool) -> str:
    return "positive" if positive else "negative"


_TIME = TypeAdapter(datetime)


def json_time(value: datetime) -> str:
    """A timestamp as every other answer shows it (pydantic's JSON form)."""
    return str(_TIME.dump_python(value, mode="json"))


# ---------------------------------------------------------------------------- proofs
def proof_refs(state: ProjectState, proof: Proof,
               pending: dict[tuple[int, int], int] | None = None) -> list[dict[str, Any]]:
    """The asserted labels of ``proof`` as ``{"id", "a", "b", "label"}`` (names, not ids).

    ``pending`` maps pairs asserted earlier in the same bulk import to their item index; such
    labels have no id yet and are cited by ``index``. In a bulk import every reference has both
    members (absent values are null).
    """
    name: dict[Any, str] = state.name_of
    refs = []
    for lab in proof.labels:
        pair: Any = (lab.a, lab.b)
        ref: dict[str, Any] = {"id": None, "a": name[lab.a], "b": name[lab.b],
                               "label": label_name(lab.positive)}
        if pending is not None:
            ref["index"] = pending.get(pair)
        if ref.get("index") is None:
            live = state.labels.get(pair)
            ref["id"] = live.id if live is not None else None
        refs.append(ref)
    return refs


def proof_chains(state: ProjectState, proof: Proof) -> list[list[str]]:
    name: dict[Any, str] = state.name_of
    return [[name[c] for c in chain] for chain in proof.chains]


def _contradiction(state: ProjectState, a: str, b: str, positive: bool,
                   exc: ContradictionError) -> Contradiction:
    opposite = label_name(exc.proof.positive)
    return Contradiction(
        f"({a!r}, {b!r}) cannot be {label_name(positive)}: the asserted labels in `proof` "
        f"force it {opposite}",
        a=a, b=b, label=label_name(positive), proof=proof_refs(state, exc.proof),
        chains=proof_chains(state, exc.proof),
    )


# ---------------------------------------------------------------------------- closure rows
_table = cast(Table, ClosurePair.__table__)


def _rows(project_id: int, pairs: Iterable[tuple[Any, Any]], positive: bool,
          caused_by: int) -> list[dict[str, Any]]:
    return [{"project_id": project_id, "a_id": a, "b_id": b, "positive": positive,
             "asserted": False, "label_id": None, "caused_by": caused_by} for a, b in pairs]


def _insert_rows(session: Session, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(_table.insert(), rows)


_MARK_ASSERTED = (
    _table.update()
    .where(and_(_table.c.project_id == bindparam("k_project"), _table.c.a_id == bindparam("k_a"),
                _table.c.b_id == bindparam("k_b")))
    .values(asserted=bindparam("v_asserted"), label_id=bindparam("v_label"),
            caused_by=bindparam("v_caused_by"), positive=bindparam("v_positive"))
)
_DELETE_ROW = _table.delete().where(
    and_(_table.c.project_id == bindparam("k_project"), _table.c.a_id == bindparam("k_a"),
         _table.c.b_id == bindparam("k_b"))
)


def _release(session: Session, state: ProjectState, pairs: Iterable[tuple[int, int]]) -> None:
    """End the leases on the labeled pool pairs (a label answers the question)."""
    pair_ids = [state.pair_ids[row] for row in (state.pool_row.get(p) for p in pairs)
                if row is not None]
    if pair_ids:
        session.execute(delete(Reservation).where(Reservation.project_id == state.project_id,
                                                  Reservation.pair_id.in_(pair_ids)))


def _decided_items(state: ProjectState, update_: Update) -> list[dict[str, str]]:
    name: dict[Any, str] = state.name_of
    return ([{"a": name[a], "b": name[b], "label": "positive", "source": "inferred"}
             for a, b in update_.positive]
            + [{"a": name[a], "b": name[b], "label": "negative", "source": "inferred"}
               for a, b in update_.negative])


def _label_payload(state: ProjectState, label_id: int, a: str, b: str, positive: bool,
                   annotator: str | None, created_at: datetime,
                   update_: Update | None) -> dict[str, Any]:
    decided = _decided_items(state, update_) if update_ is not None else []
    return {
        "id": label_id, "a": a, "b": b, "label": label_name(positive), "annotator": annotator,
        "created_at": json_time(created_at),
        "newly_decided": {"positive": len(update_.positive) if update_ else 0,
                          "negative": len(update_.negative) if update_ else 0},
        "decided": decided,
    }


# ---------------------------------------------------------------------------- one label
def _check_pair(state: ProjectState, a: str, b: str) -> tuple[int, int]:
    a_id, b_id = resolve(state, [a, b])
    if a_id == b_id:
        raise InvalidLabel(f"a label needs two different concepts, got ({a!r}, {a!r})")
    return a_id, b_id


def _executed(session: Session, registry: StateRegistry, project_id: int,
              idempotency: Idempotency | None,
              apply: Callable[[ProjectState, Project], tuple[int, dict[str, Any]]]
              ) -> tuple[int, dict[str, Any]]:
    """Run ``apply`` in the project's write transaction, idempotently when a key is given.

    With a key, the outcome of executing the request (its 2xx answer, or the 409 of a
    contradiction) is stored with the key in the same transaction, and a retry replays it.
    Refusals before execution (unknown concepts, ...) are not stored: a fixed retry may pass.
    """
    with registry.locked(project_id) as state, \
            write_transaction(session, project_id) as project:
        assert project is not None
        if idempotency is not None:
            stored = idempotency.lookup(session)
            if stored is not None:
                return stored
        catch_up(session, state, project)
        try:
            result = apply(state, project)
        except (Contradiction, BulkContradiction) as exc:
            if idempotency is None:
                raise
            result = exc.kind.status, idempotency.problem(exc)
        if idempotency is not None:
            idempotency.store(session, *result)
        return result


def post_label(session: Session, registry: StateRegistry, project_id: int, body: LabelIn,
               idempotency: Idempotency | None = None) -> tuple[int, dict[str, Any]]:
    """Apply one label; returns ``(status, body)``: 201 new, 200 already asserted the same.

    Raises :class:`UnknownConcepts`, :class:`InvalidLabel` or :class:`Contradiction` (with the
    proof of the opposite label) before anything changes; with an idempotency key the
    contradiction is answered (and stored) as ``(409, problem)`` instead.
    """
    positive = body.label == "positive"

    def apply(state: ProjectState, project: Project) -> tuple[int, dict[str, Any]]:
        a_id, b_id = _check_pair(state, body.a, body.b)
        live = state.labels.get((a_id, b_id))
        if live is not None and live.positive == positive:
            return 200, _label_payload(state, live.id, body.a, body.b, positive,
                                       live.annotator, live.created_at, None)
        was_decided = state.closure.status(a_id, b_id).value is not None
        try:
            update_ = state.closure.add_label(a_id, b_id, positive)
        except ContradictionError as exc:
            raise _contradiction(state, body.a, body.b, positive, exc) from None
        label = _store_label(session, state, project, a_id, b_id, positive, body.annotator,
                             update_, was_decided)
        return 201, _label_payload(state, label.id, body.a, body.b, positive,
                                   label.annotator, label.created_at, update_)

    return _executed(session, registry, project_id, idempotency, apply)


def _store_label(session: Session, state: ProjectState, project: Project, a_id: int, b_id: int,
                 positive: bool, annotator: str | None, update_: Update,
                 was_decided: bool) -> AssertedLabel:
    """Write the label, its own closure row and every newly decided pair (one transaction)."""
    project.version += 1
    label = AssertedLabel(project_id=project.id, a_id=a_id, b_id=b_id, positive=positive,
                          annotator=annotator, created_at=utcnow(), version=project.version)
    session.add(label)
    session.flush()
    if was_decided:  # inferred the same way before: it becomes asserted, its cause stays
        session.execute(_MARK_ASSERTED_ONLY, {"k_project": project.id, "k_a": a_id,
                                              "k_b": b_id, "v_label": label.id})
    else:
        own = {"project_id": project.id, "a_id": a_id, "b_id": b_id, "positive": positive,
               "asserted": True, "label_id": label.id, "caused_by": label.id}
        _insert_rows(session, [own])
    _insert_rows(session, _rows(project.id, update_.positive, True, label.id)
                 + _rows(project.id, update_.negative, False, label.id))
    _release(session, state, [(a_id, b_id)])
    state.remember_label(label)
    state.version = project.version
    return label


_MARK_ASSERTED_ONLY = (
    _table.update()
    .where(and_(_table.c.project_id == bindparam("k_project"), _table.c.a_id == bindparam("k_a"),
                _table.c.b_id == bindparam("k_b")))
    .values(asserted=True, label_id=bindparam("v_label"))
)


# ---------------------------------------------------------------------------- bulk import
@dataclass
class _BulkItem:
    index: int
    a_id: int
    b_id: int
    positive: bool
    annotator: str | None
    update: Update | None  # None: already asserted the same way (unchanged)
    was_decided: bool


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


def post_bulk(session: Session, registry: StateRegistry, project_id: int, body: BulkLabels,
              idempotency: Idempotency | None = None) -> tuple[int, dict[str, Any]]:
    """Import many labels in one transaction: all applied, or none and every contradiction.

    Labels are applied in the order given; each contradiction (with the stored labels or with an
    earlier label of the import) is listed with its proof, and nothing is stored then.
    """

    def apply(state: ProjectState, project: Project) -> tuple[int, dict[str, Any]]:
        pairs = _resolve_bulk(state, body.labels)
        work = state.closure.copy()
        pending: dict[tuple[int, int], int] = {}
        items: list[_BulkItem] = []
        contradictions: list[dict[str, Any]] = []
        for index, (item, (a_id, b_id)) in enumerate(zip(body.labels, pairs, strict=True)):
            positive = item.label == "positive"
            status = work.status(a_id, b_id)
            if status.asserted and status.value == positive:
                items.append(_BulkItem(index, a_id, b_id, positive, item.annotator, None, True))
                continue
            try:
                update_ = work.add_label(a_id, b_id, positive)
            except ContradictionError as exc:
                contradictions.append({
                    "index": index, "a": item.a, "b": item.b, "label": item.label,
                    "proof": proof_refs(state, exc.proof, pending),
                    "chains": proof_chains(state, exc.proof),
                })
                continue
            pending[(a_id, b_id)] = index
            items.append(_BulkItem(index, a_id, b_id, positive, item.annotator, update_,
                                   status.value is not None))
        if contradictions:
            raise BulkContradiction(
                f"{len(contradictions)} label(s) contradict the others; nothing was stored",
                contradictions=contradictions)
        refs = _store_bulk(session, state, project, work, items)
        new = [item for item in items if item.update is not None]
        return 201, {
            "created": len(new), "unchanged": len(items) - len(new),
            "newly_decided": {"positive": sum(len(i.update.positive) for i in new if i.update),
                              "negative": sum(len(i.update.negative) for i in new if i.update)},
            "labels": refs,
        }

    return _executed(session, registry, project_id, idempotency, apply)


def _store_bulk(session: Session, state: ProjectState, project: Project, work: Closure,
                items: list[_BulkItem]) -> list[dict[str, Any]]:
    new = [item for item in items if item.update is not None]
    name = state.name_of
    if new:
        project.version += 1
        now = utcnow()
        labels = [AssertedLabel(project_id=project.id, a_id=i.a_id, b_id=i.b_id,
                                positive=i.positive, annotator=i.annotator, created_at=now,
                                version=project.version) for i in new]
        session.add_all(labels)
        session.flush()
        rows: dict[tuple[int, int], dict[str, Any]] = {}
        marks: list[dict[str, Any]] = []
        for item, label in zip(new, labels, strict=True):
            pair = (item.a_id, item.b_id)
            if not item.was_decided:
                rows[pair] = {"project_id": project.id, "a_id": item.a_id, "b_id": item.b_id,
                              "positive": item.positive, "asserted": True, "label_id": label.id,
                              "caused_by": label.id}
            elif pair in rows:  # inferred by an earlier label of this import
                rows[pair].update(asserted=True, label_id=label.id)
            else:
                marks.append({"k_project": project.id, "k_a": item.a_id, "k_b": item.b_id,
                              "v_label": label.id})
            assert item.update is not None
            for row in (_rows(project.id, item.update.positive, True, label.id)
                        + _rows(project.id, item.update.negative, False, label.id)):
                rows[(row["a_id"], row["b_id"])] = row
        _insert_rows(session, list(rows.values()))
        if marks:
            session.execute(_MARK_ASSERTED_ONLY, marks)
        _release(session, state, [(i.a_id, i.b_id) for i in new])
        state.closure = work
        for label in labels:
            state.remember_label(label)
        state.version = project.version
    refs = []
    for item in items:
        live = state.labels[(item.a_id, item.b_id)]
        refs.append({"id": live.id, "a": name[item.a_id], "b": name[item.b_id],
                     "label": label_name(item.positive)})
    return refs


# ---------------------------------------------------------------------------- retraction
def replay(concepts: Iterable[Any], labels: Iterable[AssertedLabel]
           ) -> tuple[Closure, dict[tuple[Any, Any], tuple[bool, bool, int | None, int]]]:
    """The closure of ``labels`` applied in their order, with each decided pair's cause.

    Returns the closure and, per decided pair, ``(positive, asserted, label_id, caused_by)``:
    ``caused_by`` is the first label whose application decided the pair.
    """
    closure = Closure(concepts)
    rows: dict[tuple[Any, Any], tuple[bool, bool, int | None, int]] = {}
    for label in labels:
        pair = (label.a_id, label.b_id)
        update_ = closure.add_label(label.a_id, label.b_id, label.positive)
        if pair in rows:
            rows[pair] = (rows[pair][0], True, label.id, rows[pair][3])
        else:
            rows[pair] = (label.positive, True, label.id, label.id)
        for p in update_.positive:
            rows[p] = (True, False, None, label.id)
        for p in update_.negative:
            rows[p] = (False, False, None, label.id)
    return closure, rows


def _sync_rows(session: Session, project_id: int,
               rows: dict[tuple[Any, Any], tuple[bool, bool, int | None, int]]) -> None:
    """Make the stored closure rows equal ``rows``, touching only what differs."""
    stored = {
        (a, b): (positive, asserted, label_id, caused_by)
        for a, b, positive, asserted, label_id, caused_by in session.execute(
            select(ClosurePair.a_id, ClosurePair.b_id, ClosurePair.positive,
                   ClosurePair.asserted, ClosurePair.label_id, ClosurePair.caused_by)
            .where(ClosurePair.project_id == project_id))
    }
    gone = [{"k_project": project_id, "k_a": a, "k_b": b} for a, b in stored.keys() - rows.keys()]
    changed = [
        {"k_project": project_id, "k_a": a, "k_b": b, "v_positive": value[0],
         "v_asserted": value[1], "v_label": value[2], "v_caused_by": value[3]}
        for (a, b), value in rows.items() if (a, b) in stored and stored[(a, b)] != value
    ]
    added = [
        {"project_id": project_id, "a_id": a, "b_id": b, "positive": value[0],
         "asserted": value[1], "label_id": value[2], "caused_by": value[3]}
        for (a, b), value in rows.items() if (a, b) not in stored
    ]
    if gone:
        session.execute(_DELETE_ROW, gone)
    if changed:
        session.execute(_MARK_ASSERTED, changed)
    _insert_rows(session, added)


def retract_label(session: Session, registry: StateRegistry, project_id: int,
                  label_id: int) -> dict[str, Any]:
    """Retract a live label; the closure is recomputed from the remaining labels.

    Returns the retracted label and how many pairs became undecided.
    """
    with registry.locked(project_id) as state, \
            write_transaction(session, project_id) as project:
        assert project is not None
        catch_up(session, state, project)
        label = session.get(AssertedLabel, label_id)
        if label is None or label.project_id != project_id:
            raise LabelNotFound(label_id)
        if label.retracted_at is not None:
            raise LabelNotFound(label_id, "this label was already retracted")
        before = len(state.closure)
        project.version += 1
        project.retraction_version = project.version
        label.retracted_at = utcnow()
        label.retracted_version = project.version
        remaining = session.scalars(
            select(AssertedLabel).where(AssertedLabel.project_id == project_id,
                                        AssertedLabel.retracted_at.is_(None),
                                        AssertedLabel.id != label_id)
            .order_by(AssertedLabel.id))
        closure, rows = replay(state.closure.concepts, remaining)
        _sync_rows(session, project_id, rows)
        state.closure = closure
        state.forget_label(label_id)
        state.version = project.version
        return {"id": label.id, "a": state.name_of[label.a_id], "b": state.name_of[label.b_id],
                "label": label_name(label.positive), "retracted_at": label.retracted_at,
                "undecided": before - len(closure)}


# ---------------------------------------------------------------------------- listing
def list_labels(session: Session, project_id: int, *, source: str, label: str | None,
                include_retracted: bool, limit: int | None,
                offset: int) -> tuple[list[dict[str, Any]], int]:
    """Decided pairs (and optionally retracted labels), newest deciding label first."""
    a, b = aliased(Concept), aliased(Concept)
    postgres = session.get_bind().dialect.name == "postgresql"
    parts: list[Any] = []
    if source in ("asserted", "inferred", "all"):
        query: Any = (
            select(
                a.name.label("a"), b.name.label("b"), ClosurePair.positive.label("positive"),
                ClosurePair.asserted.label("asserted"), literal(False).label("retracted"),
                ClosurePair.label_id.label("id"), ClosurePair.caused_by.label("caused_by"),
                AssertedLabel.annotator.label("annotator"),
                AssertedLabel.created_at.label("created_at"),
                AssertedLabel.retracted_at.label("retracted_at"),
                func.coalesce(ClosurePair.label_id, ClosurePair.caused_by).label("sort_key"),
            )
            .join(a, a.id == ClosurePair.a_id).join(b, b.id == ClosurePair.b_id)
            .outerjoin(AssertedLabel, AssertedLabel.id == ClosurePair.label_id)
            .where(ClosurePair.project_id == project_id)
        )
        if source != "all":
            query = query.where(ClosurePair.asserted.is_(source == "asserted"))
        if label is not None:
            query = query.where(ClosurePair.positive.is_(label == "positive"))
        parts.append(query)
    if include_retracted and source != "inferred":
        query = (
            select(
                a.name.label("a"), b.name.label("b"), AssertedLabel.positive.label("positive"),
                literal(True).label("asserted"), literal(True).label("retracted"),
                AssertedLabel.id.label("id"), null().label("caused_by"),
                AssertedLabel.annotator.label("annotator"),
                AssertedLabel.created_at.label("created_at"),
                AssertedLabel.retracted_at.label("retracted_at"),
                AssertedLabel.id.label("sort_key"),
            )
            .join(a, a.id == AssertedLabel.a_id).join(b, b.id == AssertedLabel.b_id)
            .where(AssertedLabel.project_id == project_id, AssertedLabel.retracted_at.is_not(None))
        )
        if label is not None:
            query = query.where(AssertedLabel.positive.is_(label == "positive"))
        parts.append(query)
    if not parts:
        return [], 0
    union: Any = union_all  # (typed call crashes mypy 2.4 on these column tuples)
    combined = (parts[0] if len(parts) == 1 else union(*parts)).subquery()
    total = 0
    if limit is not None:
        total = session.scalar(select(func.count()).select_from(combined)) or 0
    a_order: Any = combined.c.a
    b_order: Any = combined.c.b
    if postgres:  # byte order, as SQLite sorts: the same pages on both backends
        a_order, b_order = a_order.collate("C"), b_order.collate("C")
    ordered = select(combined).order_by(combined.c.sort_key.desc(), a_order, b_order)
    if limit is not None:
        ordered = ordered.limit(limit).offset(offset)
    rows = session.execute(ordered).all()
    items = []
    for row in rows:
        source_name = ("retracted" if row.retracted else
                       "asserted" if row.asserted else "inferred")
        items.append({
            "a": row.a, "b": row.b, "label": label_name(row.positive), "source": source_name,
            "id": row.id if row.asserted else None, "caused_by": row.caused_by,
            "annotator": row.annotator if row.asserted else None,
            "created_at": row.created_at if row.asserted else None,
            "retracted_at": row.retracted_at,
        })
    return items, total if limit is not None else len(items)


# ---------------------------------------------------------------------------- one pair
def pair_status(state: ProjectState, a: str, b: str) -> dict[str, Any]:
    """Status, source and proof of ``(a, b)`` from the caught-up state (prediction not set)."""
    a_id, b_id = _check_pair(state, a, b)
    status = state.closure.status(a_id, b_id)
    proof = state.closure.proof(a_id, b_id) if status.value is not None else None
    return {
        "a": a, "b": b,
        "status": "undecided" if status.value is None else label_name(status.value),
        "source": None if status.value is None else ("asserted" if status.asserted
                                                     else "inferred"),
        "proof": proof_refs(state, proof) if proof is not None else [],
        "chains": proof_chains(state, proof) if proof is not None else [],
        "in_pool": (a_id, b_id) in state.pool_row,
        "prediction": None,
    }

