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
from tests.api.conftest import label, new_project, without_quality
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
    assert without_quality(again.text) == without_quality(exported.text)
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


def _evidence(client: TestClient, pid: int) -> list[tuple[Any, ...]]:
    items = client.get(f"/projects/{pid}/answers", params={"limit": 10_000}).json()["items"]
    return [tuple(v for k, v in item.items() if k != "id") for item in items]


def _team_project(client: TestClient, **fields: Any) -> int:
    """Agreeing, refused, anonymous, retracted and bulk answers, and the question set."""
    names = ["limit", "derivative", "integral", "series", "vector"]
    pid = new_project(client, names, question="Must one learn {a} before {b}?", **fields)
    label(client, pid, "limit", "derivative", annotator="ana")
    label(client, pid, "limit", "derivative", annotator="bo")
    label(client, pid, "derivative", "limit", annotator="cy")  # refused in strict
    wrong = label(client, pid, "series", "vector", annotator="ana").json()["id"]
    label(client, pid, "series", "vector", annotator="bo")
    assert client.delete(f"/projects/{pid}/labels/{wrong}").status_code == 200
    label(client, pid, "series", "vector", "negative", annotator="cy")
    label(client, pid, "integral", "series", "negative")  # anonymous
    client.post(f"/projects/{pid}/labels/bulk", json={"labels": [
        {"a": "derivative", "b": "integral", "label": "positive", "annotator": "dee"},
        {"a": "limit", "b": "vector", "label": "negative", "annotator": "dee"}]})
    return pid


@pytest.mark.parametrize("policy", ["strict", "consensus"])
def test_answers_policy_and_question_come_back_identical(
        client: TestClient, other_client: TestClient, policy: str) -> None:
    pid = _team_project(client, policy=policy)
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    records = [json.loads(line) for line in exported.splitlines()]
    assert records[0]["question"] == "Must one learn {a} before {b}?"
    assert records[0].get("policy", "strict") == policy
    answers = [r for r in records if r["kind"] == "answer"]
    assert len(answers) == len(_evidence(client, pid)) == 9
    disagreements = [r for r in records if r["kind"] == "disagreement"]
    # the evidence comes last, then what was in dispute
    assert records[len(records) - len(answers) - len(disagreements):] == \
        answers + disagreements
    assert (disagreements != []) is (policy == "consensus")

    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=exported.encode(),
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["answers_created"] == 9
    detail = other_client.get(f"/projects/{target}").json()
    assert (detail["policy"], detail["question"]) == (policy, "Must one learn {a} before {b}?")
    again = other_client.get(f"/projects/{target}/export", params={"format": "project"}).text
    assert without_quality(again) == without_quality(exported)
    assert _evidence(other_client, target) == _evidence(client, pid)
    views = [c.get(f"/projects/{p}/agreement").json() for c, p in
             ((other_client, target), (client, pid))]
    assert [view.pop("as_of")["current"] for view in views] == [True, True]
    assert views[0] == views[1]
    if policy == "consensus":  # the consensus, and what is in dispute, follow the answers
        def open_pairs(c: TestClient, p: int) -> list[tuple[str, str]]:
            return sorted((d["a"], d["b"]) for d in c.get(
                f"/projects/{p}/disagreements", params={"state": "open"}).json()["items"])
        assert open_pairs(other_client, target) == open_pairs(client, pid) != []
    # each answer stands behind its label again: retracting the label retracts its answers
    live = {(i["a"], i["b"]): i["id"] for i in other_client.get(
        f"/projects/{target}/labels", params={"source": "asserted"}).json()["items"]}
    other_client.delete(f"/projects/{target}/labels/{live[('limit', 'derivative')]}")
    retracted = {(i["a"], i["b"], i["annotator"]) for i in other_client.get(
        f"/projects/{target}/answers").json()["items"] if i["retracted_at"] is not None}
    assert retracted == {("limit", "derivative", "ana"), ("limit", "derivative", "bo"),
                         ("series", "vector", "ana"), ("series", "vector", "bo")}


def test_an_export_without_answers_imports_its_labels_as_answers(
        client: TestClient, other_client: TestClient) -> None:
    pid = _team_project(client)
    lines = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    old = "\n".join(line for line in lines.splitlines() if '"kind":"answer"' not in line)
    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=old.encode(),
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["answers_created"] == 0
    evidence = other_client.get(f"/projects/{target}/answers").json()["items"]
    assert [(i["a"], i["b"], i["annotator"], i["source"], i["outcome"], i["retracted_at"]
             is not None) for i in evidence] == [
        ("limit", "derivative", "ana", "import", "asserted", False),
        ("series", "vector", "ana", "import", "asserted", True),
        ("series", "vector", "cy", "import", "asserted", False),
        ("integral", "series", None, "import", "asserted", False),
        ("derivative", "integral", "dee", "import", "asserted", False),
        ("limit", "vector", "dee", "import", "asserted", False)]


def test_bad_answer_records_are_refused_with_their_lines(client: TestClient) -> None:
    pid = new_project(client, ["x", "y"])
    good = {"kind": "answer", "a": "x", "b": "y", "label": "positive", "outcome": "refused",
            "created_at": "2026-01-02T03:04:05+00:00"}
    body = "\n".join(json.dumps(r) for r in [
        {"kind": "label", "a": "x", "b": "y", "label": "positive"},
        {**good, "label_seq": 2},
        {**good, "a": "nope"},
        {**good, "outcome": "maybe"},
        {**good, "created_at": "yesterday"},
        {**good, "role": "boss"},
        good])
    response = client.post(f"/projects/{pid}/import", content=body.encode(),
                           headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 422, response.text
    assert sorted(e["line"] for e in response.json()["errors"]) == [2, 3, 4, 5, 6]
    assert client.get(f"/projects/{pid}/answers").json()["items"] == []
    response = client.post(f"/projects/{pid}/import", content=body.split("\n", 1)[0].encode()
                           + b"\n" + json.dumps(good).encode(),
                           headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 200, response.text
    items = client.get(f"/projects/{pid}/answers").json()["items"]
    assert [(i["outcome"], i["source"], i["created_at"][:19]) for i in items] == [
        ("refused", "import", "2026-01-02T03:04:05")]


def _reviewed_project(client: TestClient) -> int:
    """Disagreements closed by answers, a retraction and a reviewer; resolutions undone and
    standing; one reopened by the reviewer."""
    pid = new_project(client, ["a", "b", "c", "d", "e"], policy="consensus")
    for a, b in (("a", "b"), ("c", "d"), ("a", "e")):
        label(client, pid, a, b, annotator="ann")
        label(client, pid, a, b, "negative", annotator="bob")
    items = client.get(f"/projects/{pid}/disagreements").json()["items"]
    ids = {(i["a"], i["b"]): i["id"] for i in items}
    base = f"/projects/{pid}/disagreements"
    client.post(f"{base}/{ids[('a', 'b')]}/resolve", json={"label": "negative",
                                                           "annotator": "rev"})
    client.post(f"{base}/{ids[('a', 'b')]}/resolve", json={"label": "positive"})
    assert client.post(f"{base}/{ids[('a', 'b')]}/undo").status_code == 200
    client.post(f"{base}/{ids[('c', 'd')]}/resolve", json={"label": "positive"})
    assert client.post(f"{base}/{ids[('c', 'd')]}/reopen").status_code == 200
    [bob] = [i["id"] for i in client.get(f"/projects/{pid}/answers").json()["items"]
             if (i["a"], i["b"], i["annotator"]) == ("a", "e", "bob")]
    assert client.delete(f"/projects/{pid}/answers/{bob}").status_code == 200
    return pid


@pytest.mark.parametrize("policy", ["consensus", "strict"])
def test_resolutions_and_close_reasons_come_back_identical(
        client: TestClient, other_client: TestClient, policy: str) -> None:
    pid = _reviewed_project(client)
    if policy == "strict":
        assert client.patch(f"/projects/{pid}", json={"policy": "strict"}).status_code == 200
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    records = [json.loads(line) for line in exported.splitlines()]
    disputes = [r for r in records if r["kind"] == "disagreement"]
    assert any(len(r.get("resolutions", [])) == 2 for r in disputes)
    assert any("reopened_at" in r for r in disputes) is (policy == "consensus")
    assert {r.get("closed_reason") for r in disputes} >= (
        {"reviewer", None} if policy == "consensus" else {"policy"})
    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=exported.encode(),
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["disagreements_created"] == len(disputes)
    again = other_client.get(f"/projects/{target}/export", params={"format": "project"}).text
    assert without_quality(again) == without_quality(exported)
    listing = {k: [{**i, "id": 0} for i in c.get(f"/projects/{p}/disagreements", params={
        "state": "all"}).json()["items"]] for k, c, p in (("src", client, pid),
                                                          ("dst", other_client, target))}
    for item in listing["src"] + listing["dst"]:  # answer ids differ between the databases
        item["resolutions"] = [{**r, "answer_id": 0} for r in item["resolutions"]]
        for side in ("positive", "negative"):
            item[side] = [{**x, "id": 0} for x in item[side]]
        item["proof"] = [{**x, "id": 0} for x in item["proof"]]
    assert listing["dst"] == listing["src"]


def test_bad_disagreement_records_are_refused_with_their_lines(client: TestClient) -> None:
    pid = new_project(client, ["x", "y"])
    review = {"kind": "answer", "a": "x", "b": "y", "label": "positive", "outcome": "asserted",
              "role": "reviewer", "created_at": "2026-01-02T03:04:05+00:00"}
    good = {"kind": "disagreement", "a": "x", "b": "y", "opened_at": "2026-01-02T03:00:00Z"}
    body = "\n".join(json.dumps(r) for r in [
        {**review, "role": "annotator"},
        review,
        {**good, "resolutions": [1]},  # not a reviewer's answer
        {**good, "resolutions": [3]},  # no such answer before it
        {**good, "closed_at": "2026-01-02T04:00:00Z"},  # no reason
        {**good, "closed_reason": "whim", "closed_at": "2026-01-02T04:00:00Z"},
        {**good, "a": "nope"},
        {**good, "resolutions": [2], "closed_reason": "reviewer",
         "closed_at": "2026-01-02T04:00:00Z"}])
    response = client.post(f"/projects/{pid}/import", content=body.encode(),
                           headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 422, response.text
    assert sorted(e["line"] for e in response.json()["errors"]) == [3, 4, 5, 6, 7]


@pytest.mark.parametrize("policy", ["strict", "consensus"])
def test_confidence_and_contested_come_back_identical_in_every_export(
        client: TestClient, other_client: TestClient, policy: str) -> None:
    """Each decided pair's confidence and contested flag are computed from what the project
    export carries (its answers, labels, policy and disagreements): an import gives them back."""
    pid = _team_project(client, policy=policy)
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    target = new_project(other_client)
    imported = other_client.post(f"/projects/{target}/import", content=exported.encode(),
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    for fmt in ("csv", "json", "graphml"):
        mine = client.get(f"/projects/{pid}/export", params={"format": fmt}).text
        theirs = other_client.get(f"/projects/{target}/export", params={"format": fmt}).text
        assert theirs.replace(f"project-{target}", "") == mine.replace(f"project-{pid}", "") \
            or fmt == "json"
    items = client.get(f"/projects/{pid}/export", params={"format": "json"}).json()["items"]
    again = other_client.get(f"/projects/{target}/export",
                             params={"format": "json"}).json()["items"]
    assert [(i["a"], i["b"], i["confidence"], i["contested"]) for i in items] == [
        (i["a"], i["b"], i["confidence"], i["contested"]) for i in again]
    assert all(0.0 <= i["confidence"] <= 1.0 for i in items)
    by_pair = {(i["a"], i["b"]): i for i in items}
    # (limit, derivative): two agreeing annotators and cy's refused/contested reverse answer
    if policy == "strict":  # no live answer contradicts it: trusted
        assert by_pair[("limit", "derivative")]["confidence"] == 1.0
        assert not any(i["contested"] for i in items)
    else:  # the posterior of two agreeing answers; a 1:1 split is contested
        assert 0.9 < by_pair[("limit", "derivative")]["confidence"] < 1.0
        assert any(i["contested"] for i in items)


@pytest.mark.parametrize("policy", ["strict", "consensus"])
def test_the_project_export_gives_each_live_label_its_confidence(
        client: TestClient, policy: str) -> None:
    pid = _team_project(client, policy=policy)
    lines = [json.loads(line) for line in client.get(
        f"/projects/{pid}/export", params={"format": "project"}).text.splitlines()]
    items = client.get(f"/projects/{pid}/export", params={"format": "json"}).json()["items"]
    shown = {(i["a"], i["b"]): (i["confidence"], i["contested"]) for i in items
             if i["source"] == "asserted"}
    retracted = {(r["a"], r["b"]) for r in lines if r["kind"] == "retract"}
    live = {(r["a"], r["b"]): (r.get("confidence"), r.get("contested")) for r in lines
            if r["kind"] == "label" and "confidence" in r}
    assert live and live == shown
    assert all("confidence" not in r for r in lines if r["kind"] == "label"
               and (r["a"], r["b"]) in retracted and (r["a"], r["b"]) not in shown)


def test_the_exports_say_how_right_the_map_is_and_an_import_checks_and_skips_it(
        client: TestClient, other_client: TestClient) -> None:
    """The JSON export's ``quality`` is ``GET quality``'s body; the project export's
    ``quality`` record, after the ``project`` record, its counts; an import checks the
    record's fields and reads nothing of it."""
    names = [f"c{i}" for i in range(6)]
    rng = np.random.default_rng(8)
    pairs = [(a, b, rng.normal(size=2).round(6).tolist()) for a in names for b in names
             if a != b]
    pid = new_project(client, names, pairs, policy="consensus")
    for a, b, value, who in [("c0", "c1", "positive", "ana"), ("c0", "c1", "positive", "bo"),
                             ("c1", "c2", "positive", "ana"), ("c3", "c4", "negative", "bo"),
                             ("c2", "c5", "positive", "ana"), ("c2", "c5", "negative", "bo")]:
        assert label(client, pid, a, b, value, annotator=who).status_code in (200, 201)
    client.get(f"/projects/{pid}/quality", params={"fresh": "true"})  # the model settles
    shown = client.get(f"/projects/{pid}/quality").json()
    assert shown["decided"] > 0 and shown["decided_wrong"]["estimate"] > 0
    assert client.get(f"/projects/{pid}/export", params={"format": "json"}).json()[
        "quality"] == shown
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
    records = [json.loads(line) for line in exported.splitlines()]
    assert [r["kind"] for r in records[:2]] == ["project", "quality"]
    assert records[1] == {"kind": "quality", **{k: v for k, v in shown.items()
                                                if k != "model" and v is not None}}
    assert [r["kind"] for r in records].count("quality") == 1
    target = new_project(other_client)
    planted = {**records[1], "decided": 10**6}  # an import does not read it
    body = "\n".join([exported.splitlines()[0], json.dumps(planted),
                      *exported.splitlines()[2:]]).encode()
    imported = other_client.post(f"/projects/{target}/import", content=body,
                                 headers={"Content-Type": "application/jsonl"})
    assert imported.status_code == 200, imported.text
    assert other_client.get(f"/projects/{target}/quality").json()["decided"] == \
        shown["decided"]
    bad = [{**records[1], "decided": -1}, {**records[1], "decided_wrong": {"estimate": 1}},
           {**records[1], "wrong": 3}]
    response = other_client.post(
        f"/projects/{target}/import", content="\n".join(map(json.dumps, bad)).encode(),
        headers={"Content-Type": "application/jsonl"})
    assert response.status_code == 422, response.text
    assert sorted(e["line"] for e in response.json()["errors"]) == [1, 2, 3]
