"""The service itself: health, docs, the documented errors, problem pages, CORS."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from app.errors import PROBLEMS
from tests.api.conftest import assert_problem


def test_health_and_docs(client: TestClient) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["database"] in {"sqlite", "postgresql"}
    assert client.get("/docs").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_every_project_route_documents_its_error_answers(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        if not path.startswith("/projects"):
            continue
        for method, operation in operations.items():
            documented = set(operation["responses"])
            assert {"401", "403", "422"} <= documented, (method, path)
            if "{project_id}" in path:
                assert "404" in documented, (method, path)
            if method in {"post", "patch"} and "requestBody" in operation:
                assert "413" in documented, (method, path)
            for status in documented - {"200", "201", "202", "204"}:
                content = operation["responses"][status]["content"]
                assert "application/problem+json" in content, (method, path, status)
    labels = schema["paths"]["/projects/{project_id}/labels"]["post"]["responses"]
    assert "409" in labels and "200" in labels


def test_each_problem_type_is_documented_by_the_service(client: TestClient) -> None:
    for slug, kind in PROBLEMS.items():
        body = client.get(kind.type).json()
        assert body["type"] == kind.type and body["status"] == kind.status, slug
    assert client.get("/problems/nothing").status_code == 404


def test_cors_answers_for_configured_origins(make_client: Callable[..., TestClient]) -> None:
    client = make_client(cors_origins=["https://annotate.example"])
    response = client.options("/projects", headers={
        "Origin": "https://annotate.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "X-API-Key, Content-Type, Prefer, Idempotency-Key"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://annotate.example"
    created = client.post("/projects", json={"name": "p"},
                          headers={"Origin": "https://annotate.example"})
    exposed = created.headers["access-control-expose-headers"].lower()
    assert "location" in exposed and "retry-after" in exposed
    response = client.get("/health", headers={"Origin": "https://elsewhere.example"})
    assert "access-control-allow-origin" not in response.headers


def test_405_lists_every_method_of_the_path(client: TestClient) -> None:
    response = client.request("OPTIONS", "/projects")
    assert response.status_code == 405
    assert sorted(m.strip() for m in response.headers["allow"].split(",")) == ["GET", "POST"]
    response = client.put("/projects/1")
    assert sorted(m.strip() for m in response.headers["allow"].split(",")) == [
        "DELETE", "GET", "PATCH"]
    # "bulk" is not a label id: the bulk import path, which has no DELETE.
    assert client.delete("/projects/1/labels/bulk").status_code == 405


def test_a_database_that_cannot_be_reached_is_503_not_500(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.exc import OperationalError

    from app.db import Database

    def refused(self: Database) -> str:
        raise OperationalError("SELECT 1", {}, Exception(
            'connection to server at "127.0.0.1", port 1 failed: Connection refused'))

    monkeypatch.setattr(Database, "ping", refused)
    response = client.get("/health")
    problem = assert_problem(response, 503, "database-unavailable")
    assert response.headers["Retry-After"] and "reached" in problem["detail"]
