"""GET agreement as a lead acts on it: against a planted team (known false "no" and false
"yes"), the minority answers listed by ``GET answers?minority=true`` (from the view's cached
computation), the reviewer apart, and both listings as CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, insert, select

import app.services.agreement as agreement_service
from models import Answer, Concept
from tests.api.conftest import ADMIN_KEY, assert_problem, new_project

TRUTHFUL = ("t1", "t2", "t3")
CONCEPTS = [f"c{i}" for i in range(7)]
POSITIVE = [(f"c{i}", f"c{i + 1}") for i in range(6)]  # a chain: each is right after the next
NEGATIVE = [(f"c{i + 1}", f"c{i}") for i in range(6)]


def _insert(database_url: str, pid: int, rows: list[dict[str, Any]]) -> list[int]:
    """Store ``rows`` (``a``, ``b`` by name, ``positive``, ``annotator``, ``role``) as answers,
    in order; their ids."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            ids = dict(connection.execute(select(Concept.name, Concept.id)
                                          .where(Concept.project_id == pid)).all())
            made = []
            for row in rows:
                made.append(connection.execute(insert(Answer).values(
                    project_id=pid, a_id=ids[row["a"]], b_id=ids[row["b"]],
                    positive=row["positive"], annotator=row["annotator"],
                    role=row.get("role", "annotator"), source="api", outcome="agreed",
                    check_question=False, created_at=datetime.now(UTC))
                ).inserted_primary_key[0])
    finally:
        engine.dispose()
    return made


def _planted(client: TestClient, database_url: str, k_no: int = 4, m_yes: int = 3,
             **fields: Any) -> tuple[int, dict[str, list[int]]]:
    """Three truthful annotators, ``x`` answering "no" on ``k_no`` positive pairs and ``y``
    "yes" on ``m_yes`` negative ones (truthful elsewhere), every one on all 12 pairs; and a
    reviewer (``lead``) resolving one pair the way the truth has it. The project, and the ids
    of x's and y's wrong answers."""
    pid = new_project(client, CONCEPTS, **fields)
    rows, wrong = [], {"x": [], "y": []}
    for pair in POSITIVE + NEGATIVE:
        truth = pair in POSITIVE
        for who in (*TRUTHFUL, "x", "y"):
            flip = (who == "x" and truth and POSITIVE.index(pair) < k_no) or (
                who == "y" and not truth and NEGATIVE.index(pair) < m_yes)
            rows.append({"a": pair[0], "b": pair[1], "positive": truth ^ flip,
                         "annotator": who, "wrong": flip})
    rows.append({"a": "c0", "b": "c1", "positive": True, "annotator": "lead",
                 "role": "reviewer", "wrong": False})
    ids = _insert(database_url, pid, rows)
    for row, made in zip(rows, ids, strict=True):
        if row["wrong"]:
            wrong[row["annotator"]].append(made)
    return pid, wrong


def _rows(view: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    return {row["annotator"]: row for row in view["annotators"]}


def _ids(client: TestClient, url: str, **params: Any) -> list[int]:
    response = client.get(url, params=params) if params else client.get(url)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


def test_a_planted_team_shows_its_known_errors(client: TestClient, database_url: str) -> None:
    pid, wrong = _planted(client, database_url, 4, 3)
    view = client.get(f"/projects/{pid}/agreement").json()
    rows = _rows(view)
    assert sorted(rows) == ["t1", "t2", "t3", "x", "y"]  # the reviewer is not among them
    assert view["reviewers"] == [{"annotator": "lead", "resolutions": 1, "final": 1}]
    assert (rows["x"]["false_no"], rows["x"]["false_yes"], rows["x"]["minority"]) == (4, 0, 4)
    assert (rows["y"]["false_no"], rows["y"]["false_yes"], rows["y"]["minority"]) == (0, 3, 3)
    for name in TRUTHFUL:
        assert (rows[name]["false_no"], rows[name]["false_yes"], rows[name]["minority"]) == (
            0, 0, 0)
    assert rows["x"]["minority_url"] == f"/projects/{pid}/answers?annotator=x&minority=true"
    for row in rows.values():
        assert row["answers"] == row["shared_pairs"] == 12 and row["undecided"] == 0
        assert not row["rests_on_prior"] and row["identifiable"] and row["note"] is None
        assert row["trend"] == [{"answers": 12, "agreement": row["agreement"]}]
    assert len(wrong["x"]) == 4 and len(wrong["y"]) == 3


def test_the_minority_filter_lists_exactly_those_answers(client: TestClient,
                                                         database_url: str) -> None:
    pid, wrong = _planted(client, database_url, 4, 3, policy="consensus")
    rows = _rows(client.get(f"/projects/{pid}/agreement").json())
    url = f"/projects/{pid}/answers"
    assert _ids(client, rows["x"]["minority_url"]) == wrong["x"]  # the link as given
    assert _ids(client, url, annotator="y", minority="true") == wrong["y"]
    assert _ids(client, url, annotator="t1", minority="true") == []
    assert _ids(client, url, minority="true") == sorted(wrong["x"] + wrong["y"])
    assert _ids(client, url, minority="true", a="c0") == [wrong["x"][0]]
    # keyset pages, one answer each, walk the same answers
    seen, params = [], {"minority": "true", "limit": 2}
    while True:
        page = client.get(url, params=params).json()
        seen += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        params = {**params, "cursor": page["next_cursor"]}
    assert seen == sorted(wrong["x"] + wrong["y"])
    items = client.get(url, params={"annotator": "x", "minority": "true"}).json()["items"]
    assert {(i["a"], i["b"], i["label"]) for i in items} == {
        (a, b, "negative") for a, b in POSITIVE[:4]}


def test_the_minority_listing_follows_new_answers(client: TestClient,
                                                  database_url: str) -> None:
    pid, wrong = _planted(client, database_url, 2, 0)
    url = f"/projects/{pid}/answers"
    assert _ids(client, url, annotator="x", minority="true") == wrong["x"]
    # x takes one back: their later answer on the pair is the one that counts
    _insert(database_url, pid, [{"a": "c0", "b": "c1", "positive": True, "annotator": "x"}])
    assert _ids(client, url, annotator="x", minority="true") == wrong["x"][1:]
    assert _rows(client.get(f"/projects/{pid}/agreement").json())["x"]["false_no"] == 1


def test_the_minority_listing_reuses_the_views_computation(
        client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pid, wrong = _planted(client, database_url, 3, 2)
    calls = []
    computed = agreement_service.consensus

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return computed(*args, **kw)

    monkeypatch.setattr(agreement_service, "consensus", counted)
    client.get(f"/projects/{pid}/agreement").raise_for_status()
    assert _ids(client, f"/projects/{pid}/answers", annotator="y", minority="true") == wrong["y"]
    client.get(f"/projects/{pid}/agreement", params={"format": "csv"}).raise_for_status()
    assert len(calls) == 1  # one consensus for the view, its CSV and the minority listing


def _csv(response: Any, filename: str) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert f'filename="{filename}"' in response.headers["content-disposition"]
    return list(csv.DictReader(io.StringIO(response.text)))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_the_agreement_csv_is_the_json_flattened(client: TestClient, database_url: str) -> None:
    pid, _ = _planted(client, database_url, 4, 3)
    view = client.get(f"/projects/{pid}/agreement").json()
    rows = _csv(client.get(f"/projects/{pid}/agreement", params={"format": "csv"}),
                f"project-{pid}-agreement.csv")
    assert [row["annotator"] for row in rows] == [r["annotator"] for r in view["annotators"]]
    for row, item in zip(rows, view["annotators"], strict=True):
        for key in ("false_no", "false_yes", "minority", "undecided", "shared_pairs",
                    "answers", "minority_url", "rests_on_prior", "identifiable", "note"):
            assert row[key] == _cell(item[key]), key
        assert float(row["agreement"]) == pytest.approx(item["agreement"])
        assert float(row["accuracy"]) == pytest.approx(item["accuracy"]["estimate"])
        assert float(row["accuracy_low"]) == pytest.approx(item["accuracy"]["low"])
        assert (row["checks_asked"], row["checks_failed"]) == ("0", "0")
        assert row["trend_answers"] == " ".join(str(w["answers"]) for w in item["trend"])
        assert [float(x) for x in row["trend"].split()] == pytest.approx(
            [w["agreement"] for w in item["trend"]], abs=1e-4)


def test_the_answers_csv_holds_every_answer_of_the_listing(client: TestClient,
                                                          database_url: str) -> None:
    pid, wrong = _planted(client, database_url, 4, 3)
    url = f"/projects/{pid}/answers"
    listed = client.get(url, params={"limit": 10_000}).json()["items"]
    rows = _csv(client.get(url, params={"format": "csv", "limit": 1}),  # no pages
                f"project-{pid}-answers.csv")
    assert len(rows) == len(listed) == 12 * 5 + 1
    assert rows == [{k: _cell(v) for k, v in item.items()} for item in listed]
    minority = _csv(client.get(url, params={"format": "csv", "minority": "true"}),
                    f"project-{pid}-answers.csv")
    assert [int(row["id"]) for row in minority] == sorted(wrong["x"] + wrong["y"])


def test_a_bad_format_is_a_problem(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    for path in ("agreement", "answers"):
        body = assert_problem(client.get(f"/projects/{pid}/{path}", params={"format": "xlsx"}),
                              422, "validation-error")
        assert body["errors"][0]["loc"] == ["query", "format"]


def test_an_annotator_key_lists_only_its_own_minority(
        make_client: Callable[..., TestClient], database_url: str) -> None:
    keyed = make_client(admin_key=ADMIN_KEY)
    admin = {"X-API-Key": ADMIN_KEY}
    keyed.headers.update(admin)
    pid, wrong = _planted(keyed, database_url, 4, 3)
    made = keyed.post(f"/projects/{pid}/annotator-keys", json={"annotator": "x"})
    assert made.status_code == 201, made.text
    own = {"X-API-Key": made.json()["api_key"]}
    url = f"/projects/{pid}/answers"
    response = keyed.get(url, params={"minority": "true"}, headers=own)
    assert [item["id"] for item in response.json()["items"]] == wrong["x"]
    assert_problem(keyed.get(url, params={"minority": "true", "annotator": "y"}, headers=own),
                   403, "forbidden")
    rows = _csv(keyed.get(url, params={"format": "csv"}, headers=own),
                f"project-{pid}-answers.csv")
    assert {row["annotator"] for row in rows} == {"x"}
    assert_problem(keyed.get(f"/projects/{pid}/agreement", params={"format": "csv"},
                             headers=own), 403, "forbidden")


def test_an_annotator_nobody_overlaps_rests_on_the_prior(client: TestClient,
                                                         database_url: str) -> None:
    pid = new_project(client, [f"c{i}" for i in range(30)])
    pairs = [(f"c{i}", f"c{i + 1}") for i in range(12)]
    _insert(database_url, pid, [{"a": a, "b": b, "positive": True, "annotator": "solo"}
                                for a, b in pairs])
    _insert(database_url, pid, [{"a": a, "b": b, "positive": True, "annotator": "other"}
                                for a, b in pairs[:9]])
    row = _rows(client.get(f"/projects/{pid}/agreement").json())["solo"]
    assert (row["shared_pairs"], row["rests_on_prior"]) == (9, True)
    assert "mostly the prior (90%)" in row["note"]
    _insert(database_url, pid, [{"a": "c9", "b": "c10", "positive": True, "annotator": "other"}])
    row = _rows(client.get(f"/projects/{pid}/agreement").json())["solo"]
    assert (row["shared_pairs"], row["rests_on_prior"], row["note"]) == (10, False, None)
