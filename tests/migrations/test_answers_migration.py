"""The answers migration turns labels and refused answers into answers, and back.

A database at the revision before it gets, with plain SQL, a project with live and retracted
labels of several annotators and refused answers. After the upgrade every label is the answer
that asserted it (same pair, value, annotator, time, retraction) and every refused answer an
answer refused, in the order of time; the projects get the ``strict`` policy. The downgrade
gives back the refused answers exactly and drops the new columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from app.db import downgrade, make_engine, migrate
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "7d4e1a9c2b60"
REVISION = "a3c5e7f9b812"
T0 = datetime(2026, 12, 6, 1, 0, 0)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "answers.db")
        return
    with postgres_database(require_postgres()) as database_url:
        yield database_url


LABELS = [  # id, a, b, positive, annotator, minutes, retracted
    (1, 11, 12, True, "ann", 0, False),
    (2, 12, 13, True, None, 2, False),
    (3, 11, 13, False, "bo", 4, True),
    (4, 13, 14, False, "bo", 6, False),
]
REFUSED = [  # id, a, b, positive, annotator, minutes
    (1, 11, 13, False, "cy", 3),
    (2, 12, 11, True, None, 7),
]


def _fill(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                          "retraction_version, prediction_model) VALUES "
                          "(7, 'p', :t, 5, 3, 'random_forest')"), {"t": T0})
        conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES "
                          "(:id, 7, :name)"),
                     [{"id": c, "name": f"c{c}"} for c in (11, 12, 13, 14)])
        conn.execute(text(
            "INSERT INTO asserted_labels (id, project_id, a_id, b_id, positive, annotator, "
            "created_at, version, retracted_at, retracted_version, caused_by) VALUES "
            "(:id, 7, :a, :b, :pos, :ann, :t, :id, :rt, :rv, :cause)"),
            [{"id": i, "a": a, "b": b, "pos": pos, "ann": ann, "t": T0 + timedelta(minutes=m),
              "rt": T0 + timedelta(minutes=9) if gone else None, "rv": 5 if gone else None,
              "cause": None if gone else i} for i, a, b, pos, ann, m, gone in LABELS])
        conn.execute(text(
            "INSERT INTO refused_answers (id, project_id, a_id, b_id, positive, annotator, "
            "created_at) VALUES (:id, 7, :a, :b, :pos, :ann, :t)"),
            [{"id": i, "a": a, "b": b, "pos": pos, "ann": ann, "t": T0 + timedelta(minutes=m)}
             for i, a, b, pos, ann, m in REFUSED])
    engine.dispose()


def test_labels_and_refusals_become_answers_in_time_order_and_back(url: str) -> None:
    migrate(url, BEFORE)
    _fill(url)
    migrate(url, REVISION)
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT a_id, b_id, positive, annotator, outcome, label_id, role, source, "
            "retracted_at IS NOT NULL FROM answers WHERE project_id = 7 ORDER BY id")).all()
        policy = conn.execute(text("SELECT policy FROM projects WHERE id = 7")).scalar_one()
    expected = sorted(
        [(m, 0, (a, b, pos, ann, "asserted", i, "annotator", "api", gone))
         for i, a, b, pos, ann, m, gone in LABELS]
        + [(m, 1, (a, b, pos, ann, "refused", None, "annotator", "api", False))
           for i, a, b, pos, ann, m in REFUSED])
    assert [tuple(r) for r in rows] == [e[2] for e in expected]
    assert policy == "strict"
    engine.dispose()

    downgrade(url, BEFORE)
    engine = make_engine(url)
    with engine.connect() as conn:
        refused = conn.execute(text(
            "SELECT a_id, b_id, positive, annotator FROM refused_answers ORDER BY id")).all()
        tables = set(inspect(conn).get_table_names())
        columns = {c["name"] for c in inspect(conn).get_columns("projects")}
    assert [tuple(r) for r in refused] == [(a, b, pos, ann) for _, a, b, pos, ann, _ in REFUSED]
    assert "answers" not in tables
    assert not {"policy", "question", "reviewer_key_hash"} & columns
    engine.dispose()
