"""Databases for the service tests: a temporary SQLite file, or PostgreSQL when given.

``SPORAL_TEST_POSTGRES_URL`` (a server URL such as ``postgresql://user@127.0.0.1:5432/postgres``)
switches the API and end-to-end tests to PostgreSQL; each test then gets a fresh database,
cloned from a migrated template so that migrating once serves every test. The databases
themselves are made by :mod:`benchmarks.serving`, as for the reliability tests and benchmarks.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from benchmarks import serving
from benchmarks.serving import postgres_admin_url

POSTGRES_URL_VARIABLE = "SPORAL_TEST_POSTGRES_URL"

__all__ = [
    "POSTGRES_URL_VARIABLE",
    "backend",
    "postgres_admin_url",
    "postgres_database",
    "require_postgres",
    "sqlite_url",
]


def backend() -> str:
    """``"postgresql"`` when a server URL is given, else ``"sqlite"``."""
    return "postgresql" if os.environ.get(POSTGRES_URL_VARIABLE) else "sqlite"


def require_postgres() -> str:
    """The server URL; skips the calling test, saying why, when none is given."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(f"{POSTGRES_URL_VARIABLE} is unset: no PostgreSQL server to test against")
    return url


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def postgres_database(base_url: str, template: str | None = None) -> AbstractContextManager[str]:
    """A fresh database on the server of ``base_url`` (a copy of ``template``); dropped after.

    :func:`benchmarks.serving.postgres_database`, with names that say the API tests made it.
    """
    return serving.postgres_database(base_url, "sporal_api_", template=template)


@contextmanager
def migrated_template(tmp_dir: Path) -> Iterator[tuple[str, str]]:
    """A migrated database to copy per test: ``("sqlite", path)`` or ``("postgresql", name)``."""
    from app.db import migrate

    if backend() == "sqlite":
        path = tmp_dir / "template.db"
        migrate(sqlite_url(path))
        yield "sqlite", str(path)
        return
    base = require_postgres()
    with postgres_database(base) as url:
        migrate(url)
        from sqlalchemy.engine import make_url

        name = make_url(url).database
        assert name is not None
        # Nobody may stay connected to a template while it is copied.
        import psycopg

        with psycopg.connect(postgres_admin_url(base), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        yield "postgresql", name


@contextmanager
def database_from_template(template: tuple[str, str], tmp_dir: Path) -> Iterator[str]:
    """A fresh migrated database, copied from :func:`migrated_template`."""
    kind, where = template
    if kind == "sqlite":
        path = tmp_dir / "sporal.db"
        shutil.copyfile(where, path)
        yield sqlite_url(path)
        return
    with postgres_database(require_postgres(), template=where) as url:
        yield url
