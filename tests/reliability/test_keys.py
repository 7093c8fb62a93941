"""Keys over a real server: with SPORAL_ADMIN_KEY set nobody reads or changes a project
without its key; a missing or unknown key is 401, another project's key is 403, and a large
body without a key gets its 401 without being read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.reliability.harness import Server, sqlite_url

ADMIN_KEY = "admin-key-for-the-reliability-tests"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module: each test makes projects of its own."""
    directory = tmp_path_factory.mktemp("keys")
    server = Server(database_url=sqlite_url(directory / "sporal.db"), log_dir=directory / "logs",
                    env={"SPORAL_ADMIN_KEY": ADMIN_KEY})
    server.start()
    yield server
    server.stop()


def _project(client: httpx.Client, name: str) -> tuple[int, str]:
    response = client.post("/projects", json={"name": name}, headers={"X-API-Key": ADMIN_KEY})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body.get("api_key"), f"no api_key returned at creation: {body}"
    pid = body["id"]
    response = client.post(f"/projects/{pid}/concepts", headers={"X-API-Key": body["api_key"]},
                           json={"concepts": [{"name": "x"}, {"name": "y"}]})
    assert response.status_code == 201, response.text
    return pid, body["api_key"]


def _assert_refused(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, f"{response.request.method} {response.request.url}: " \
        f"{response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/problem+json")


def test_admin_routes_need_the_admin_key(keyed_server: Server) -> None:
    with httpx.Client(base_url=keyed_server.base_url, timeout=30.0) as client:
        _, project_key = _project(client, "first")
        for headers, status in [({}, 401), ({"X-API-Key": "not-a-key"}, 401),
                                ({"X-API-Key": project_key}, 403)]:
            _assert_refused(client.post("/projects", json={"name": "x"}, headers=headers), status)
            _assert_refused(client.get("/projects", headers=headers), status)
        response = client.get("/projects", headers={"X-API-Key": ADMIN_KEY})
        assert response.status_code == 200, response.text


def test_a_project_key_opens_its_own_project_only(keyed_server: Server) -> None:
    with httpx.Client(base_url=keyed_server.base_url, timeout=30.0) as client:
        first, first_key = _project(client, "first")
        second, second_key = _project(client, "second")
        label = {"a": "x", "b": "y", "label": "positive"}
        own = client.post(f"/projects/{first}/labels", json=label,
                          headers={"X-API-Key": first_key})
        assert own.status_code == 201, own.text
        for path in [f"/projects/{second}", f"/projects/{second}/labels",
                     f"/projects/{second}/next"]:
            _assert_refused(client.get(path, headers={"X-API-Key": first_key}), 403)
            _assert_refused(client.get(path), 401)
            _assert_refused(client.get(path, headers={"X-API-Key": "not-a-key"}), 401)
        _assert_refused(client.post(f"/projects/{second}/labels", json=label,
                                    headers={"X-API-Key": first_key}), 403)
        _assert_refused(client.delete(f"/projects/{second}", headers={"X-API-Key": second_key}),
                        403)
        # The admin key opens every project; the stored state is the one the owner wrote.
        listing = client.get(f"/projects/{first}/labels", params={"source": "asserted"},
                             headers={"X-API-Key": ADMIN_KEY})
        assert listing.status_code == 200, listing.text
        assert listing.json()["total"] == 1
        assert client.get(f"/projects/{second}", headers={"X-API-Key": second_key}).is_success


def test_the_key_is_returned_once_and_never_listed(keyed_server: Server) -> None:
    with httpx.Client(base_url=keyed_server.base_url, timeout=30.0) as client:
        pid, key = _project(client, "secret")
        for path in ["/projects", f"/projects/{pid}"]:
            response = client.get(path, headers={"X-API-Key": ADMIN_KEY})
            assert response.status_code == 200, response.text
            assert key not in response.text


def test_a_large_body_without_a_key_gets_its_401_and_the_server_stays_up(
        tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_ADMIN_KEY": ADMIN_KEY})
    document = b'{"labels": [' + b",".join([b'{"a": "x", "b": "y", "label": "positive"}']
                                         * 100_000) + b"]}"
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        pid = client.post("/projects", json={"name": "p"},
                          headers={"X-API-Key": ADMIN_KEY}).json()["id"]
        response = client.post(f"/projects/{pid}/labels/bulk", content=document,
                               headers={"content-type": "application/json"})
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == 'APIKey header="X-API-Key"'
        assert client.get("/health").status_code == 200
