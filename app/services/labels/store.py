"""The stored closure: what each asserted label newly decided, as bitset lines.

The closure H lives in ``closure_effects`` (:class:`models.ClosureEffect`): per label, the rows
or columns of pairs it decided when the live labels are replayed in the order they were
asserted, each a compressed bitset over the concept ordinals (a concept's rank by id in the
project, which is its index in the project's cached closure). A label writes its lines, in
proportion to what changed, never one row per pair; ``asserted_labels.caused_by`` records which
label decided each asserted pair. Only the label writers, the retraction and the corrections
touch these rows, through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, or_, select
from sqlalchemy.orm import Session

from app.services.bitsets import decode, encode
from app.services.state import ProjectState
from models import AssertedLabel, ClosureEffect, Reservation
from reasoning.closure import Closure, Label, Update

__all__ = ["Encoded", "cause_in_store", "causes_in", "decode", "encode", "encode_update",
           "insert_labels", "prepare_rewrite", "release", "replay_live", "rewrite",
           "Rewrite", "set_causes", "write_effects", "write_encoded"]

_labels = cast(Table, AssertedLabel.__table__)


Encoded = tuple[bool, bool, Any, bytes, int]
"""One stored line of an update: ``(positive, by_row, line concept id, bits, count)``."""


def encode_update(update: Update, concepts: Sequence[Any]) -> list[Encoded]:
    """The lines of ``update`` as stored (compressed; done before the write transaction)."""
    return [(positive, by_row, concepts[index], encode(bits), bits.bit_count())
            for positive, lines in ((True, update.lines[0]), (False, update.lines[1]))
            for by_row, index, bits in lines]


def write_encoded(session: Session, project_id: int,
                  effects: Iterable[tuple[int, list[Encoded]]]) -> None:
    """Store lines encoded already (:func:`encode_update`), per label id."""
    batch: list[tuple[Any, ...]] = []
    for label_id, lines in effects:
        batch += [(project_id, label_id, *line) for line in lines]
        if len(batch) >= 5000:
            _executemany(session, "closure_effects", _COLUMNS, batch)
            batch = []
    if batch:
        _executemany(session, "closure_effects", _COLUMNS, batch)


_COLUMNS = ("project_id", "label_id", "positive", "by_row", "line_id", "bits", "count")


def _executemany(session: Session, table: str, columns: Sequence[str],
                 rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with the driver's executemany.

    The rows are plain ints, bools, strings and bytes that both drivers take as they are;
    going around SQLAlchemy's per-parameter processing halves the time an import holds the
    write lock.
    """
    connection = session.connection()
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    connection.exec_driver_sql(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})",
        list(rows))


_LABEL_COLUMNS = ("project_id", "a_id", "b_id", "positive", "annotator", "created_at",
                  "version")


def insert_labels(session: Session, rows: Sequence[tuple[Any, ...]]) -> list[int]:
    """Insert asserted labels ``(project_id, a_id, b_id, positive, annotator, created_at,
    version)`` of one new version with the driver's executemany; their ids, in order.

    The ORM spends ~0.1 ms per object and SQLAlchemy's executemany about as much on its
    per-parameter processing, which a large import would spend holding the write lock; the
    timestamps go through the column type's own processing, once.
    """
    if not rows:
        return []
    dialect = session.connection().dialect
    stamp = _labels.c.created_at.type._cached_bind_processor(dialect)  # naive UTC, as stored
    stored = {value: stamp(value) if stamp else value for value in {row[5] for row in rows}}
    _executemany(session, "asserted_labels", _LABEL_COLUMNS,
                 [(*row[:5], stored[row[5]], row[6]) for row in rows])
    project_id, version = rows[0][0], rows[0][6]
    ids = list(session.scalars(select(AssertedLabel.id).where(
        AssertedLabel.project_id == project_id, AssertedLabel.version == version)
        .order_by(AssertedLabel.id)))
    assert len(ids) == len(rows), "one version's labels are inserted at once"
    return ids


def write_effects(session: Session, project_id: int, effects: Iterable[tuple[int, Update]],
                  concepts: Sequence[Any]) -> None:
    """Store what each ``(label_id, update)`` decided; ``concepts``: closure index → id."""
    write_encoded(session, project_id,
                  ((label_id, encode_update(update, concepts)) for label_id, update in effects))


def cause_in_store(session: Session, closure: Closure, project_id: int, a_id: int, b_id: int,
                   positive: bool) -> int | None:
    """The stored label whose effect holds the decided pair ``(a_id, b_id)``.

    Reads only the lines of row ``a`` and column ``b`` of that relation.
    """
    i, j = closure.index(a_id), closure.index(b_id)
    rows = session.execute(
        select(ClosureEffect.label_id, ClosureEffect.by_row, ClosureEffect.bits).where(
            ClosureEffect.project_id == project_id, ClosureEffect.positive.is_(positive),
            or_(and_(ClosureEffect.by_row.is_(True), ClosureEffect.line_id == a_id),
                and_(ClosureEffect.by_row.is_(False), ClosureEffect.line_id == b_id))))
    for label_id, by_row, blob in rows:
        if decode(blob) >> (j if by_row else i) & 1:
            return int(label_id)
    return None


def causes_in(labels: Sequence[tuple[int, Label]], updates: Sequence[Update],
              closure: Closure, *, missing_ok: bool = False) -> dict[int, int]:
    """Per asserted label id, the label (of ``labels``) whose update decided its pair.

    With ``missing_ok``, a pair that none of ``updates`` decided (it was decided before them)
    is left out; else every pair must have its cause there.
    """
    lines: dict[tuple[bool, bool, int], list[tuple[int, int]]] = {}
    for (label_id, _), update in zip(labels, updates, strict=True):
        for positive, side in ((True, update.lines[0]), (False, update.lines[1])):
            for by_row, index, bits in side:
                lines.setdefault((positive, by_row, index), []).append((label_id, bits))
    causes: dict[int, int] = {}
    for label_id, lab in labels:
        i, j = closure.index(lab.a), closure.index(lab.b)
        found = [cause for cause, bits in lines.get((lab.positive, True, i), ()) if bits >> j & 1]
        found += [cause for cause, bits in lines.get((lab.positive, False, j), ())
                  if bits >> i & 1]
        if found or not missing_ok:
            causes[label_id] = found[0]
    return causes


def set_causes(session: Session, causes: dict[int, int]) -> None:
    """Record ``asserted_labels.caused_by`` for each label id."""
    if causes:
        session.execute(
            _labels.update().where(_labels.c.id == bindparam("k_id"))
            .values(caused_by=bindparam("v_cause")),
            [{"k_id": k, "v_cause": v} for k, v in causes.items()])


@dataclass(frozen=True)
class Rewrite:
    """The stored closure of a replay, encoded before the write transaction.

    ``lines`` per label id (those from ``since`` on), ``causes`` per label id.
    """

    lines: list[tuple[int, list[Encoded]]]
    causes: dict[int, int]
    since: int = 0


def prepare_rewrite(closure: Closure, labels: Sequence[tuple[int, Label]],
                    updates: Sequence[Update], since: int = 0) -> Rewrite:
    """Encode the replay ``updates`` of the live ``labels`` (see :func:`rewrite`)."""
    concepts = closure.concepts
    causes = causes_in(labels, updates, closure)
    return Rewrite([(label_id, encode_update(upd, concepts))
                    for (label_id, _), upd in zip(labels, updates, strict=True)
                    if label_id >= since],
                   {k: v for k, v in causes.items() if k >= since}, since)


def rewrite(session: Session, project_id: int, prepared: Rewrite) -> None:
    """Replace the stored closure with a prepared replay of the live labels.

    After a merge or a deletion (concept ordinals move) every line is written again; after a
    retraction, only those of the labels from ``since`` (the retracted label's id) on: the
    replay of the labels before it is what it was. The cost is that of the lines, never of
    the pairs, and the encoding is done before the write transaction.
    """
    session.execute(delete(ClosureEffect).where(ClosureEffect.project_id == project_id,
                                                ClosureEffect.label_id >= prepared.since))
    write_encoded(session, project_id, prepared.lines)
    set_causes(session, prepared.causes)


def replay_live(state: ProjectState, without: int | None = None,
                concepts: Sequence[Any] | None = None
                ) -> tuple[Closure, list[tuple[int, Label]], list[Update]]:
    """The closure of the live labels (but ``without``) replayed in assertion order (ids),
    over ``concepts`` (default the state's, in ordinal order)."""
    order = sorted(state.labels.items(), key=lambda item: item[1].id)
    labels = [(live.id, Label(a, b, live.positive)) for (a, b), live in order
              if live.id != without]
    closure, updates = Closure.replay_effects(
        [lab for _, lab in labels], state.closure.concepts if concepts is None else concepts)
    return closure, labels, updates


def release(session: Session, state: ProjectState, pairs: Iterable[tuple[int, int]]) -> None:
    """End the leases on the labeled pool pairs (a label answers the question)."""
    row_of = state.pool.row_of
    pair_ids = [int(state.pool.ids[row]) for row in (row_of.get(p) for p in pairs)
                if row is not None]
    if pair_ids:
        session.execute(delete(Reservation).where(Reservation.project_id == state.project_id,
                                                  Reservation.pair_id.in_(pair_ids)))
