"""Listing decided pairs from the stored closure: newest deciding label first, then by names."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, literal, null, select, union_all
from sqlalchemy.orm import Session, aliased

from app.schemas import label_value
from models import AssertedLabel, ClosurePair, Concept

__all__ = ["list_labels"]


def list_labels(session: Session, project_id: int, *, source: str, label: str | None,
                include_retracted: bool, limit: int | None, offset: int,
                caused_by: int | None = None) -> tuple[list[dict[str, Any]], int]:
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
        if caused_by is not None:
            query = query.where(ClosurePair.caused_by == caused_by)
        parts.append(query)
    if include_retracted and source != "inferred" and caused_by is None:
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
            "a": row.a, "b": row.b, "label": label_value(row.positive), "source": source_name,
            "id": row.id if row.asserted else None, "caused_by": row.caused_by,
            "annotator": row.annotator if row.asserted else None,
            "created_at": row.created_at if row.asserted else None,
            "retracted_at": row.retracted_at,
        })
    return items, total if limit is not None else len(items)
