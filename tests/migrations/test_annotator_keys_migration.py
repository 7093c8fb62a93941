"""The annotator keys migration: a table of hashed keys, up with data and back down.

A database at the revision before it gets a project; after the upgrade it holds annotator
keys (a live one and a retired one) that the ORM reads; the downgrade drops the table and
keeps the project; upgrading again gives an empty table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from app.db import downgrade, make_engine, migrate
from app.security import hash_key, project_of_key
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

BEFORE = "e8b4c2d6a1f9"
REVISION = "f1a2b3c4d5e6"
T0 = datetime(2026, 12, 9, 1, 0, 0)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "keys.db")
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


def test_annotator_keys_up_with_data_and_down(url: str) -> None:
    migrate(url, BEFORE)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                          "retraction_version, prediction_model, policy) VALUES "
                          "(7, 'p', :t, 1, 0, 'random_forest', 'consensus')"), {"t": T0})
    engine.dispose()
    migrate(url, REVISION)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO annotator_keys (project_id, annotator, key_hash, created_at, "
            "retired_at) VALUES (7, 'ana', :old, :t, :t), (7, 'ana', :new, :t, NULL)"),
            {"old": hash_key("old-key"), "new": hash_key("new-key"), "t": T0})
    with Session(engine) as session:
        holder = project_of_key(session, "new-key")
        assert holder is not None and (holder.project_id, holder.role, holder.annotator) == (
            7, "annotator", "ana")
        assert project_of_key(session, "old-key") is None  # retired
    with engine.begin() as conn:  # the key's hash is unique
        with pytest.raises(Exception):  # noqa: B017 (the driver's IntegrityError)
            with conn.begin_nested():
                conn.execute(text(
                    "INSERT INTO annotator_keys (project_id, annotator, key_hash, created_at) "
                    "VALUES (7, 'bo', :new, :t)"), {"new": hash_key("new-key"), "t": T0})
    engine.dispose()

    downgrade(url, BEFORE)
    assert "annotator_keys" not in _tables(url)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(select(text("name")).select_from(text("projects"))).scalars().all() \
            == ["p"]
    engine.dispose()
    migrate(url, REVISION)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM annotator_keys")).scalar_one() == 0
    engine.dispose()
