"""The edge of the service: keys checked before the body is read, expiring idempotency records,
duplicate JSON keys refused.

Each test is a scaled-down reproduction of a finding of an adversarial test as an outsider:
a 60 MB body without a key was parsed before the 401, idempotency records were kept forever,
and ``{"a": 1, "a": 2}`` was accepted with the last value.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from models import IdempotencyRecord
from tests.api.conftest import ADMIN_KEY, assert_problem, new_project

ADMIN = {"X-API-Key": ADMIN_KEY}


# --------------------------------------------------------------------------------------------
# Keys before the body
# --------------------------------------------------------------------------------------------


@pytest.fixture
def keyed(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(admin_key=ADMIN_KEY)


def _keyed_project(client: TestClient) -> tuple[int, str]:
    body = client.post("/projects", json={"name": "p"}, headers=ADMIN).json()
    return int(body["id"]), str(body["api_key"])


def _asgi_call(client: TestClient, method: str, path: str, headers: dict[str, str],
               chunks: int = 4) -> tuple[int, dict[str, str], dict[str, Any], int]:
    """Send a chunked JSON body straight to the ASGI app; count the chunks the app read.

    Returns the status, the headers, the JSON body of the answer and how many ``receive``
    calls the application made before it started its answer.
    """
    read = 0
    started_after: list[int] = []
    sent: list[dict[str, Any]] = []
    piece = b" " * 1024

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        if read > chunks:  # the whole body was read; now the client only waits
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": piece, "more_body": read < chunks}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started_after.append(read)
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("testserver", 80),
             "headers": [(k.lower().encode(), v.encode()) for k, v in
                         {"content-type": "application/json", "transfer-encoding": "chunked",
                          **headers}.items()]}
    asyncio.run(asyncio.wait_for(client.app(scope, receive, send), 30))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], answer_headers, json.loads(body), started_after[0]


@pytest.mark.parametrize("who", ["no key", "unknown key", "another project's key"])
def test_a_project_route_refuses_a_bad_key_before_reading_the_body(
        keyed: TestClient, who: str) -> None:
    pid, _ = _keyed_project(keyed)
    _, other_key = _keyed_project(keyed)
    headers = {"no key": {}, "unknown key": {"x-api-key": "sporal_guess"},
               "another project's key": {"x-api-key": other_key}}[who]
    status, answer, body, read = _asgi_call(keyed, "POST", f"/projects/{pid}/labels/bulk",
                                            headers)
    expected = 403 if who == "another project's key" else 401
    assert (status, read) == (expected, 0), (status, read, body)
    assert answer["content-type"].startswith("application/problem+json")
    assert body["type"] == ("/problems/forbidden" if expected == 403 else "/problems/unauthorized")
    assert body["instance"] == f"/projects/{pid}/labels/bulk"
    if expected == 401:
        assert answer["www-authenticate"] == 'APIKey header="X-API-Key"'


def test_an_admin_route_refuses_a_missing_key_before_reading_the_body(keyed: TestClient) -> None:
    status, answer, body, read = _asgi_call(keyed, "POST", "/projects", {})
    assert (status, read) == (401, 0), (status, read, body)
    assert body["type"] == "/problems/unauthorized"
    assert answer["www-authenticate"] == 'APIKey header="X-API-Key"'


def test_the_refusals_before_the_body_are_those_of_the_routes(keyed: TestClient) -> None:
    """Same status, body and headers as the dependency checks give on a body-less request."""
    pid, own = _keyed_project(keyed)
    _, other = _keyed_project(keyed)
    for headers in ({}, {"X-API-Key": "guess"}, {"X-API-Key": other}):
        bodiless = keyed.get(f"/projects/{pid}/labels", headers=headers)
        with_body = keyed.post(f"/projects/{pid}/labels", headers=headers,
                               json={"a": "x", "b": "y", "label": "positive"})
        assert with_body.status_code == bodiless.status_code in (401, 403)
        assert with_body.json() == {**bodiless.json(), "instance": f"/projects/{pid}/labels"}
        assert with_body.headers.get("www-authenticate") == \
            bodiless.headers.get("www-authenticate")
    # The keys that open the project still do, and the admin-only routes still need the admin.
    assert keyed.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "x"}]},
                      headers={"X-API-Key": own}).status_code == 201
    assert keyed.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "y"}]},
                      headers=ADMIN).status_code == 201
    assert_problem(keyed.delete(f"/projects/{pid}", headers={"X-API-Key": own}), 403,
                   "forbidden")


def test_open_mode_reads_bodies_without_a_key(client: TestClient) -> None:
    status, _, body, read = _asgi_call(client, "POST", "/projects", {}, chunks=1)
    # A body of blanks is no JSON document: refused after it was read, as before.
    assert (status, read) == (422, 1), body


# --------------------------------------------------------------------------------------------
# Idempotency records expire
# --------------------------------------------------------------------------------------------


def _age_records(client: TestClient, by: timedelta) -> None:
    with client.app.state.database.sessions.begin() as session:  # type: ignore[attr-defined]
        for record in session.scalars(select(IdempotencyRecord)):
            record.created_at -= by


def _records(client: TestClient) -> int:
    with client.app.state.database.sessions() as session:  # type: ignore[attr-defined]
        return int(session.scalar(select(func.count()).select_from(IdempotencyRecord)) or 0)


def test_a_key_past_its_ttl_acts_as_new(make_client: Callable[..., TestClient]) -> None:
    client = make_client(idempotency_ttl_seconds=3600)
    pid = new_project(client, ["a", "b", "c"])
    key = {"Idempotency-Key": "reused-tomorrow"}
    first = client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": "positive"},
                        headers=key)
    assert first.status_code == 201, first.text
    _age_records(client, timedelta(seconds=3601))
    second = client.post(f"/projects/{pid}/labels",
                         json={"a": "b", "b": "c", "label": "positive"}, headers=key)
    assert second.status_code == 201, second.text
    assert "idempotent-replayed" not in second.headers
    # Within its TTL the new record replays as usual.
    again = client.post(f"/projects/{pid}/labels",
                        json={"a": "b", "b": "c", "label": "positive"}, headers=key)
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json() == second.json()


def test_expired_records_are_deleted_as_new_ones_are_stored(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(idempotency_ttl_seconds=3600)
    pid = new_project(client, [f"c{i}" for i in range(6)])
    for i in range(5):
        response = client.post(f"/projects/{pid}/labels", headers={"Idempotency-Key": f"k{i}"},
                               json={"a": f"c{i}", "b": f"c{i + 1}", "label": "positive"})
        assert response.status_code == 201, response.text
    assert _records(client) == 5
    _age_records(client, timedelta(days=2))
    response = client.post(f"/projects/{pid}/labels", headers={"Idempotency-Key": "fresh"},
                           json={"a": "c5", "b": "c0", "label": "negative"})
    assert response.status_code in (200, 201), response.text
    assert _records(client) == 1  # only the fresh one is left


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
