"""The reviewer key: resolving a disagreement needs it (or the admin key) when keys are on."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem, label, new_project

ADMIN = {"X-API-Key": ADMIN_KEY}


@pytest.fixture
def keyed(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(admin_key=ADMIN_KEY)


def _disputed(client: TestClient) -> tuple[int, dict[str, str], int]:
    body = client.post("/projects", json={"name": "p", "policy": "consensus"},
                       headers=ADMIN).json()
    pid, own = body["id"], {"X-API-Key": body["api_key"]}
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "a"}, {"name": "b"}]},
                headers=own)
    client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": "positive",
                                                 "annotator": "ann"}, headers=own)
    answer = client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b",
                                                          "label": "negative",
                                                          "annotator": "bob"}, headers=own)
    return pid, own, answer.json()["disagreement"]["id"]


def test_resolving_needs_the_reviewer_or_the_admin_key(keyed: TestClient) -> None:
    pid, own, did = _disputed(keyed)
    path = f"/projects/{pid}/disagreements/{did}/resolve"
    body = {"label": "positive"}
    assert_problem(keyed.post(path, json=body), 401, "unauthorized")
    assert_problem(keyed.post(path, json=body, headers=own), 403, "forbidden")
    assert keyed.get(f"/projects/{pid}/disagreements", headers=own).status_code == 200
    made = keyed.post(f"/projects/{pid}/reviewer-key", headers=own)
    assert made.status_code == 200, made.text
    reviewer = {"X-API-Key": made.json()["reviewer_key"]}
    resolved = keyed.post(path, json=body, headers=reviewer)
    assert resolved.status_code == 200 and resolved.json()["state"] == "closed"
    # the reviewer key opens its project (to read the disagreements) but makes no keys
    assert keyed.get(f"/projects/{pid}/disagreements?state=all",
                     headers=reviewer).status_code == 200
    assert_problem(keyed.post(f"/projects/{pid}/reviewer-key", headers=reviewer), 403,
                   "forbidden")
    assert keyed.post(path, json={"label": "negative"}, headers=ADMIN).status_code == 200
    # rotated: the old reviewer key stops working at once
    rotated = keyed.post(f"/projects/{pid}/reviewer-key", headers=ADMIN).json()["reviewer_key"]
    assert rotated != reviewer["X-API-Key"]
    assert_problem(keyed.post(path, json=body, headers=reviewer), 401, "unauthorized")
    assert keyed.post(path, json=body, headers={"X-API-Key": rotated}).status_code == 200


def test_a_reviewer_key_opens_its_project_only(keyed: TestClient) -> None:
    pid, _, did = _disputed(keyed)
    other, theirs, _ = _disputed(keyed)
    made = keyed.post(f"/projects/{other}/reviewer-key", headers=theirs).json()
    foreign = {"X-API-Key": made["reviewer_key"]}
    assert_problem(keyed.post(f"/projects/{pid}/disagreements/{did}/resolve",
                              json={"label": "positive"}, headers=foreign), 403, "forbidden")


def test_resolving_is_open_when_keys_are_off(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"], policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    did = label(client, pid, "a", "b", "negative", annotator="bob").json()["disagreement"]["id"]
    assert client.post(f"/projects/{pid}/disagreements/{did}/resolve",
                       json={"label": "positive"}).status_code == 200
