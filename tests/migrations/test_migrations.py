"""The Alembic migrations: from empty to head and back, matching the ORM, safe to race."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db import downgrade, make_engine, migrate
from models import Base
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"projects", "concepts", "pool_pairs", "asserted_labels", "closure_effects",
          "suggestions", "reservations", "idempotency_records", "answers",
          "concept_texts", "concept_links", "import_stages", "staged_labels", "staged_effects",
          "staged_concepts", "jobs", "disagreements", "check_questions",
          "disagreement_resolutions", "annotator_keys", "annotator_exclusions",
          "reasked_pairs", "agreement_views"}


@pytest.fixture
def empty_url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "migrations.db")
        return
    with postgres_database(require_postgres()) as url:
        yield url


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_round_trip(empty_url: str) -> None:
    migrate(empty_url)
    assert _tables(empty_url) == TABLES
    downgrade(empty_url)
    assert _tables(empty_url) == set()
    migrate(empty_url)
    assert _tables(empty_url) == TABLES


def test_migrated_schema_matches_the_orm_models(empty_url: str) -> None:
    migrate(empty_url)
    engine = make_engine(empty_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_processes_starting_together_migrate_once_without_error(empty_url: str) -> None:
    # Real processes: Alembic's context is per process, as with `sporal serve` started twice.
    code = "import sys; from app.db import migrate; migrate(sys.argv[1])"
    processes = [subprocess.Popen([sys.executable, "-c", code, empty_url], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for _ in range(3)]
    outputs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], outputs
    assert _tables(empty_url) == TABLES


def test_downgrading_one_step_at_a_time_keeps_every_project_row(empty_url: str) -> None:
    """A step that alters ``projects`` must not rebuild it: on SQLite with foreign keys on,
    dropping the old table cascades to concepts and labels."""
    from sqlalchemy import text

    from app.db import alembic_config

    migrate(empty_url)
    engine = make_engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO projects (id, name, created_at, version, "
                              "retraction_version, prediction_model, features_computed, "
                              "corpus_version) VALUES (1, 'p', '2026-01-01 00:00:00', 1, 0, "
                              "'random_forest', false, 0)"))
            conn.execute(text("INSERT INTO concepts (id, project_id, name) VALUES "
                              "(1, 1, 'a'), (2, 1, 'b')"))
        from alembic import command
        from alembic.script import ScriptDirectory

        config = alembic_config(empty_url)
        steps = [s.revision for s in ScriptDirectory.from_config(config).walk_revisions()]
        for revision in steps[1:]:  # from head down to the initial schema
            command.downgrade(config, revision)
            with engine.connect() as conn:
                counts = (conn.scalar(text("SELECT count(*) FROM projects")),
                          conn.scalar(text("SELECT count(*) FROM concepts")))
            assert counts == (1, 2), f"rows lost going down to {revision}"
    finally:
        engine.dispose()
