"""Export every decided pair of a project: CSV, JSON, or GraphML of the positive relation."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import networkx as nx
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services.labels import list_labels
from models import Concept

__all__ = ["export", "neutralise_cell"]

CSV_COLUMNS = ["a", "b", "label", "source", "id", "caused_by", "annotator"]
# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json",
               "graphml": "application/graphml+xml"}


def _decided(session: Session, project_id: int) -> list[dict[str, Any]]:
    items, _ = list_labels(session, project_id, source="all", label=None,
                           include_retracted=False, limit=None, offset=0)
    return items


def neutralise_cell(value: Any) -> Any:
    """The cell, with a leading ``'`` when a spreadsheet would read it as a formula.

    Example
    -------
    >>> neutralise_cell("=1+1"), neutralise_cell("limit"), neutralise_cell(7)
    ("'=1+1", 'limit', 7)
    """
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _csv(items: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for item in items:
        writer.writerow({k: "" if item.get(k) is None else neutralise_cell(item[k])
                         for k in CSV_COLUMNS})
    return buffer.getvalue().encode("utf-8")


def _json(project: dict[str, Any], items: list[dict[str, Any]]) -> bytes:
    body = {"project": project, "items": [{k: item.get(k) for k in CSV_COLUMNS}
                                          for item in items]}
    return json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")


def _graphml(session: Session, project_id: int, items: list[dict[str, Any]]) -> bytes:
    graph = nx.DiGraph()
    for name in session.scalars(select(Concept.name).where(Concept.project_id == project_id)
                                .order_by(Concept.id)):
        graph.add_node(name)
    for item in items:
        if item["label"] == "positive":
            graph.add_edge(item["a"], item["b"], asserted=item["source"] == "asserted",
                           caused_by=int(item["caused_by"]))
    buffer = io.BytesIO()
    nx.write_graphml(graph, buffer, encoding="utf-8")
    return buffer.getvalue()


def export(session: Session, project: dict[str, Any], fmt: str) -> tuple[bytes, str]:
    """The export's bytes and media type."""
    items = _decided(session, project["id"])
    if fmt == "csv":
        return _csv(items), MEDIA_TYPES[fmt]
    if fmt == "json":
        return _json(project, items), MEDIA_TYPES[fmt]
    return _graphml(session, project["id"], items), MEDIA_TYPES[fmt]
