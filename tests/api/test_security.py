"""Keys: the admin key manages projects, a project's key opens only that project."""

from __future__ import annotations

from collections.abc import Callable

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
