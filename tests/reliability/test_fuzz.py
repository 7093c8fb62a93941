"""Schemathesis against the service's own OpenAPI schema: no 500, answers as documented.

The app runs in-process (ASGI) on a temporary SQLite file (or a fresh PostgreSQL database when
``SPORAL_TEST_POSTGRES_URL`` is set: .ci/run fuzzes once per database) with a seeded project,
so that the generated requests to ``/projects/{project_id}/...`` reach a project that has
concepts, a pool, labels and a trained model, instead of stopping at 404. Schemathesis'
default checks are all on; the examples per operation are kept modest (about a minute).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from starlette.testclient import TestClient

from tests.api.databases import backend, postgres_database, require_postgres
from tests.reliability.harness import generate_order, sqlite_url

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = 40
# Fuzzed twice: with keys on, the way a team runs it (the schema declares X-API-Key on every
# project route, and the auth checks verify that a request without it is refused), and open,
# the laptop default (SPORAL_ADMIN_KEY unset: the schema declares no key at all).
ADMIN_KEY = "fuzzing-admin-key"


def _seed(client: TestClient) -> dict[str, object]:
    """Two projects: one full of data that every {pid} route hits, and one to be deleted."""
    order = generate_order(12, seed=7)
    rng = random.Random(7)
    pid = client.post("/projects", json={"name": "fuzzed"}).json()["id"]
    doomed = client.post("/projects", json={"name": "to delete"}).json()["id"]
    assert client.post(f"/projects/{pid}/concepts", json={
        "concepts": [{"name": c} for c in order.concepts]}).status_code == 201
    pairs = list(itertools.permutations(range(len(order.concepts)), 2))
    rng.shuffle(pairs)
    pool = [{"a": order.concepts[i], "b": order.concepts[j],
             "features": [float(order.less[i, j]) + rng.random(), rng.random()]}
            for i, j in pairs[:60]]
    assert client.post(f"/projects/{pid}/pairs", json={"pairs": pool}).status_code == 201
    label_id = None
    for item in pool[:12]:
        response = client.post(f"/projects/{pid}/labels", json={
            "a": item["a"], "b": item["b"], "label": order.label(item["a"], item["b"])})
        assert response.status_code in (200, 201), response.text
        label_id = response.json()["id"]
    return {"pid": pid, "doomed": doomed, "label_id": label_id, "concepts": order.concepts}


# Routes whose bodies or queries name concepts. The JSON schema cannot say "a registered
# concept of this project", "two different concepts" or "the project's feature length", so a
# schema-valid request there can rightly get the documented 422 (unknown concept, self pair,
# wrong feature length): positive_data_acceptance is told so explicitly for these routes.
NAMING_CONCEPTS = [
    ("/projects/{project_id}/labels", "POST"),
    ("/projects/{project_id}/labels/bulk", "POST"),
    ("/projects/{project_id}/pairs", "POST"),
    ("/projects/{project_id}/pairs/status", "GET"),
    ("/projects/{project_id}/pairs", "DELETE"),
    ("/projects/{project_id}/links", "POST"),
    ("/projects/{project_id}/links", "DELETE"),
    ("/projects/{project_id}/concepts", "DELETE"),
    ("/projects/{project_id}/concepts/rename", "POST"),
    ("/projects/{project_id}/concepts/merge", "POST"),
    # register=true into a pool with client features is a documented 422
    ("/projects/{project_id}/pool/suggest", "POST"),
]


def _config(seeded: dict, keyed: bool) -> dict:
    """Schemathesis' configuration: the seeded data, and each check exception with its reason."""
    names = {"values": seeded["concepts"]}
    # Draw concept names mostly from the seeded project, so that requests reach the closure
    # (labels stored, contradictions refused) instead of stopping at "unknown concept".
    by_name = {"dictionary": "concepts", "probability": 0.9}
    concept_fields = ["query.a", "query.b", "body.a", "body.b", "body.pairs[*].a",
                      "body.pairs[*].b", "body.labels[*].a", "body.labels[*].b",
                      "query.name", "query.source", "query.target", "body.name", "body.keep",
                      "body.merge", "body.links[*].source", "body.links[*].target"]
    operations: list[dict] = [
        # Never delete the seeded project: DELETE /projects/{project_id} gets a spare one.
        {"include-path": "/projects/{project_id}", "include-method": "DELETE",
         "parameters": {"path.project_id": seeded["doomed"]}},
    ]
    operations += [
        {"include-path": path, "include-method": method,
         "checks": {"positive_data_acceptance": {
             "expected-statuses": ["2xx", "401", "403", "404", "409", "422"]}}}
        for path, method in NAMING_CONCEPTS
    ]
    # The admin key opens every route; the auth checks send requests without it.
    auth = {"auth": {"openapi": {"APIKeyHeader": {"api_key": ADMIN_KEY}}}} if keyed else {}
    return {
        # A fixed seed: CI runs the same cases every time, and a failure reproduces.
        "seed": 20261126,
        "generation": {"max-examples": MAX_EXAMPLES},
        **auth,
        "dictionaries": {"concepts": names},
        # Path parameters name the seeded project and one of its labels.
        "parameters": {"path.project_id": seeded["pid"], "path.label_id": seeded["label_id"],
                       **dict.fromkeys(concept_fields, by_name)},
        "operations": operations,
    }


def _schema(directory: Path, keyed: bool) -> Iterator[schemathesis.BaseSchema]:
    """The app on a fresh, seeded database, loaded as a schemathesis schema."""
    if backend() == "sqlite":
        yield from _schema_on(sqlite_url(directory / "sporal.db"), keyed)
        return
    with postgres_database(require_postgres()) as database_url:
        yield from _schema_on(database_url, keyed)


def _schema_on(database_url: str, keyed: bool) -> Iterator[schemathesis.BaseSchema]:
    from app.db import migrate
    from app.main import create_app
    from app.settings import Settings

    migrate(database_url)
    app = create_app(Settings(database_url=database_url, admin_key=ADMIN_KEY if keyed else None))
    headers = {"X-API-Key": ADMIN_KEY} if keyed else {}
    with TestClient(app, headers=headers) as client:
        config = schemathesis.Config.from_dict(_config(_seed(client), keyed))
        yield schemathesis.openapi.from_asgi("/openapi.json", app, config=config)


@pytest.fixture(scope="module")
def keyed_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    yield from _schema(tmp_path_factory.mktemp("fuzz-keyed"), keyed=True)


@pytest.fixture(scope="module")
def open_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    yield from _schema(tmp_path_factory.mktemp("fuzz-open"), keyed=False)


keyed = schemathesis.pytest.from_fixture("keyed_schema")
open_ = schemathesis.pytest.from_fixture("open_schema")


@keyed.parametrize()
def test_the_api_with_keys_conforms_to_its_schema_and_never_fails(
    case: schemathesis.Case,
) -> None:
    case.call_and_validate()


@open_.parametrize()
def test_the_open_api_conforms_to_its_schema_and_never_fails(case: schemathesis.Case) -> None:
    case.call_and_validate()
