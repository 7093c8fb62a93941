"""The concept-tombstones migration: up with data, a tombstone the service reads, and back down.

A database at the revision before it gets, with plain SQL, a consensus project of three
concepts with answers and a disagreement on each of two pairs. After the upgrade every concept
is live (no ``deleted_at``), the disagreements' page index exists, and a concept made a
tombstone keeps its answers and disagreement while the service's state leaves it out and its
name can be registered again. The downgrade deletes the tombstone as the older schema deleted a
concept (its answers and disagreement go with it), keeps everything else as it was, and drops
the columns and the index; upgrading again works.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from app.db import downgrade, make_engine, migrate
from app.services.state import ProjectState, load_rows
from models.tables import tombstone_name
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "f1a2b3c4d5e6"
REVISION = "b7d3e9f1c2a4"
T0 = datetime(2026, 12, 10, 1, 0, 0)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "tombstones.db")
        return
    with postgres_database(require_postgres()) as database_url:
        yield database_url


def _fill(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                          "retraction_version, prediction_model, policy) VALUES "
                          "(7, 'p', :t, 5, 0, 'random_forest', 'consensus')"), {"t": T0})
        conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES (:id, 7, :name)"),
                     [{"id": c, "name": f"c{c}"} for c in (11, 12, 13)])
        conn.execute(text(
            "INSERT INTO answers (id, project_id, a_id, b_id, positive, annotator, role, "
            "source, outcome, check_question, created_at) VALUES "
            "(:id, 7, :a, :b, :pos, :ann, 'annotator', 'api', 'contested', false, :t)"),
            [{"id": k, "a": a, "b": b, "pos": pos, "ann": who, "t": T0 + timedelta(minutes=k)}
             for k, a, b, pos, who in ((1, 11, 12, True, "ann"), (2, 11, 12, False, "bob"),
                                       (3, 11, 13, True, "ann"), (4, 11, 13, False, "bob"))])
        conn.execute(text(
            "INSERT INTO disagreements (id, project_id, a_id, b_id, opened_at) VALUES "
            "(:id, 7, 11, :b, :t)"), [{"id": 1, "b": 12, "t": T0}, {"id": 2, "b": 13, "t": T0}])
    engine.dispose()


def _rows(url: str, query: str) -> list[tuple]:
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(text(query)).all()]
    engine.dispose()
    return rows


def _schema(url: str) -> tuple[set[str], set[str]]:
    """The columns of ``concepts`` and the indexes of ``disagreements``."""
    engine = make_engine(url)
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("concepts")}
        indexes = {i["name"] for i in inspect(conn).get_indexes("disagreements")}
    engine.dispose()
    return columns, indexes


def test_tombstones_up_with_data_and_down(url: str) -> None:
    migrate(url, BEFORE)
    _fill(url)
    answers = "SELECT id, a_id, b_id, positive FROM answers ORDER BY id"
    before = _rows(url, answers)
    migrate(url, REVISION)
    columns, indexes = _schema(url)
    assert {"deleted_at", "deleted_name"} <= columns
    assert "ix_disagreements_project_id_id" in indexes
    assert _rows(url, "SELECT id, name, deleted_at, deleted_name FROM concepts ORDER BY id") == [
        (11, "c11", None, None), (12, "c12", None, None), (13, "c13", None, None)]
    engine = make_engine(url)
    with engine.begin() as conn:  # c13 deleted, as the service does it
        conn.execute(text("UPDATE concepts SET deleted_at = :t, deleted_name = name, "
                          "name = :gone WHERE id = 13"), {"t": T0, "gone": tombstone_name(13)})
        conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES "
                          "(14, 7, 'c13')"))  # its name, given again
    with Session(engine) as session:
        state = ProjectState(7)
        load_rows(session, state)
        assert state.id_of == {"c11": 11, "c12": 12, "c13": 14}
    engine.dispose()
    assert _rows(url, answers) == before  # the tombstone's answers kept
    assert _rows(url, "SELECT id FROM disagreements ORDER BY id") == [(1,), (2,)]

    downgrade(url, BEFORE)
    columns, indexes = _schema(url)
    assert not {"deleted_at", "deleted_name"} & columns
    assert "ix_disagreements_project_id_id" not in indexes
    assert _rows(url, "SELECT id, name FROM concepts ORDER BY id") == [
        (11, "c11"), (12, "c12"), (14, "c13")]
    assert _rows(url, answers) == before[:2]  # the tombstone's went with it, as they used to
    assert _rows(url, "SELECT id FROM disagreements ORDER BY id") == [(1,)]
    migrate(url, REVISION)  # and up again
    assert _rows(url, "SELECT count(*) FROM concepts WHERE deleted_at IS NULL") == [(3,)]
