"""Fixtures of the API tests: an application on a fresh migrated database per test.

The database is a temporary SQLite file, or a PostgreSQL database when
``SPORAL_TEST_POSTGRES_URL`` is set (the second CI pass); see :mod:`tests.api.databases`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api.databases import database_from_template, migrated_template

ADMIN_KEY = "admin-secret-for-tests"


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    with migrated_template(tmp_path_factory.mktemp("template")) as made:
        yield made


@pytest.fixture
def database_url(template: tuple[str, str], tmp_path: Path) -> Iterator[str]:
    with database_from_template(template, tmp_path) as url:
        yield url


@pytest.fixture
def make_client(database_url: str) -> Iterator[Callable[..., TestClient]]:
    """Build clients of apps on this test's database, with settings overridden."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        # fresh=true waits for the (niced) trainer: generous, for a machine busy with other work
        overrides.setdefault("fresh_timeout", 60.0)
        settings = Settings(database_url=database_url, **overrides)
        client = TestClient(create_app(settings), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """A client of an app in open mode (no keys)."""
    return make_client()


def new_project(client: TestClient, concepts: list[str] = (),
                pairs: list[tuple[str, str, list[float]]] = (), **fields: Any) -> int:
    """A project with ``concepts`` and pool ``pairs`` registered; returns its id."""
    response = client.post("/projects", json={"name": "test project", **fields})
    assert response.status_code == 201, response.text
    pid = int(response.json()["id"])
    if concepts:
        response = client.post(f"/projects/{pid}/concepts",
                               json={"concepts": [{"name": c} for c in concepts]})
        assert response.status_code == 201, response.text
    if pairs:
        body = {"pairs": [{"a": a, "b": b, "features": f} for a, b, f in pairs]}
        response = client.post(f"/projects/{pid}/pairs", json=body)
        assert response.status_code == 201, response.text
    return pid


def label(client: TestClient, pid: int, a: str, b: str, value: str = "positive",
          **extra: Any) -> Any:
    return client.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value, **extra})


def without_quality(exported: str | bytes) -> str:
    """A project export without its ``quality`` record: how right the map was when exported,
    which an import does not read and computes again (from its own model, once trained)."""
    text = exported.decode() if isinstance(exported, bytes) else exported
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith('{"kind":"quality"'))


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    """The response is an RFC 9457 problem of this status and kind; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["type"] == f"/problems/{slug}", body
    assert body["status"] == status
    assert body["title"] and body["detail"]
    return body
