"""The edge of the service: keys checked before the body is read, expiring idempotency records,
duplicate JSON keys refused.

Each test is a scaled-down reproduction of a finding of an adversarial test as an outsider:
a 60 MB body without a key was parsed before the 401, idempotency records were kept forever,
and ``{"a": 1, "a": 2}`` was accepted with the last value.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem, new_project

ADMIN = {"X-API-Key": ADMIN_KEY}


# --------------------------------------------------------------------------------------------
# Duplicate JSON keys
# --------------------------------------------------------------------------------------------


def _raw_post(client: TestClient, path: str, document: str) -> Any:
    return client.post(path, content=document.encode(),
                       headers={"content-type": "application/json"})


def test_a_duplicate_key_is_422_naming_the_key(client: TestClient) -> None:
    response = _raw_post(client, "/projects", '{"name": "first", "name": "second"}')
    problem = assert_problem(response, 422, "validation-error")
    assert "'name'" in problem["detail"]
    assert problem["errors"] == [{"loc": ["body"], "msg": "duplicate key 'name' in a JSON object",
                                  "type": "json_duplicate_key"}]
    assert client.get("/projects").json()["total"] == 0


def test_a_duplicate_key_deep_inside_a_body_is_422(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"])
    document = ('{"labels": [{"a": "a", "b": "b", "label": "positive"},'
                ' {"a": "b", "b": "c", "label": "positive", "label": "negative"}]}')
    problem = assert_problem(_raw_post(client, f"/projects/{pid}/labels/bulk", document), 422,
                             "validation-error")
    assert "'label'" in problem["detail"]
    listing = client.get(f"/projects/{pid}/labels", params={"source": "asserted"}).json()
    assert listing["total"] == 0
    # The same document without the duplicate is accepted.
    fixed = document.replace(', "label": "negative"', "")
    assert _raw_post(client, f"/projects/{pid}/labels/bulk", fixed).status_code == 201


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    """Every API route, also those of included routers (FastAPI keeps them in the router)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        included = getattr(route, "original_router", None)
        if included is not None:
            found += _api_routes(included.routes)
    return found


def test_every_route_that_takes_a_body_refuses_duplicate_keys(client: TestClient) -> None:
    from app.routes.common import StrictJSONRoute

    with_body = [route for route in _api_routes(client.app.routes)  # type: ignore[attr-defined]
                 if route.body_field is not None]
    assert len(with_body) >= 6
    assert all(isinstance(route, StrictJSONRoute) for route in with_body), \
        [route.path for route in with_body if not isinstance(route, StrictJSONRoute)]
