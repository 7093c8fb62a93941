"""Keys: the admin key manages projects, a project's key opens only that project, and a
missing or wrong key is refused before the request's body is read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem

ADMIN = {"X-API-Key": ADMIN_KEY}


@pytest.fixture
def keyed(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(admin_key=ADMIN_KEY)


def _project(client: TestClient) -> tuple[int, dict[str, str]]:
    body = client.post("/projects", json={"name": "p"}, headers=ADMIN).json()
    client.post(f"/projects/{body['id']}/concepts", json={"concepts": [{"name": "a"},
                                                                      {"name": "b"}]},
                headers=ADMIN)
    return body["id"], {"X-API-Key": body["api_key"]}


def test_only_the_admin_key_manages_projects(keyed: TestClient) -> None:
    problem = assert_problem(keyed.post("/projects", json={"name": "p"}), 401, "unauthorized")
    assert "X-API-Key" in problem["detail"]
    assert "www-authenticate" in keyed.post("/projects", json={"name": "p"}).headers
    assert_problem(keyed.post("/projects", json={"name": "p"}, headers={"X-API-Key": "guess"}),
                   401, "unauthorized")
    pid, own = _project(keyed)
    assert_problem(keyed.get("/projects", headers=own), 403, "forbidden")
    assert_problem(keyed.post("/projects", json={"name": "q"}, headers=own), 403, "forbidden")
    assert_problem(keyed.delete(f"/projects/{pid}", headers=own), 403, "forbidden")
    assert keyed.get("/projects", headers=ADMIN).json()["total"] == 1
    assert keyed.delete(f"/projects/{pid}", headers=ADMIN).status_code == 204


def test_a_project_key_opens_its_project_only(keyed: TestClient) -> None:
    pid, own = _project(keyed)
    other, theirs = _project(keyed)
    label = {"a": "a", "b": "b", "label": "positive"}
    assert keyed.post(f"/projects/{pid}/labels", json=label, headers=own).status_code == 201
    assert keyed.get(f"/projects/{pid}", headers=own).status_code == 200
    assert keyed.get(f"/projects/{pid}", headers=ADMIN).status_code == 200
    routes = [("GET", f"/projects/{pid}", None), ("GET", f"/projects/{pid}/labels", None),
              ("POST", f"/projects/{pid}/labels", label), ("GET", f"/projects/{pid}/next", None),
              ("GET", f"/projects/{pid}/export", None),
              ("DELETE", f"/projects/{pid}/labels/1", None)]
    for method, path, body in routes:
        assert_problem(keyed.request(method, path, json=body), 401, "unauthorized")
        assert_problem(keyed.request(method, path, json=body,
                                     headers={"X-API-Key": "sporal_unknown"}), 401,
                       "unauthorized")
        assert_problem(keyed.request(method, path, json=body, headers=theirs), 403, "forbidden")
    assert keyed.get(f"/projects/{other}", headers=theirs).status_code == 200


def test_rotating_a_key_retires_the_old_one(keyed: TestClient) -> None:
    pid, old = _project(keyed)
    response = keyed.post(f"/projects/{pid}/api-key", headers=old)
    assert response.status_code == 200
    new = {"X-API-Key": response.json()["api_key"]}
    assert new != old
    assert_problem(keyed.get(f"/projects/{pid}", headers=old), 401, "unauthorized")
    assert keyed.get(f"/projects/{pid}", headers=new).status_code == 200
    again = keyed.post(f"/projects/{pid}/api-key", headers=ADMIN).json()["api_key"]
    assert_problem(keyed.get(f"/projects/{pid}", headers=new), 401, "unauthorized")
    assert keyed.get(f"/projects/{pid}", headers={"X-API-Key": again}).status_code == 200


def test_open_mode_asks_no_key_and_says_so(client: TestClient) -> None:
    response = client.post("/projects", json={"name": "p"})
    assert response.status_code == 201 and response.json()["api_key"]
    assert client.get("/projects").status_code == 200
    assert client.get("/health").json()["open_mode"] is True


def test_health_needs_no_key(keyed: TestClient) -> None:
    body = keyed.get("/health").json()
    assert body["status"] == "ok" and body["open_mode"] is False


def test_a_key_is_looked_up_once_per_request(keyed: TestClient,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The middleware finds the caller before the body; the routes reuse what it found."""
    import app.security as security

    pid, own = _project(keyed)
    lookups: list[str] = []
    digest = security.hash_key

    def counted(key: str) -> str:
        lookups.append(key)
        return digest(key)

    monkeypatch.setattr(security, "hash_key", counted)
    label = {"a": "a", "b": "b", "label": "positive"}
    assert keyed.post(f"/projects/{pid}/labels", json=label, headers=own).status_code == 201
    assert keyed.get(f"/projects/{pid}", headers=own).status_code == 200
    assert_problem(keyed.delete(f"/projects/{pid}", headers=own), 403, "forbidden")
    assert lookups == [own["X-API-Key"]] * 3
    assert keyed.get(f"/projects/{pid}", headers=ADMIN).status_code == 200
    assert len(lookups) == 3  # the admin key is compared, never looked up


def test_keys_are_checked_behind_a_proxy_prefix(keyed: TestClient) -> None:
    """Mounted under a ``root_path``, the paths the routes see are the ones checked."""
    pid, own = _project(keyed)
    _, theirs = _project(keyed)
    behind_proxy = TestClient(keyed.app, root_path="/sporal")
    assert behind_proxy.get("/sporal/projects", headers=ADMIN).status_code == 200
    assert behind_proxy.get(f"/sporal/projects/{pid}", headers=own).status_code == 200
    assert_problem(behind_proxy.get(f"/sporal/projects/{pid}", headers=theirs), 403,
                   "forbidden")
    assert_problem(behind_proxy.get("/sporal/projects"), 401, "unauthorized")


# --------------------------------------------------------------------------------------------
# Keys before the body
# --------------------------------------------------------------------------------------------


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
