"""Who may do what, keys on, in ``strict`` and in ``consensus``: every cell of the table in
docs/teams.md ("Keys: who may do what") checked against the service, then the cells whose
answer depends on whose answer it is (an annotator's own, a reviewer's).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db import make_engine
from tests.api.conftest import ADMIN_KEY, assert_problem
from tests.docs.test_rest_contract import operations, table_rows

TEAMS = Path(__file__).resolve().parents[2] / "docs" / "teams.md"
ROLES = ("admin", "project", "reviewer", "annotator")
POLICIES = ("strict", "consensus")
ADMIN = {"X-API-Key": ADMIN_KEY}
FEATURES = [[0.1, 0.2], [0.3, 0.1], [0.2, 0.9], [0.8, 0.4], [0.5, 0.5]]


@dataclass
class Team:
    """A project with every kind of key: ``keys[role]`` is that role's header."""

    client: TestClient
    pid: int
    keys: dict[str, dict[str, str]]

    def call(self, role: str, method: str, path: str, **kwargs: Any) -> Any:
        headers = {**kwargs.pop("headers", {}), **self.keys[role]}
        return self.client.request(method, f"/projects/{self.pid}{path}", headers=headers,
                                   **kwargs)

    def label(self, role: str, a: str, b: str, value: str = "positive", **extra: Any) -> Any:
        return self.call(role, "POST", "/labels", json={"a": a, "b": b, "label": value, **extra})

    def answers(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.call("admin", "GET", "/answers").json()["items"]
        return items

    def label_id(self, a: str, b: str) -> int:
        items = self.call("admin", "GET", "/labels?source=asserted").json()["items"]
        return int(next(i["id"] for i in items if (i["a"], i["b"]) == (a, b)))

    def import_lines(self, role: str, *lines: dict[str, Any]) -> Any:
        body = "\n".join(json.dumps(line) for line in lines).encode()
        return self.call(role, "POST", "/import", content=body,
                         headers={"Content-Type": "application/x-ndjson"})


@pytest.fixture
def keyed(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(admin_key=ADMIN_KEY)


def make_team(client: TestClient, policy: str) -> Team:
    made = client.post("/projects", json={"name": "team", "policy": policy}, headers=ADMIN)
    assert made.status_code == 201, made.text
    pid, own = made.json()["id"], {"X-API-Key": made.json()["api_key"]}
    names = ["a", "b", "c", "d", "e"]
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": n} for n in names]},
                headers=own)
    pairs = [{"a": x, "b": y, "features": FEATURES[i % 5]}
             for i, (x, y) in enumerate((x, y) for x in names for y in names if x != y)]
    assert client.post(f"/projects/{pid}/pairs", json={"pairs": pairs},
                       headers=own).status_code == 201
    reviewer = client.post(f"/projects/{pid}/reviewer-key", headers=own).json()["reviewer_key"]
    ana = client.post(f"/projects/{pid}/annotator-keys", json={"annotator": "ana"}, headers=own)
    assert ana.status_code == 201, ana.text
    return Team(client, pid, {"admin": ADMIN, "project": own,
                              "reviewer": {"X-API-Key": reviewer},
                              "annotator": {"X-API-Key": ana.json()["api_key"]}})


# ------------------------------------------------------------------------- the table
def _table() -> dict[tuple[str, str], dict[str, bool]]:
    """``(METHOD, path)`` → role → whether the table lets the role through the route."""
    rows = table_rows(TEAMS.read_text(encoding="utf-8"), "## Keys: who may do what")
    return {key: {role: not cells[2 + i].startswith("no") for i, role in enumerate(ROLES)}
            for key, cells in rows.items()}


def _last(item: tuple[tuple[str, str], dict[str, bool]]) -> bool:
    """The calls that take the caller's own key or project away run last."""
    method, path = item[0]
    return path.endswith("/api-key") or (method, path) == ("DELETE", "/projects/{project_id}")


def _url(path: str, pid: int) -> str:
    return (path.replace("{project_id}", str(pid)).replace("{slug}", "forbidden")
            .replace("{annotator}", "nobody").replace("{label_id}", "999999")
            .replace("{job_id}", "999999").replace("{answer_id}", "999999")
            .replace("{disagreement_id}", "999999"))


def test_the_table_has_every_route_once() -> None:
    assert set(_table()) == set(operations())


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("role", ROLES)
def test_every_cell_of_the_table(keyed: TestClient, policy: str, role: str) -> None:
    """A `no` is 403 `forbidden`; anything else lets the key through (the route may still
    answer 404 or 422 for the dummy ids and empty bodies sent here)."""
    team = make_team(keyed, policy)
    for (method, path), allowed in sorted(_table().items(), key=_last):
        response = keyed.request(method, _url(path, team.pid), headers=team.keys[role],
                                 json={} if method in ("POST", "PATCH") else None)
        cell = f"{method} {path} as {role}: {response.status_code} {response.text[:200]}"
        if allowed[role]:
            assert response.status_code not in (401, 403), cell
        else:
            assert response.status_code == 403, cell
            assert response.json()["type"] == "/problems/forbidden", cell


# ------------------------------------------------------------------------- annotator keys
def test_annotator_keys_are_made_listed_renewed_and_revoked(keyed: TestClient,
                                                           database_url: str) -> None:
    team = make_team(keyed, "consensus")
    old = dict(team.keys["annotator"])
    renewed = team.call("project", "POST", "/annotator-keys", json={"annotator": "ana"})
    assert renewed.status_code == 201 and renewed.json()["annotator"] == "ana"
    new = {"X-API-Key": renewed.json()["api_key"]}
    assert_problem(keyed.get(f"/projects/{team.pid}/whoami", headers=old), 401, "unauthorized")
    assert keyed.get(f"/projects/{team.pid}/whoami", headers=new).json() == {
        "role": "annotator", "annotator": "ana", "open": False}
    team.call("admin", "POST", "/annotator-keys", json={"annotator": "bob"})
    listed = team.call("project", "GET", "/annotator-keys").json()["items"]
    assert [i["annotator"] for i in listed] == ["ana", "bob"]
    assert all(set(i) == {"annotator", "created_at"} for i in listed)  # never a key
    # ana's lease ends with her key
    asked = keyed.get(f"/projects/{team.pid}/next?k=2", headers=new)
    assert asked.status_code == 200 and len(asked.json()["queries"]) == 2, asked.text
    engine = make_engine(database_url)

    def leases() -> int:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM reservations WHERE "
                                         "annotator = 'ana'")).scalar_one())
    assert leases() == 2
    assert team.call("project", "DELETE", "/annotator-keys/ana").status_code == 204
    assert leases() == 0
    engine.dispose()
    assert_problem(keyed.get(f"/projects/{team.pid}/whoami", headers=new), 401, "unauthorized")
    assert_problem(team.call("project", "DELETE", "/annotator-keys/ana"), 404, "not-found")
    assert [i["annotator"] for i in team.call("project", "GET", "/annotator-keys")
            .json()["items"]] == ["bob"]


def test_whoami_names_each_role(keyed: TestClient, client: TestClient) -> None:
    team = make_team(keyed, "strict")
    seen = {role: team.call(role, "GET", "/whoami").json() for role in ROLES}
    assert seen == {"admin": {"role": "admin", "annotator": None, "open": False},
                    "project": {"role": "project", "annotator": None, "open": False},
                    "reviewer": {"role": "reviewer", "annotator": None, "open": False},
                    "annotator": {"role": "annotator", "annotator": "ana", "open": False}}
    other = make_team(keyed, "strict")
    assert_problem(keyed.get(f"/projects/{team.pid}/whoami", headers=other.keys["annotator"]),
                   403, "forbidden")
    pid = client.post("/projects", json={"name": "open"}).json()["id"]
    assert client.get(f"/projects/{pid}/whoami").json() == {
        "role": "admin", "annotator": None, "open": True}


# ------------------------------------------------------------------------- as oneself
@pytest.mark.parametrize("policy", POLICIES)
def test_an_annotator_key_answers_as_itself(keyed: TestClient, policy: str) -> None:
    team = make_team(keyed, policy)
    mine = team.label("annotator", "a", "b")
    assert mine.status_code == 201 and mine.json()["annotator"] == "ana", mine.text
    assert team.label("annotator", "b", "c", annotator="ana").status_code == 201
    assert_problem(team.label("annotator", "c", "d", annotator="bob"), 403, "forbidden")
    bulk = {"labels": [{"a": "d", "b": "e", "label": "positive"},
                       {"a": "c", "b": "d", "label": "positive", "annotator": "bob"}]}
    assert_problem(team.call("annotator", "POST", "/labels/bulk", json=bulk), 403, "forbidden")
    bulk["labels"].pop()
    assert team.call("annotator", "POST", "/labels/bulk", json=bulk).status_code == 201
    # the project key is the tools' key: it names anyone
    assert team.label("project", "c", "d", annotator="bob").status_code == 201
    assert [(i["a"], i["b"], i["annotator"]) for i in team.answers()] == [
        ("a", "b", "ana"), ("b", "c", "ana"), ("d", "e", "ana"), ("c", "d", "bob")]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_annotator_key_is_asked_and_reads_as_itself(keyed: TestClient, policy: str) -> None:
    team = make_team(keyed, policy)
    assert_problem(team.call("annotator", "GET", "/next?annotator=bob"), 403, "forbidden")
    asked = team.call("annotator", "GET", "/next")
    assert asked.status_code == 200 and asked.json()["queries"], asked.text
    logged = team.call("project", "GET", "/suggestions").json()["items"]
    assert {i["annotator"] for i in logged} == {"ana"}
    team.label("annotator", "a", "b")
    team.label("project", "c", "d", annotator="bob")
    own = team.call("annotator", "GET", "/answers").json()["items"]
    assert [(i["a"], i["annotator"]) for i in own] == [("a", "ana")]
    assert team.call("annotator", "GET", "/answers?annotator=ana").json()["items"] == own
    assert_problem(team.call("annotator", "GET", "/answers?annotator=bob"), 403, "forbidden")
    assert_problem(team.call("annotator", "GET", "/answers?anonymous=true"), 403, "forbidden")
    assert len(team.call("reviewer", "GET", "/answers").json()["items"]) == 2


# ------------------------------------------------------------------------- retracting
@pytest.mark.parametrize("policy", POLICIES)
def test_an_annotator_key_retracts_only_its_own_answers(keyed: TestClient,
                                                         policy: str) -> None:
    team = make_team(keyed, policy)
    ana = team.label("annotator", "a", "b").json()
    bob = team.label("project", "c", "d", annotator="bob").json()
    assert_problem(team.call("annotator", "DELETE", f"/answers/{bob['answer_id']}"),
                   403, "forbidden")
    assert_problem(team.call("annotator", "DELETE", f"/labels/{bob['id']}"), 403, "forbidden")
    # a label resting on ana's answer and bob's: the lead's keys only
    shared = team.label("annotator", "d", "e").json()
    team.label("project", "d", "e", annotator="bob")
    assert_problem(team.call("annotator", "DELETE", f"/labels/{shared['id']}"),
                   403, "forbidden")
    assert len([i for i in team.answers() if i["retracted_at"] is None]) == 4  # none went
    # her own answers go
    gone = team.call("annotator", "DELETE", f"/answers/{shared['answer_id']}")
    assert gone.status_code == 200, gone.text
    assert team.call("annotator", "DELETE", f"/labels/{ana['id']}").status_code == 200
    live = [(i["a"], i["b"], i["annotator"]) for i in team.answers() if i["retracted_at"] is None]
    assert live == [("c", "d", "bob"), ("d", "e", "bob")]
    assert team.call("project", "DELETE", f"/labels/{bob['id']}").status_code == 200


def _reviewers_answer(team: Team) -> tuple[int, int]:
    """A reviewer's answer on (a, b), brought in by an import with the reviewer key; its
    id and its label's."""
    imported = team.import_lines(
        "reviewer", {"kind": "label", "a": "a", "b": "b", "label": "positive"},
        {"kind": "answer", "a": "a", "b": "b", "label": "positive", "annotator": "rev",
         "role": "reviewer", "outcome": "asserted", "label_seq": 1,
         "created_at": "2026-12-09T01:00:00+00:00"})
    assert imported.status_code == 200, imported.text
    answer = next(i for i in team.answers() if i["role"] == "reviewer")
    return answer["id"], team.label_id("a", "b")


@pytest.mark.parametrize("policy", POLICIES)
def test_a_reviewers_answer_stands_against_every_other_key(keyed: TestClient,
                                                            policy: str) -> None:
    team = make_team(keyed, policy)
    answer, label = _reviewers_answer(team)
    for role in ("project", "annotator"):
        assert_problem(team.call(role, "DELETE", f"/answers/{answer}"), 403, "forbidden")
        assert_problem(team.call(role, "DELETE", f"/labels/{label}"), 403, "forbidden")
    assert_problem(team.import_lines("project", {"kind": "retract", "a": "a", "b": "b"}),
                   403, "forbidden")
    assert [i["retracted_at"] for i in team.answers()] == [None]  # it stands
    assert team.label_id("a", "b") == label
    assert team.call("reviewer", "DELETE", f"/answers/{answer}").status_code == 200


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_a_reviewers_answer_goes_with_the_reviewer_or_admin_key(keyed: TestClient,
                                                                role: str) -> None:
    team = make_team(keyed, "strict")
    _, label = _reviewers_answer(team)
    retracted = team.import_lines(role, {"kind": "retract", "a": "a", "b": "b"})
    assert retracted.status_code == 200 and retracted.json()["labels_retracted"] == 1
    assert team.call("admin", "GET", "/labels?source=asserted").json()["items"] == []
    assert all(i["retracted_at"] for i in team.answers())
    assert_problem(team.call("admin", "DELETE", f"/labels/{label}"), 404, "label-not-found")


def test_a_resolution_survives_the_project_key(keyed: TestClient) -> None:
    team = make_team(keyed, "consensus")
    team.label("project", "a", "b", annotator="ann")
    opened = team.label("project", "a", "b", "negative", annotator="bob").json()
    did = opened["disagreement"]["id"]
    resolved = team.call("reviewer", "POST", f"/disagreements/{did}/resolve",
                         json={"label": "negative"})
    assert resolved.status_code == 200, resolved.text
    answer = next(i for i in team.answers() if i["role"] == "reviewer")
    label = team.label_id("a", "b")
    assert_problem(team.call("project", "DELETE", f"/answers/{answer['id']}"), 403, "forbidden")
    assert_problem(team.call("project", "DELETE", f"/labels/{label}"), 403, "forbidden")
    status = team.call("project", "GET", "/pairs/status?a=a&b=b").json()
    assert status["status"] == "negative"
    assert team.call("admin", "DELETE", f"/labels/{label}").status_code == 200


@pytest.mark.parametrize("policy", POLICIES)
def test_importing_a_reviewers_answers_needs_the_reviewer_or_admin_key(keyed: TestClient,
                                                                       policy: str) -> None:
    team = make_team(keyed, policy)
    lines = ({"kind": "label", "a": "a", "b": "b", "label": "negative"},
             {"kind": "answer", "a": "a", "b": "b", "label": "negative", "role": "reviewer",
              "outcome": "asserted", "label_seq": 1, "created_at": "2026-12-09T01:00:00Z"})
    assert_problem(team.import_lines("project", *lines), 403, "forbidden")
    assert_problem(team.import_lines("annotator", *lines), 403, "forbidden")
    assert team.answers() == []  # nothing stored
    # without the reviewer's role the project key imports answers as before
    plain = (lines[0], {**lines[1], "role": "annotator"})
    assert team.import_lines("project", *plain).status_code == 200
    assert team.import_lines("admin", {**lines[0], "a": "c", "b": "d"},
                             {**lines[1], "a": "c", "b": "d"}).status_code == 200


def test_a_reviewer_key_makes_no_keys(keyed: TestClient) -> None:
    team = make_team(keyed, "consensus")
    for path, body in (("/api-key", None), ("/reviewer-key", None),
                       ("/annotator-keys", {"annotator": "eve"})):
        assert_problem(team.call("reviewer", "POST", path, json=body), 403, "forbidden")
    assert team.call("project", "GET", "/whoami").status_code == 200  # the key still works


@pytest.mark.parametrize("policy", POLICIES)
def test_keys_off_everything_stays_open(client: TestClient, policy: str) -> None:
    pid = client.post("/projects", json={"name": "open", "policy": policy}).json()["id"]
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "a"}, {"name": "b"}]})
    bob = client.post(f"/projects/{pid}/labels", json={"a": "a", "b": "b", "label": "positive",
                                                      "annotator": "bob"}).json()
    assert bob["annotator"] == "bob"
    assert client.get(f"/projects/{pid}/agreement").status_code == 200
    assert client.delete(f"/projects/{pid}/answers/{bob['answer_id']}").status_code == 200
