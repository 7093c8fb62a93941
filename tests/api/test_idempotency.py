"""Idempotent retries of label posts (``Idempotency-Key``), and the expiry of their records."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from models import IdempotencyRecord
from tests.api.conftest import assert_problem, new_project


def _count(client: TestClient, pid: int) -> int:
    return int(client.get(f"/projects/{pid}/labels", params={"source": "asserted"})
               .json()["total"])


def test_a_retry_with_the_same_key_and_body_replays_the_first_answer(
        client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"])
    body = {"a": "a", "b": "b", "label": "positive"}
    key = {"Idempotency-Key": "retry-1"}
    first = client.post(f"/projects/{pid}/labels", json=body, headers=key)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    again = client.post(f"/projects/{pid}/labels", json=dict(reversed(body.items())),
                        headers=key)
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert _count(client, pid) == 1


def test_the_same_key_with_another_body_is_422(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"])
    key = {"Idempotency-Key": "k"}
    client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": "positive"},
                headers=key)
    response = client.post(f"/projects/{pid}/labels",
                           json={"a": "b", "b": "c", "label": "positive"}, headers=key)
    assert_problem(response, 422, "idempotency-key-reused")
    assert _count(client, pid) == 1


def test_a_request_still_running_is_409_of_its_own_type(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    inflight = client.app.state.inflight  # type: ignore[attr-defined]
    with inflight.claim(pid, "busy"):  # as if the first request were still being applied
        response = client.post(f"/projects/{pid}/labels",
                               json={"a": "a", "b": "b", "label": "positive"},
                               headers={"Idempotency-Key": "busy"})
    problem = assert_problem(response, 409, "idempotency-in-progress")
    assert problem["type"] != "/problems/contradiction"
    assert _count(client, pid) == 0


def test_keys_belong_to_their_project_and_cover_bulk_imports(client: TestClient) -> None:
    one = new_project(client, ["a", "b"])
    two = new_project(client, ["a", "b"])
    key = {"Idempotency-Key": "shared"}
    body = {"a": "a", "b": "b", "label": "positive"}
    assert client.post(f"/projects/{one}/labels", json=body, headers=key).status_code == 201
    assert client.post(f"/projects/{two}/labels", json=body, headers=key).status_code == 201
    bulk = {"labels": [{"a": "b", "b": "a", "label": "negative"}]}
    first = client.post(f"/projects/{one}/labels/bulk", json=bulk,
                        headers={"Idempotency-Key": "bulk"})
    again = client.post(f"/projects/{one}/labels/bulk", json=bulk,
                        headers={"Idempotency-Key": "bulk"})
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    assert_problem(client.post(f"/projects/{one}/labels", json=body,
                               headers={"Idempotency-Key": "x" * 256}), 422,
                   "validation-error")


def test_errors_are_not_stored_so_a_fixed_retry_succeeds(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    key = {"Idempotency-Key": "fix"}
    response = client.post(f"/projects/{pid}/labels",
                           json={"a": "a", "b": "z", "label": "positive"}, headers=key)
    assert_problem(response, 422, "unknown-concept")
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "z"}]})
    response = client.post(f"/projects/{pid}/labels",
                           json={"a": "a", "b": "z", "label": "positive"}, headers=key)
    assert response.status_code == 201


def test_a_contradiction_under_a_key_is_its_outcome_and_replays(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": "positive"})
    key = {"Idempotency-Key": "c-1"}
    body = {"a": "b", "b": "a", "label": "positive"}
    first = assert_problem(client.post(f"/projects/{pid}/labels", json=body, headers=key), 409,
                           "contradiction")
    retry = client.post(f"/projects/{pid}/labels", json=body, headers=key)
    assert assert_problem(retry, 409, "contradiction") == first
    assert retry.headers["idempotent-replayed"] == "true"
    other = {"a": "b", "b": "a", "label": "negative"}  # consistent, but not under this key
    assert_problem(client.post(f"/projects/{pid}/labels", json=other, headers=key), 422,
                   "idempotency-key-reused")
    assert _count(client, pid) == 1


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
