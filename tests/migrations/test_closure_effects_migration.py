"""The closure_effects migration moves the closure exactly: pairs to lines of bits, and back.

A database at the revision before it gets, with plain SQL, projects whose concept ids
interleave (so a concept's ordinal, its rank by id in its project, differs from its id), live
and retracted labels, and the ``closure_pairs`` rows of the live labels' closure as the
reasoning core computes them. After the upgrade the lines must decode to the same pairs,
values and causes, and every live label must carry its cause; the downgrade must give back
the very same rows and table.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, text

from app.db import downgrade, make_engine, migrate
from reasoning.closure import Closure, ContradictionError, Label
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "5b2e8d1c7a93"
REVISION = "3e21b2dc0492"
NOW = datetime(2026, 12, 4, 1, 0, 0)

PairRow = tuple[int, int, int, bool, bool, int | None, int]
"""A ``closure_pairs`` row: project, a, b, positive, asserted, label_id, caused_by."""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "closure_effects.db")
        return
    with postgres_database(require_postgres()) as database_url:
        yield database_url


# -- the data at the revision before -------------------------------------------------------

class Project:
    """A project as inserted: its concepts (ids), labels and the expected closure."""

    def __init__(self, project_id: int) -> None:
        self.id = project_id
        self.concepts: list[int] = []
        # (label id, a, b, positive, retracted), in id order
        self.labels: list[tuple[int, int, int, bool, bool]] = []
        self.pairs: dict[tuple[int, int], PairRow] = {}
        self.label_cause: dict[int, int | None] = {}


def _make_projects(rng: random.Random) -> list[Project]:
    """Four projects: two labeled (one with many concepts), one without labels, one empty."""
    projects = [Project(i) for i in (3, 5, 8, 13)]
    sizes = {3: 23, 5: 11, 8: 4, 13: 0}
    # Concept ids interleave between the projects, with gaps.
    pending = [p for p in projects for _ in range(sizes[p.id])]
    rng.shuffle(pending)
    concept_id = 100
    for project in pending:
        concept_id += rng.choice((1, 1, 2, 7))
        project.concepts.append(concept_id)

    label_id = 1000
    for _ in range(160):
        project = rng.choice(projects[:2])
        label_id += rng.choice((1, 1, 3))
        _add_label(rng, project, label_id)
    for project in projects:
        _close(project)
    return projects


def _add_label(rng: random.Random, project: Project, label_id: int) -> None:
    live = {(a, b) for _, a, b, _, retracted in project.labels if not retracted}
    a, b = rng.sample(project.concepts, 2)
    if (a, b) in live:
        return
    # Mostly positive labels along a hidden order, so that chains (long lines) form.
    positive = a < b if rng.random() < 0.8 else rng.random() < 0.5
    retracted = rng.random() < 0.2
    if not retracted:
        labels = [Label(x, y, v) for _, x, y, v, r in project.labels if not r]
        try:
            Closure.replay([*labels, Label(a, b, positive)], project.concepts)
        except ContradictionError:
            retracted = True  # a contradiction can only have been a label retracted since
    project.labels.append((label_id, a, b, positive, retracted))


def _close(project: Project) -> None:
    live = [(label_id, Label(a, b, v)) for label_id, a, b, v, r in project.labels if not r]
    _, causes = Closure.replay([lab for _, lab in live], project.concepts)
    ids = [label_id for label_id, _ in live]
    for (a, b), cause in causes.items():
        asserted = None if cause.asserted_by is None else ids[cause.asserted_by]
        project.pairs[(a, b)] = (project.id, a, b, cause.positive, asserted is not None,
                                 asserted, ids[cause.caused_by])
    project.label_cause = {label_id: None for label_id, *_ in project.labels}
    for row in project.pairs.values():
        if row[5] is not None:
            project.label_cause[row[5]] = row[6]


def _insert(conn: Connection, projects: list[Project]) -> None:
    conn.execute(
        text("INSERT INTO projects (id, name, created_at, version, retraction_version,"
             " prediction_model) VALUES (:id, :name, :now, 1, 0, 'random_forest')"),
        [{"id": p.id, "name": f"project {p.id}", "now": NOW} for p in projects])
    concepts = [{"id": c, "project_id": p.id, "name": f"c{c}"}
                for p in projects for c in p.concepts]
    concepts.sort(key=lambda row: row["id"])
    conn.execute(text("INSERT INTO concepts (id, project_id, name)"
                      " VALUES (:id, :project_id, :name)"), concepts)
    labels = [{"id": i, "project_id": p.id, "a_id": a, "b_id": b, "positive": v, "now": NOW,
               "version": i, "retracted_at": NOW if r else None,
               "retracted_version": i + 1 if r else None}
              for p in projects for i, a, b, v, r in p.labels]
    labels.sort(key=lambda row: row["id"])
    conn.execute(text("INSERT INTO asserted_labels (id, project_id, a_id, b_id, positive,"
                      " created_at, version, retracted_at, retracted_version) VALUES"
                      " (:id, :project_id, :a_id, :b_id, :positive, :now, :version,"
                      " :retracted_at, :retracted_version)"), labels)
    conn.execute(text("INSERT INTO closure_pairs (project_id, a_id, b_id, positive, asserted,"
                      " label_id, caused_by) VALUES (:p, :a, :b, :v, :asserted, :label,"
                      " :cause)"),
                 [dict(zip(("p", "a", "b", "v", "asserted", "label", "cause"), row, strict=True))
                  for p in projects for row in p.pairs.values()])


# -- reading back --------------------------------------------------------------------------

def _closure_pairs(conn: Connection) -> set[PairRow]:
    return {(p, a, b, bool(v), bool(s), label, cause) for p, a, b, v, s, label, cause in
            conn.execute(text("SELECT project_id, a_id, b_id, positive, asserted, label_id,"
                              " caused_by FROM closure_pairs"))}


def _labels(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(text(
        "SELECT id, project_id, a_id, b_id, positive, created_at, version, retracted_at,"
        " retracted_version FROM asserted_labels ORDER BY id"))]


def _encode(ordinals: set[int]) -> bytes:
    n = sum(1 << k for k in ordinals)
    return zlib.compress(n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little"), 1)


def _decode(bits: bytes) -> int:
    raw = zlib.decompress(bits)
    n = int.from_bytes(raw, "little")
    # The documented encoding, to the byte: no trailing zero byte, compressed at level 1.
    assert raw == n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little")
    assert bits == zlib.compress(raw, 1)
    return n


def _effects(conn: Connection, projects: list[Project]
             ) -> dict[int, dict[tuple[int, int], tuple[bool, int]]]:
    """Per project, every pair of every line: ``(a, b) -> (positive, caused_by)``."""
    concepts = {p.id: p.concepts for p in projects}
    decided: dict[int, dict[tuple[int, int], tuple[bool, int]]] = {p.id: {} for p in projects}
    for project_id, label_id, positive, by_row, line_id, bits, count in conn.execute(text(
            "SELECT project_id, label_id, positive, by_row, line_id, bits, count"
            " FROM closure_effects")):
        by_id = sorted(concepts[project_id])  # ordinal -> concept id
        n = _decode(bytes(bits))
        assert n and count == n.bit_count()
        for k in range(n.bit_length()):
            if n >> k & 1:
                pair = (line_id, by_id[k]) if by_row else (by_id[k], line_id)
                assert pair not in decided[project_id], "a pair lies in one line only"
                decided[project_id][pair] = (bool(positive), label_id)
    return decided


def _transpose_some(conn: Connection, projects: list[Project]) -> int:
    """Store the lines of every other label as columns, as the service may: how many now."""
    concepts = {p.id: p.concepts for p in projects}
    columns: dict[tuple[int, int, bool, int], set[int]] = {}
    for project_id, label_id, positive, line_id, bits in conn.execute(text(
            "SELECT project_id, label_id, positive, line_id, bits FROM closure_effects"
            " WHERE by_row = :yes"), {"yes": True}).all():
        if label_id % 2:
            by_id = sorted(concepts[project_id])
            rank = {c: k for k, c in enumerate(by_id)}
            n = _decode(bytes(bits))
            for k in range(n.bit_length()):
                if n >> k & 1:
                    columns.setdefault((project_id, label_id, bool(positive), by_id[k]),
                                       set()).add(rank[line_id])
    conn.execute(text("DELETE FROM closure_effects WHERE by_row = :yes AND label_id % 2 = 1"),
                 {"yes": True})
    conn.execute(text("INSERT INTO closure_effects (project_id, label_id, positive, by_row,"
                      " line_id, bits, count) VALUES (:p, :label, :v, :no, :line, :bits, :n)"),
                 [{"p": p, "label": label, "v": v, "no": False, "line": line,
                   "bits": _encode(ordinals), "n": len(ordinals)}
                  for (p, label, v, line), ordinals in columns.items()])
    return len(columns)


def _schema(conn: Connection, table: str) -> Any:
    """What defines ``table``: its DDL on SQLite, else what the inspector sees."""
    if conn.dialect.name == "sqlite":
        return sorted(tuple(row) for row in conn.execute(
            text("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = :t"), {"t": table}))
    inspector = inspect(conn)
    return repr((inspector.get_columns(table), inspector.get_pk_constraint(table),
            sorted(inspector.get_foreign_keys(table), key=lambda fk: fk["name"]),
            inspector.get_indexes(table)))  # repr: types compare by identity


# -- the test --------------------------------------------------------------------------------

def test_closure_pairs_become_effects_and_come_back_unchanged(url: str) -> None:
    projects = _make_projects(random.Random(20261204))
    labeled = [p for p in projects if p.pairs]
    assert len(labeled) == 2 and all(p.id in (3, 5) for p in labeled)
    assert any(r for p in labeled for *_, r in p.labels), "some labels are retracted"
    assert any(row[5] is not None and row[5] != row[6] for p in labeled
               for row in p.pairs.values()), "some label asserts a pair decided before it"
    assert max(sum(1 for (a, _) in p.pairs if a == x) for p in labeled for x in p.concepts) > 8
    assert max(sum(1 for (_, b) in p.pairs if b == y) for p in labeled for y in p.concepts) > 8
    original = {row for p in projects for row in p.pairs.values()}

    migrate(url, BEFORE)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            _insert(conn, projects)
        with engine.connect() as conn:
            assert _closure_pairs(conn) == original
            labels = _labels(conn)
            pairs_schema = _schema(conn, "closure_pairs")

        migrate(url, REVISION)
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            assert "closure_effects" in tables and "closure_pairs" not in tables
            decided = _effects(conn, projects)
            assert not conn.execute(text("SELECT count(*) FROM closure_effects"
                                         " WHERE by_row = :no"), {"no": False}).scalar()
            for project in projects:
                assert decided[project.id] == {
                    (a, b): (v, cause) for _, a, b, v, _, _, cause in project.pairs.values()}
            causes = dict(conn.execute(text("SELECT id, caused_by FROM asserted_labels")).all())
            assert causes == {i: c for p in projects for i, c in p.label_cause.items()}
            assert _labels(conn) == labels
            first = sorted(tuple(row) for row in conn.execute(text(
                "SELECT * FROM closure_effects")))
        with engine.begin() as conn:  # the downgrade expands columns too
            assert _transpose_some(conn, projects) > 10
        with engine.connect() as conn:
            assert _effects(conn, projects) == decided

        downgrade(url, BEFORE)
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            assert "closure_pairs" in tables and "closure_effects" not in tables
            assert "caused_by" not in {c["name"] for c in inspect(conn).get_columns(
                "asserted_labels")}
            assert _closure_pairs(conn) == original
            assert _labels(conn) == labels
            assert _schema(conn, "closure_pairs") == pairs_schema

        migrate(url, REVISION)  # and once more: the same lines
        with engine.connect() as conn:
            assert sorted(tuple(row) for row in conn.execute(text(
                "SELECT * FROM closure_effects"))) == first
    finally:
        engine.dispose()
