"""GET /projects/{pid}/answers: every answer kept, whatever became of it; filters and pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_KEY, assert_problem, label, new_project

CHAIN = ["limit", "derivative", "integral", "series"]


def _answers(client: TestClient, pid: int, **params: Any) -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/answers", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def _seen(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(i["a"], i["b"], i["label"], i["annotator"], i["source"], i["outcome"])
            for i in items]


def test_every_write_path_records_its_answers(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    first = label(client, pid, "limit", "derivative", annotator="ana")
    assert first.status_code == 201
    agreeing = label(client, pid, "limit", "derivative", annotator="bo")
    assert agreeing.status_code == 201
    assert label(client, pid, "limit", "derivative", annotator="ana").status_code == 200  # repeat
    assert_problem(label(client, pid, "derivative", "limit", annotator="cy"), 409,
                   "contradiction")
    label(client, pid, "integral", "series", "negative")  # anonymous
    bulk = client.post(f"/projects/{pid}/labels/bulk", json={"labels": [
        {"a": "derivative", "b": "integral", "label": "positive", "annotator": "dee"}]})
    assert bulk.status_code == 201, bulk.text
    imported = client.post(
        f"/projects/{pid}/import", headers={"Content-Type": "application/jsonl"},
        content=json.dumps({"kind": "label", "a": "series", "b": "limit", "label": "negative",
                            "annotator": "eve"}).encode())
    assert imported.status_code == 200, imported.text
    assert label(client, pid, "series", "derivative", "negative", annotator="ls:1:user:3",
                 source="labelstudio").status_code == 201
    items = _answers(client, pid)
    assert _seen(items) == [
        ("limit", "derivative", "positive", "ana", "api", "asserted"),
        ("limit", "derivative", "positive", "bo", "api", "agreed"),
        ("derivative", "limit", "positive", "cy", "api", "refused"),
        ("integral", "series", "negative", None, "api", "asserted"),
        ("derivative", "integral", "positive", "dee", "bulk", "asserted"),
        ("series", "limit", "negative", "eve", "import", "asserted"),
        ("series", "derivative", "negative", "ls:1:user:3", "labelstudio", "asserted"),
    ]
    ids = [i["id"] for i in items]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert first.json()["answer_id"] == ids[0] and agreeing.json()["answer_id"] == ids[1]
    assert all(i["role"] == "annotator" and i["retracted_at"] is None for i in items)
    assert all(i["created_at"] for i in items)


def test_a_retracted_label_keeps_its_answers_marked_retracted(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    made = label(client, pid, "limit", "derivative", annotator="ana").json()
    label(client, pid, "limit", "derivative", annotator="bo")
    label(client, pid, "integral", "series", annotator="ana")
    assert client.delete(f"/projects/{pid}/labels/{made['id']}").status_code == 200
    items = _answers(client, pid)
    assert [(i["annotator"], i["retracted_at"] is not None) for i in items] == [
        ("ana", True), ("bo", True), ("ana", False)]


def test_filters_by_annotator_and_by_pair(client: TestClient) -> None:
    pid = new_project(client, CHAIN)
    label(client, pid, "limit", "derivative", annotator="ana")
    label(client, pid, "limit", "derivative", annotator="bo")
    label(client, pid, "derivative", "integral", annotator="bo")
    label(client, pid, "limit", "series", "negative", annotator="ana")
    pairs = {(i["a"], i["b"], i["annotator"]) for i in _answers(client, pid, annotator="bo")}
    assert pairs == {("limit", "derivative", "bo"), ("derivative", "integral", "bo")}
    assert [i["annotator"] for i in _answers(client, pid, a="limit", b="derivative")] == [
        "ana", "bo"]
    assert {i["b"] for i in _answers(client, pid, a="limit")} == {"derivative", "series"}
    assert {i["a"] for i in _answers(client, pid, b="integral")} == {"derivative"}
    assert _answers(client, pid, annotator="nobody") == []
    assert _answers(client, pid, annotator="ana", b="integral") == []
    label(client, pid, "integral", "series", "negative")  # anonymous
    assert [(i["a"], i["annotator"]) for i in _answers(client, pid, anonymous="true")] == [
        ("integral", None)]
    assert len(_answers(client, pid, anonymous="false")) == 5
    assert_problem(client.get(f"/projects/{pid}/answers",
                              params={"anonymous": "true", "annotator": "ana"}), 422,
                   "validation-error")
    assert_problem(client.get(f"/projects/{pid}/answers", params={"a": "nope"}), 422,
                   "unknown-concept")


def test_keyset_pages_walk_every_answer_once(client: TestClient) -> None:
    names = [f"c{i:02d}" for i in range(12)]
    pid = new_project(client, names)
    for i, (a, b) in enumerate(zip(names, names[1:], strict=False)):
        label(client, pid, a, b, annotator=f"ann{i % 3}")
    everything = _answers(client, pid, limit=1000)
    assert len(everything) == 11
    walked: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 4}
    pages = 0
    while True:
        page = client.get(f"/projects/{pid}/answers", params=params).json()
        pages += 1
        walked += page["items"]
        if page["next_cursor"] is None:
            break
        if pages == 1:  # an answer arriving while paging comes at the end, shifting nothing
            label(client, pid, names[0], names[11], "positive", annotator="late")
        params["cursor"] = page["next_cursor"]
    assert pages == 3
    assert [i["id"] for i in walked[:11]] == [i["id"] for i in everything]
    assert walked[-1]["annotator"] == "late"
    page = client.get(f"/projects/{pid}/answers", params={"annotator": "ann1", "limit": 2}).json()
    rest = client.get(f"/projects/{pid}/answers", params={
        "annotator": "ann1", "limit": 2, "cursor": page["next_cursor"]}).json()
    assert {i["annotator"] for i in page["items"] + rest["items"]} == {"ann1"}
    assert len(page["items"] + rest["items"]) == 4 and rest["next_cursor"] is None
    for bad in ("not-a-cursor", "eyJ4IjoxfQ", "!!"):
        assert_problem(client.get(f"/projects/{pid}/answers", params={"cursor": bad}), 422,
                       "invalid-cursor")


def test_answers_need_the_project_key(make_client: Callable[..., TestClient]) -> None:
    keyed = make_client(admin_key=ADMIN_KEY)
    created = keyed.post("/projects", json={"name": "p"}, headers={"X-API-Key": ADMIN_KEY})
    pid, key = created.json()["id"], created.json()["api_key"]
    assert_problem(keyed.get(f"/projects/{pid}/answers"), 401, "unauthorized")
    response = keyed.get(f"/projects/{pid}/answers", headers={"X-API-Key": key})
    assert response.status_code == 200 and response.json() == {"items": [],
                                                                "next_cursor": None}
    assert_problem(keyed.get("/projects/999999/answers", headers={"X-API-Key": ADMIN_KEY}),
                   404, "project-not-found")
