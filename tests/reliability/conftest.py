"""Fixtures of the reliability tests: a database per test (SQLite file or PostgreSQL).

Tests marked ``slow`` (the SIGKILL runs, the long PostgreSQL runs) are left out of the default
suite by the markers in pyproject.toml; `.ci/run` runs them as named steps. Tests that need
PostgreSQL take the server from ``SPORAL_TEST_POSTGRES_URL`` (`.ci/postgres.sh` starts one) and
skip, saying so, when it is unset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.reliability.harness import POSTGRES_URL_VARIABLE, Server, postgres_database, sqlite_url


def _postgres_base_url() -> str:
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(f"{POSTGRES_URL_VARIABLE} is unset: no PostgreSQL server to test against "
                    "(start one with .ci/postgres.sh)")
    return url


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each backend: a temp SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "sporal.db")
        return
    with postgres_database(_postgres_base_url(), "sporal_rel_") as url:
        yield url


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    """An empty PostgreSQL database; skips when no server is given."""
    with postgres_database(_postgres_base_url(), "sporal_rel_") as url:
        yield url


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start `sporal serve` processes; every one is stopped at the end of the test."""
    servers: list[Server] = []

    def start(database_url: str, *, wait: bool = True, **options: object) -> Server:
        server = Server(database_url=database_url, log_dir=tmp_path / "logs", **options)
        servers.append(server)
        return server.start(wait=wait)

    yield start
    for server in servers:
        server.stop()
