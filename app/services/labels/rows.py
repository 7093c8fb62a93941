"""The stored closure: one ``closure_pairs`` row per decided pair, with its cause.

Only the label writers and the retraction touch these rows, through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, select
from sqlalchemy.orm import Session

from app.services.state import ProjectState
from models import ClosurePair, Reservation
from reasoning.closure import Update

__all__ = ["Row", "asserted_row", "inferred_rows", "insert_rows", "mark_asserted", "release",
           "sync_rows"]

_table = cast(Table, ClosurePair.__table__)

Row = tuple[bool, bool, int | None, int]
"""A decided pair as stored: ``(positive, asserted, label_id, caused_by)``."""


def inferred_rows(project_id: int, update: Update, caused_by: int) -> list[dict[str, Any]]:
    """The rows of the pairs that ``update`` newly decided, caused by label ``caused_by``."""
    return [{"project_id": project_id, "a_id": a, "b_id": b, "positive": positive,
             "asserted": False, "label_id": None, "caused_by": caused_by}
            for positive, pairs in ((True, update.positive), (False, update.negative))
            for a, b in pairs]


def asserted_row(project_id: int, a_id: int, b_id: int, positive: bool,
                 label_id: int) -> dict[str, Any]:
    return {"project_id": project_id, "a_id": a_id, "b_id": b_id, "positive": positive,
            "asserted": True, "label_id": label_id, "caused_by": label_id}


def insert_rows(session: Session, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(_table.insert(), rows)


_KEY = and_(_table.c.project_id == bindparam("k_project"), _table.c.a_id == bindparam("k_a"),
            _table.c.b_id == bindparam("k_b"))
_MARK_ASSERTED = _table.update().where(_KEY).values(asserted=True, label_id=bindparam("v_label"))
_REWRITE = _table.update().where(_KEY).values(
    asserted=bindparam("v_asserted"), label_id=bindparam("v_label"),
    caused_by=bindparam("v_caused_by"), positive=bindparam("v_positive"))
_DELETE = _table.delete().where(_KEY)


def mark_asserted(session: Session, project_id: int,
                  labels: Iterable[tuple[int, int, int]]) -> None:
    """An inferred pair gets an asserted label ``(a_id, b_id, label_id)``; its cause stays."""
    marks = [{"k_project": project_id, "k_a": a, "k_b": b, "v_label": label_id}
             for a, b, label_id in labels]
    if marks:
        session.execute(_MARK_ASSERTED, marks)


def sync_rows(session: Session, project_id: int, rows: Mapping[tuple[int, int], Row]) -> None:
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
        session.execute(_DELETE, gone)
    if changed:
        session.execute(_REWRITE, changed)
    insert_rows(session, added)


def release(session: Session, state: ProjectState, pairs: Iterable[tuple[int, int]]) -> None:
    """End the leases on the labeled pool pairs (a label answers the question)."""
    row_of = state.pool.row_of
    pair_ids = [int(state.pool.ids[row]) for row in (row_of.get(p) for p in pairs)
                if row is not None]
    if pair_ids:
        session.execute(delete(Reservation).where(Reservation.project_id == state.project_id,
                                                  Reservation.pair_id.in_(pair_ids)))
