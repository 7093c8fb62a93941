"""The review-history migration gives every closed disagreement a reason and keeps its
resolution, and goes back.

A database at the revision before it gets, with plain SQL, a consensus project with an open
disagreement, one closed by answers and one closed by a reviewer's answer. After the upgrade the
closed ones say why (``reviewer`` where a resolution is linked, else ``answers``), the open one
says nothing, and the resolved one lists its resolution. The downgrade drops the new table and
columns and keeps every disagreement as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from app.db import downgrade, make_engine, migrate
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "c4d2f1a7e9b3"
REVISION = "e8b4c2d6a1f9"
T0 = datetime(2026, 12, 8, 1, 0, 0)

DISAGREEMENTS = [  # id, a, b, closed (minutes), resolution answer
    (1, 11, 12, None, None),
    (2, 12, 13, 5, None),
    (3, 11, 13, 7, 3),
]


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "review.db")
        return
    with postgres_database(require_postgres()) as database_url:
        yield database_url


def _fill(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                          "retraction_version, prediction_model, policy) VALUES "
                          "(7, 'p', :t, 5, 0, 'random_forest', 'consensus')"), {"t": T0})
        conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES "
                          "(:id, 7, :name)"),
                     [{"id": c, "name": f"c{c}"} for c in (11, 12, 13)])
        conn.execute(text(
            "INSERT INTO answers (id, project_id, a_id, b_id, positive, annotator, role, "
            "source, outcome, check_question, created_at) VALUES "
            "(:id, 7, :a, :b, :pos, :ann, :role, :src, 'contested', false, :t)"),
            [{"id": 1, "a": 11, "b": 13, "pos": True, "ann": "ann", "role": "annotator",
              "src": "api", "t": T0},
             {"id": 2, "a": 11, "b": 13, "pos": False, "ann": "bob", "role": "annotator",
              "src": "api", "t": T0 + timedelta(minutes=1)},
             {"id": 3, "a": 11, "b": 13, "pos": False, "ann": "rev", "role": "reviewer",
              "src": "review", "t": T0 + timedelta(minutes=7)}])
        conn.execute(text(
            "INSERT INTO disagreements (id, project_id, a_id, b_id, opened_at, closed_at, "
            "resolution_id) VALUES (:id, 7, :a, :b, :opened, :closed, :res)"),
            [{"id": i, "a": a, "b": b, "opened": T0,
              "closed": None if m is None else T0 + timedelta(minutes=m), "res": res}
             for i, a, b, m, res in DISAGREEMENTS])
    engine.dispose()


def _disagreements(url: str, columns: str) -> list[tuple]:
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {columns} FROM disagreements ORDER BY id")).all()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_closed_disagreements_get_a_reason_and_their_resolution_and_back(url: str) -> None:
    migrate(url, BEFORE)
    _fill(url)
    before = _disagreements(url, "id, a_id, b_id, opened_at, closed_at, resolution_id")
    migrate(url, REVISION)
    assert _disagreements(url, "id, closed_reason, reopened_at") == [
        (1, None, None), (2, "answers", None), (3, "reviewer", None)]
    engine = make_engine(url)
    with engine.connect() as conn:
        links = conn.execute(text("SELECT disagreement_id, answer_id FROM "
                                  "disagreement_resolutions ORDER BY id")).all()
    engine.dispose()
    assert [tuple(r) for r in links] == [(3, 3)]
    assert _disagreements(url, "id, a_id, b_id, opened_at, closed_at, resolution_id") == before

    downgrade(url, BEFORE)
    engine = make_engine(url)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        columns = {c["name"] for c in inspect(conn).get_columns("disagreements")}
    engine.dispose()
    assert "disagreement_resolutions" not in tables
    assert not {"closed_reason", "reopened_at"} & columns
    assert _disagreements(url, "id, a_id, b_id, opened_at, closed_at, resolution_id") == before
    migrate(url, REVISION)  # and up again
    assert _disagreements(url, "closed_reason") == [(None,), ("answers",), ("reviewer",)]
