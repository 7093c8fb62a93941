"""The team actions migration: excluded annotators and re-asked pairs, up with data and down.

A database at the revision before it gets a project with two concepts; after the upgrade it
holds an exclusion and a re-asked pair that the service's read model reads; each is unique
per project (an annotator once, a pair once); the downgrade drops both tables and keeps the
project; upgrading again gives empty tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from app.db import downgrade, make_engine, migrate
from app.services.team import excluded_annotators, reasked_pairs
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "b7d3e9f1c2a4"
REVISION = "9d6b2e4f7a15"
T0 = datetime(2026, 12, 10, 1, 0, 0)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "team.db")
        return
    with postgres_database(require_postgres()) as database_url:
        yield database_url


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _insert_twice(url: str, sql: str) -> None:
    """``sql`` stores once; the same row again breaks the unique constraint."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text(sql), {"t": T0})
        with pytest.raises(Exception):  # noqa: B017 (the driver's IntegrityError)
            with conn.begin_nested():
                conn.execute(text(sql), {"t": T0})
    engine.dispose()


def test_team_actions_up_with_data_and_down(url: str) -> None:
    migrate(url, BEFORE)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                          "retraction_version, prediction_model, policy) VALUES "
                          "(7, 'p', :t, 1, 0, 'random_forest', 'consensus')"), {"t": T0})
        conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES "
                          "(1, 7, 'x'), (2, 7, 'y')"))
    engine.dispose()
    migrate(url, REVISION)
    _insert_twice(url, "INSERT INTO annotator_exclusions (project_id, annotator, role, "
                       "excluded_at) VALUES (7, 'bad', 'project', :t)")
    _insert_twice(url, "INSERT INTO reasked_pairs (project_id, a_id, b_id, annotator, "
                       "asked_at) VALUES (7, 1, 2, 'bad', :t)")
    engine = make_engine(url)
    with Session(engine) as session:
        assert excluded_annotators(session, 7) == frozenset({"bad"})
        assert reasked_pairs(session, 7, []) == [(1, 2)]
    engine.dispose()

    downgrade(url, BEFORE)
    assert not {"annotator_exclusions", "reasked_pairs"} & _tables(url)
    assert "projects" in _tables(url)
    migrate(url, REVISION)
    engine = make_engine(url)
    with engine.connect() as conn:
        for table in ("annotator_exclusions", "reasked_pairs"):
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0
    engine.dispose()
