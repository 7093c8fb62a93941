"""Listing decided pairs from the stored closure: newest deciding label first, then by names.

Every decided pair belongs to one label: its own asserted label if it has a live one, else the
label whose stored effect decided it (its ``caused_by``). The labels are walked from the newest
id down; each label's pairs come out of its stored lines (:mod:`app.services.labels.store`)
sorted by the names of ``a`` then ``b`` (byte order, the same on every database), one concept
of ``a`` at a time, so a page costs the lines of the labels it reaches, never the whole
closure. A page ends with a keyset cursor (``next``) that the next page starts after, or an
``offset`` may skip whole labels by their counts.
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.schemas import label_value
from app.services.cursors import LABELS
from app.services.labels.confidence import pair_confidence
from app.services.labels.store import decode
from models import AssertedLabel, ClosureEffect, Concept, Project
from reasoning.closure import bit_positions as _bits

__all__ = ["Filters", "Snapshot", "iter_labels", "list_labels", "snapshot", "with_confidence"]


@dataclass(frozen=True)
class _Label:
    id: int
    a: int  # ordinals
    b: int
    positive: bool
    annotator: str | None
    created_at: datetime | None
    retracted_at: datetime | None
    caused_by: int | None


@dataclass(frozen=True)
class Filters:
    source: str = "all"
    label: str | None = None
    include_retracted: bool = False
    caused_by: int | None = None

    def value(self, positive: bool) -> bool:
        return self.label is None or (self.label == "positive") == positive


@dataclass
class Snapshot:
    """A project's concepts, labels and effect counts at one version (cached per version)."""

    project_id: int
    version: int
    names: list[str]  # by ordinal
    ids: list[int]  # by ordinal
    rank: np.ndarray  # ordinal -> rank of its name
    by_rank: list[str]  # the names sorted
    labels: list[_Label]  # newest first, retracted ones included
    asserted: dict[tuple[int, int], int]  # live pair (ordinals) -> its label id
    counts: dict[tuple[int, bool], int]  # (label id, positive) -> inferred pairs listed there

    def own(self, lab: _Label, filters: Filters) -> bool:
        """Whether the label's own row (asserted or retracted) is listed."""
        if not filters.value(lab.positive):
            return False
        if lab.retracted_at is not None:
            return (filters.include_retracted and filters.source != "inferred"
                    and filters.caused_by is None)
        if filters.source == "inferred":
            return False
        return filters.caused_by is None or lab.caused_by == filters.caused_by

    def inferred(self, lab: _Label, filters: Filters) -> int:
        if filters.source == "asserted" or filters.caused_by not in (None, lab.id):
            return 0
        return sum(self.counts.get((lab.id, v), 0) for v in (True, False) if filters.value(v))

    def count(self, lab: _Label, filters: Filters) -> int:
        return int(self.own(lab, filters)) + self.inferred(lab, filters)


_cache: dict[tuple[int, str, int], Snapshot] = {}
_cache_lock = threading.Lock()
_CACHED = 8


def snapshot(session: Session, project_id: int) -> Snapshot:
    """The project's listing snapshot at the version the session reads (cached per version)."""
    version = session.scalar(select(Project.version).where(Project.id == project_id))
    engine = session.get_bind().engine
    key = (id(engine), str(engine.url), project_id)  # one process may serve several databases
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.version == version:
        return cached
    concepts = session.execute(select(Concept.id, Concept.name)
                               .where(Concept.project_id == project_id,
                                      Concept.deleted_at.is_(None))
                               .order_by(Concept.id)).all()
    ids = [c for c, _ in concepts]
    names = [n for _, n in concepts]
    ordinal = {c: k for k, c in enumerate(ids)}
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    labels = [
        _Label(row.id, ordinal[row.a_id], ordinal[row.b_id], row.positive, row.annotator,
               row.created_at, row.retracted_at, row.caused_by)
        for row in session.execute(
            select(AssertedLabel.id, AssertedLabel.a_id, AssertedLabel.b_id,
                   AssertedLabel.positive, AssertedLabel.annotator, AssertedLabel.created_at,
                   AssertedLabel.retracted_at, AssertedLabel.caused_by)
            .where(AssertedLabel.project_id == project_id)
            .order_by(AssertedLabel.id.desc()))
        if row.a_id in ordinal and row.b_id in ordinal  # else retracted, on a deleted concept
    ]
    counts: dict[tuple[int, bool], int] = {
        (label_id, positive): int(total) for label_id, positive, total in session.execute(
            select(ClosureEffect.label_id, ClosureEffect.positive, func.sum(ClosureEffect.count))
            .where(ClosureEffect.project_id == project_id)
            .group_by(ClosureEffect.label_id, ClosureEffect.positive))
    }
    asserted: dict[tuple[int, int], int] = {}
    for lab in labels:
        if lab.retracted_at is None:
            asserted[(lab.a, lab.b)] = lab.id
            if lab.caused_by is not None:  # listed under its own label, not its cause
                counted = (lab.caused_by, lab.positive)
                counts[counted] = counts.get(counted, 0) - 1
    snap = Snapshot(project_id, int(version or 0), names, ids, rank,
                    [names[k] for k in order], labels, asserted, counts)
    with _cache_lock:
        if len(_cache) >= _CACHED and key not in _cache:
            _cache.pop(next(iter(_cache)))
        _cache[key] = snap
    return snap


# ---------------------------------------------------------------------------- walking
def _item(snap: Snapshot, a: int, b: int, positive: bool, source: str,
          lab: _Label | None, caused_by: int | None) -> dict[str, Any]:
    return {"a": snap.names[a], "b": snap.names[b], "label": label_value(positive),
            "source": source, "id": lab.id if lab is not None else None,
            "caused_by": caused_by,
            "annotator": lab.annotator if lab is not None else None,
            "created_at": lab.created_at if lab is not None else None,
            "retracted_at": lab.retracted_at if lab is not None else None}


def _effect_pairs(session: Session, snap: Snapshot, lab: _Label, filters: Filters,
                  after: tuple[str, str] | None) -> Iterator[tuple[int, int, int, int, bool]]:
    """The label's inferred pairs ``(rank a, rank b, a, b, positive)`` sorted by names."""
    rows: dict[int, list[tuple[bool, int]]] = {}
    cols: list[tuple[bool, int, int]] = []
    for positive, by_row, line_id, blob in session.execute(
            select(ClosureEffect.positive, ClosureEffect.by_row, ClosureEffect.line_id,
                   ClosureEffect.bits)
            .where(ClosureEffect.project_id == snap.project_id,
                   ClosureEffect.label_id == lab.id)):
        if not filters.value(positive):
            continue
        line = bisect_left(snap.ids, line_id)
        if by_row:
            rows.setdefault(line, []).append((positive, decode(blob)))
        else:
            cols.append((positive, line, decode(blob)))
    union = 0
    for _, _, bits in cols:
        union |= bits
    firsts = np.array(sorted(set(rows) | set(_bits(union))), dtype=np.int64)
    firsts = firsts[np.argsort(snap.rank[firsts], kind="stable")] if len(firsts) else firsts
    start = 0
    if after is not None:  # skip every a before the cursor's a
        a_names = [snap.names[a] for a in firsts.tolist()]
        start = bisect_left(a_names, after[0])
    rank, asserted = snap.rank, snap.asserted
    for a in firsts[start:].tolist():
        seconds: list[tuple[int, int, bool]] = []
        for positive, bits in rows.get(a, ()):
            seconds += [(int(rank[b]), b, positive) for b in _bits(bits)]
        for positive, line, bits in cols:
            if bits >> a & 1:
                seconds.append((int(rank[line]), line, positive))
        seconds.sort()
        a_name = snap.names[a]
        for rank_b, b, positive in seconds:
            if (a, b) in asserted:
                continue
            if after is not None and (a_name, snap.names[b]) <= after:
                continue
            yield int(rank[a]), rank_b, a, b, positive


def _label_items(session: Session, snap: Snapshot, lab: _Label, filters: Filters,
                 after: tuple[str, str] | None) -> Iterator[dict[str, Any]]:
    """The items listed under ``lab``, by names, after the name pair ``after`` if given."""
    own: list[tuple[int, int, int, int, bool]] = []
    if snap.own(lab, filters) and (after is None
                                   or (snap.names[lab.a], snap.names[lab.b]) > after):
        own.append((int(snap.rank[lab.a]), int(snap.rank[lab.b]), lab.a, lab.b, lab.positive))
    effects: Iterator[tuple[int, int, int, int, bool]] = iter(())
    if snap.inferred(lab, filters):
        effects = _effect_pairs(session, snap, lab, filters, after)
    for _, _, a, b, positive in heapq.merge(own, effects):
        if own and (a, b) == (lab.a, lab.b):
            if lab.retracted_at is not None:
                yield _item(snap, a, b, positive, "retracted", lab, None)
            else:
                yield _item(snap, a, b, positive, "asserted", lab, lab.caused_by)
        else:
            yield _item(snap, a, b, positive, "inferred", None, lab.id)


def iter_labels(session: Session, snap: Snapshot, filters: Filters, *, offset: int = 0,
                after: tuple[int, str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Every listed item in order, from ``offset`` or after the cursor ``after``."""
    for lab in snap.labels:
        within: tuple[str, str] | None = None
        if after is not None:
            if lab.id > after[0]:
                continue
            if lab.id == after[0]:
                within = (after[1], after[2])
        elif offset:
            count = snap.count(lab, filters)
            if offset >= count:
                offset -= count
                continue
        items = _label_items(session, snap, lab, filters, within)
        for item in items:
            if offset:
                offset -= 1
                continue
            yield item


def list_labels(session: Session, project_id: int, *, source: str, label: str | None,
                include_retracted: bool, limit: int | None, offset: int,
                caused_by: int | None = None, after: str | None = None
                ) -> tuple[list[dict[str, Any]], int, str | None]:
    """One page of decided pairs (and optionally retracted labels), newest deciding label
    first: the items, the total and the cursor of the next page (None at the end)."""
    snap = snapshot(session, project_id)
    filters = Filters(source, label, include_retracted, caused_by)
    total = sum(snap.count(lab, filters) for lab in snap.labels)
    cursor = LABELS.decode(after) if after is not None else None
    stream = iter_labels(session, snap, filters, offset=0 if cursor else offset, after=cursor)
    items: list[dict[str, Any]] = []
    for item in stream:
        if limit is not None and len(items) == limit:
            last = items[-1]
            key = last["id"] if last["source"] != "inferred" else last["caused_by"]
            following = LABELS.encode(int(key), last["a"], last["b"])
            return list(with_confidence(session, snap, items)), total, following
        items.append(item)
    return list(with_confidence(session, snap, items)), total, None


def with_confidence(session: Session, snap: Snapshot,
                    items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items, each decided pair with its ``confidence`` and ``contested``
    (:mod:`app.services.labels.confidence`; a retracted label has neither)."""
    known = None
    id_of = dict(zip(snap.names, snap.ids, strict=True))
    for item in items:
        if item["source"] != "retracted":
            known = known or pair_confidence(session, snap.project_id)
            a_id, b_id = id_of[item["a"]], id_of[item["b"]]
            item["confidence"] = known.of(a_id, b_id)
            item["contested"] = known.is_contested(a_id, b_id)
        yield item
