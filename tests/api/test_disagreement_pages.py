"""``GET .../disagreements`` in keyset pages: every page walked gives the unpaged set, pages
stay put while disagreements open, a cursor the service did not give is 422, and the page is
read along the ``(project_id, id)`` index (no sort of the whole project on SQLite)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.security import MAX_ID
from app.services.cursors import ANSWERS, DISAGREEMENTS, LABELS
from app.services.disagreements import page_query
from tests.api.conftest import assert_problem, label, new_project

NAMES = [f"c{k}" for k in range(8)]


def _split(client: TestClient, pid: int, a: str, b: str) -> None:
    """Answers that split 1:1 on ``(a, b)``: a tie, an open disagreement."""
    label(client, pid, a, b, annotator="ann")
    assert label(client, pid, a, b, "negative", annotator="bob").json()["disagreement"]


def _walk(client: TestClient, pid: int, state: str, limit: int,
          between: Any = None) -> list[int]:
    """The ids of every page, in order; ``between()`` runs after the first page."""
    ids: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"state": state, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = client.get(f"/projects/{pid}/disagreements", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= limit
        ids += [item["id"] for item in page["items"]]
        if between is not None and cursor is None:
            between()
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


def _team(client: TestClient) -> int:
    """A consensus project with five disagreements, two of them closed by a third answer."""
    pid = new_project(client, NAMES, policy="consensus")
    for k in range(5):
        _split(client, pid, NAMES[k], NAMES[k + 1])
    for k in (1, 3):
        label(client, pid, NAMES[k], NAMES[k + 1], annotator="cy")
    return pid


@pytest.mark.parametrize("state", ["open", "closed", "all"])
def test_walking_every_page_gives_the_unpaged_set(client: TestClient, state: str) -> None:
    pid = _team(client)
    whole = client.get(f"/projects/{pid}/disagreements",
                       params={"state": state, "limit": 1000}).json()
    assert whole["next_cursor"] is None
    expected = [item["id"] for item in whole["items"]]
    assert len(expected) == {"open": 3, "closed": 2, "all": 5}[state]
    assert expected == sorted(expected)  # oldest first
    for limit in (1, 2, 3):
        assert _walk(client, pid, state, limit) == expected
    first = client.get(f"/projects/{pid}/disagreements", params={"state": state, "limit": 1})
    assert first.json()["items"] == whole["items"][:1]  # the same items, page or not


def test_pages_stay_put_while_disagreements_open(client: TestClient) -> None:
    pid = _team(client)
    before = _walk(client, pid, "all", 1000)
    walked = _walk(client, pid, "all", 2, between=lambda: _split(client, pid, "c6", "c7"))
    assert len(walked) == len(set(walked)) == len(before) + 1  # nothing twice, none skipped
    assert walked[:-1] == before and walked[-1] > before[-1]  # the new one on the last page


def test_the_last_full_page_has_no_cursor_and_an_empty_project_one_empty_page(
        client: TestClient) -> None:
    pid = new_project(client, NAMES, policy="consensus")
    assert client.get(f"/projects/{pid}/disagreements").json() == {
        "items": [], "next_cursor": None}
    _split(client, pid, "c0", "c1")
    _split(client, pid, "c1", "c2")
    page = client.get(f"/projects/{pid}/disagreements", params={"limit": 2}).json()
    assert len(page["items"]) == 2 and page["next_cursor"] is None


@pytest.mark.parametrize("cursor", [
    "not-a-cursor", "", LABELS.encode(1, "c0", "c1"), ANSWERS.encode(1) + "=",
    DISAGREEMENTS.encode(1)[:-1] + "!", DISAGREEMENTS.encode(1) + "AA",
])
def test_a_cursor_the_service_did_not_give_is_422(client: TestClient, cursor: str) -> None:
    pid = _team(client)
    response = client.get(f"/projects/{pid}/disagreements", params={"cursor": cursor})
    assert_problem(response, 422, "invalid-cursor")


def test_the_largest_id_is_a_cursor_with_nothing_after_it(client: TestClient) -> None:
    """``MAX_ID`` fits the id column (32-bit on PostgreSQL): an empty last page, not a 500."""
    pid = _team(client)
    response = client.get(f"/projects/{pid}/disagreements",
                          params={"state": "all", "cursor": DISAGREEMENTS.encode(MAX_ID)})
    assert response.status_code == 200, response.text
    assert response.json() == {"items": [], "next_cursor": None}


def test_a_limit_out_of_range_is_422(client: TestClient) -> None:
    pid = _team(client)
    for limit in (0, 10_001):
        response = client.get(f"/projects/{pid}/disagreements", params={"limit": limit})
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("state", ["open", "closed", "all"])
def test_a_page_is_read_along_the_index_without_sorting_the_project(
        database_url: str, state: str) -> None:
    """SQLite's plan of a page: a search of ``ix_disagreements_project_id_id`` in id order,
    no temporary B-tree for the order (the first page costs what it holds)."""
    if not database_url.startswith("sqlite"):
        pytest.skip("the plan is SQLite's")
    query = page_query(7, state, after=12, limit=100)  # type: ignore[arg-type]
    compiled = query.compile(create_engine("sqlite://"),
                             compile_kwargs={"literal_binds": True})
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            plan = [row[-1] for row in conn.execute(text(f"EXPLAIN QUERY PLAN {compiled}"))]
    finally:
        engine.dispose()
    assert any("ix_disagreements_project_id_id" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
