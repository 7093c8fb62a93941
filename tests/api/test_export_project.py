"""GET .../export?format=project: the whole project as JSON Lines that import reads back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api.conftest import label, new_project
from tests.api.databases import database_from_template


@pytest.fixture
def other_client(template: tuple[str, str], tmp_path: Path) -> Iterator[TestClient]:
    """A client of an app on a second, empty database."""
    folder = tmp_path / "other"
    folder.mkdir()
    with database_from_template(template, folder) as url, \
            TestClient(create_app(Settings(database_url=url))) as client:
        yield client


def state(client: TestClient, pid: int) -> dict[str, Any]:
    decided = client.get(f"/projects/{pid}/labels", params={
        "source": "all", "limit": 10_000, "include_retracted": True}).json()["items"]
    # Ties are broken by a draw seeded with the labels seen (asserted and retracted), which an
    # import reproduces: the same questions, in the same order, with the same scores.
    nexts = {}
    for strategy in ("LC-R+", "QBC", "CNT"):
        queries = client.get(f"/projects/{pid}/next", params={
            "strategy": strategy, "k": 3, "fresh": True}).json()["queries"]
        nexts[strategy] = [(q["a"], q["b"], q["score"]) for q in queries]
    return {"decided": sorted((i["a"], i["b"], i["label"], i["source"],
                               i["retracted_at"] is not None) for i in decided),
            "next": nexts}


def test_export_then_import_into_an_empty_database_gives_the_same_project(
        client: TestClient, other_client: TestClient) -> None:
    rng = np.random.default_rng(3)
    names = [f"c{i}" for i in range(9)] + ["=formula, \"quoted\""]
    pairs = [(a, b, rng.normal(size=3).round(6).tolist()) for a in names for b in names
             if a != b and rng.random() < 0.5]
    pid = new_project(client, concepts=names, pairs=pairs, description="source")
    client.patch(f"/projects/{pid}", json={"prediction_model": "logistic_regression"})
    for a, b, value in [("c0", "c1", "positive"), ("c1", "c2", "positive"),
                        ("c3", "c4", "negative"), ("c5", "c6", "positive"),
                        ("c2", "c7", "positive"), ("c8", "=formula, \"quoted\"", "negative")]:
        assert label(client, pid, a, b, value, annotator="ana").status_code == 201
    listed = client.get(f"/projects/{pid}/labels", params={"source": "asserted"}).json()
    wrong = next(i for i in listed["items"] if (i["a"], i["b"]) == ("c5", "c6"))
    assert client.delete(f"/projects/{pid}/labels/{wrong['id']}").status_code == 200
    assert label(client, pid, "c6", "c5", "positive").status_code == 201

    exported = client.get(f"/projects/{pid}/export", params={"format": "project"})
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/jsonl")
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert [r["kind"] for r in records].count("retract") == 1
    assert records[0] == {"kind": "project", "name": "test project", "description": "source",
                          "prediction_model": "logistic_regression", "feature_length": 3}

    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=exported.content,
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["labels_retracted"] == 1
    detail = other_client.get(f"/projects/{target}").json()
    assert (detail["description"], detail["prediction_model"]) == ("source",
                                                                   "logistic_regression")
    again = other_client.get(f"/projects/{target}/export", params={"format": "project"})
    assert again.text == exported.text
    original = state(client, pid)
    assert all(len(queries) == 3 for queries in original["next"].values())
    assert state(other_client, target) == original


def _causes(client: TestClient, pid: int) -> list[tuple[str, str, str, str, Any]]:
    """The listing with each cause named by its label's pair (ids differ between projects)."""
    asserted = client.get(f"/projects/{pid}/labels", params={
        "source": "asserted", "limit": 10_000}).json()["items"]
    pair_of = {i["id"]: (i["a"], i["b"]) for i in asserted}
    items, query = [], {"limit": 10_000}
    while True:
        page = client.get(f"/projects/{pid}/labels", params=query).json()
        items += page["items"]
        if page["next"] is None:
            break
        query["after"] = page["next"]
    return [(i["a"], i["b"], i["label"], i["source"], pair_of[i["caused_by"]]) for i in items]


def test_each_write_is_imported_as_it_was_made_so_the_causes_come_back(
        client: TestClient) -> None:
    names = [f"c{i:03d}" for i in range(260)]
    pid = new_project(client, names)
    assert label(client, pid, names[100], names[101]).status_code == 201
    chain = [{"a": a, "b": b, "label": "positive"} for a, b in zip(names, names[1:], strict=False)]
    assert client.post(f"/projects/{pid}/labels/bulk", json={"labels": chain}).status_code == 201
    assert label(client, pid, names[5], names[0], "negative").status_code == 201
    lines = client.get(f"/projects/{pid}/export", params={"format": "project"}).text.splitlines()
    labels = [json.loads(line) for line in lines if '"kind":"label"' in line]
    assert len({record["batch"] for record in labels}) == 3  # three writes
    for tagged, expect_same in ((True, True), (False, False)):
        body = "\n".join(
            line if tagged or '"kind":"label"' not in line else json.dumps(
                {k: v for k, v in json.loads(line).items() if k != "batch"})
            for line in lines if '"kind":"project"' not in line)
        other = client.post("/projects", json={"name": f"again {tagged}"}).json()["id"]
        response = client.post(f"/projects/{other}/import", content=body.encode(),
                               headers={"Content-Type": "application/jsonl"})
        assert response.status_code == 200, response.text
        same = _causes(client, other) == _causes(client, pid)
        # untagged, the 260 labels are one import into an empty project: the canonical order
        assert same is expect_same
