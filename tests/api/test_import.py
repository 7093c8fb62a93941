"""POST /projects/{pid}/import: JSON Lines and CSV (docs/formats.md), validated before writing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.services.importing import al_cpl_records, record_json
from reasoning.data import load_domain
from tests.api.conftest import assert_problem, new_project

JSONL = {"Content-Type": "application/jsonl"}


def lines(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def decided(client: TestClient, pid: int) -> set[tuple[str, str, str, str]]:
    body = client.get(f"/projects/{pid}/labels", params={"source": "all", "limit": 10_000}).json()
    assert body["total"] == len(body["items"])
    return {(i["a"], i["b"], i["label"], i["source"]) for i in body["items"]}


def test_jsonl_import_registers_concepts_pool_and_labels_and_closes_them(
        client: TestClient) -> None:
    pid = new_project(client)
    body = lines(
        {"kind": "concept", "name": "limit", "description": "lim"},
        {"kind": "concept", "name": "derivative"},
        {"kind": "concept", "name": "integral"},
        {"kind": "pair", "a": "limit", "b": "integral", "features": [0.5, 1]},
        {"kind": "label", "a": "limit", "b": "derivative", "label": "positive",
         "annotator": "ana"},
        {"kind": "label", "a": "derivative", "b": "integral", "label": "positive"},
    )
    response = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert (summary["concepts_created"], summary["pairs_created"],
            summary["labels_created"], summary["records"]) == (3, 1, 2, 6)
    assert ("limit", "integral", "positive", "inferred") in decided(client, pid)
    pool = client.get(f"/projects/{pid}/pairs").json()["items"]
    assert [(p["a"], p["b"], p["features"], p["status"]) for p in pool] == [
        ("limit", "integral", [0.5, 1.0], "positive")]
    # The same file again changes nothing.
    again = client.post(f"/projects/{pid}/import", content=body, headers=JSONL).json()
    assert (again["concepts_created"], again["pairs_unchanged"],
            again["labels_unchanged"]) == (0, 1, 2)


def test_every_bad_line_is_listed_with_its_number_and_nothing_is_stored(
        client: TestClient) -> None:
    pid = new_project(client, concepts=["x", "y"])
    body = b"\n".join([
        json.dumps({"kind": "concept", "name": "limit"}).encode(),              # 1 good
        b"{not json",                                                           # 2
        b"",                                                                    # 3 blank
        json.dumps({"kind": "pair", "a": "limit", "b": "nowhere",
                    "features": [1.0]}).encode(),                               # 4 unknown
        json.dumps({"kind": "pair", "a": "limit", "b": "x", "features": [1.0, 2.0]}).encode(),
        json.dumps({"kind": "pair", "a": "x", "b": "y", "features": [1.0]}).encode(),  # 6 length
        json.dumps({"kind": "label", "a": "x", "b": "y", "label": "yes"}).encode(),    # 7
        json.dumps({"kind": "label", "a": "x", "b": "y", "label": "positive"}).encode(),
        json.dumps({"kind": "label", "a": "y", "b": "x", "label": "positive"}).encode(),  # 9
        json.dumps({"kind": "concept", "name": "a\nb"}).encode(),              # 10 control
        json.dumps({"kind": "link", "source": "x", "target": "x"}).encode(),   # 11 self
        json.dumps({"kind": "retract", "a": "limit", "b": "x"}).encode(),      # 12 no label
        json.dumps({"kind": "concept", "name": "z", "colour": "red"}).encode(),  # 13 unknown
    ])
    problem = assert_problem(client.post(f"/projects/{pid}/import", content=body,
                                         headers=JSONL), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [2, 4, 6, 7, 9, 10, 11, 12, 13]
    reasons = {e["line"]: e["reason"] for e in problem["errors"]}
    assert "nowhere" in reasons[4] and "features" in reasons[6]
    assert "contradicts" in reasons[9] and "(x, y) positive" in reasons[9]
    assert problem["invalid_lines"] == 9
    detail = client.get(f"/projects/{pid}").json()
    assert detail["counts"]["concepts"] == 2 and detail["version"] == 1
    assert detail["counts"]["pool_pairs"] == 0 and detail["counts"]["asserted_labels"] == 0


def test_csv_files_are_told_apart_by_their_header(client: TestClient) -> None:
    pid = new_project(client)
    concepts = 'name,description\nlimit,"lim, of f"\nderivative,\n"in,tegral",\n'
    pairs = "a,b,f1,f2\nlimit,derivative,0.5,1e3\nderivative,\"in,tegral\",-1,2\n"
    labels = "a,b,label,annotator\nlimit,derivative,positive,ana\nderivative,\"in,tegral\"," \
             "positive,\n"
    for text in (concepts, pairs, labels):
        response = client.post(f"/projects/{pid}/import", content=text.encode(),
                               headers={"Content-Type": "text/csv"})
        assert response.status_code == 200, response.text
    names = {c["name"]: c["description"] for c in
             client.get(f"/projects/{pid}/concepts").json()["items"]}
    assert names == {"limit": "lim, of f", "derivative": None, "in,tegral": None}
    pool = client.get(f"/projects/{pid}/pairs").json()["items"]
    assert [p["features"] for p in pool] == [[0.5, 1000.0], [-1.0, 2.0]]
    assert ("limit", "in,tegral", "positive", "inferred") in decided(client, pid)
    bad = "a,b,f1\nlimit,derivative,0.5\nlimit,derivative,oops\nlimit\n"
    problem = assert_problem(client.post(f"/projects/{pid}/import?format=csv",
                                         content=bad.encode()), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [2, 3, 4]  # 2: length 1, the pool has 2


def test_retractions_replay_the_history(client: TestClient) -> None:
    pid = new_project(client, concepts=["x", "y", "z"])
    body = lines(
        {"kind": "label", "a": "x", "b": "y", "label": "positive"},
        {"kind": "retract", "a": "x", "b": "y"},
        {"kind": "label", "a": "y", "b": "x", "label": "positive"},
        {"kind": "label", "a": "x", "b": "z", "label": "positive"},
    )
    summary = client.post(f"/projects/{pid}/import", content=body, headers=JSONL).json()
    assert (summary["labels_created"], summary["labels_retracted"]) == (3, 1)
    assert ("y", "z", "positive", "inferred") in decided(client, pid)
    history = client.get(f"/projects/{pid}/labels", params={
        "source": "asserted", "include_retracted": True}).json()["items"]
    assert len(history) == 3


def test_a_label_then_its_retraction_imports_into_a_consensus_project(
        client: TestClient) -> None:
    pid = new_project(client, concepts=["x", "y", "z"], policy="consensus")
    body = lines(
        {"kind": "label", "a": "x", "b": "y", "label": "positive"},
        {"kind": "retract", "a": "x", "b": "y"},
        {"kind": "label", "a": "y", "b": "z", "label": "positive"},
    )
    response = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert response.status_code == 200, response.text
    assert ("y", "z", "positive", "asserted") in decided(client, pid)
    assert not any(item[:2] == ("x", "y") for item in decided(client, pid))


def test_import_is_exempt_from_the_body_limit_but_has_its_own(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=1_000, max_import_bytes=50_000)
    pid = new_project(client)
    body = lines(*({"kind": "concept", "name": f"concept {i}"} for i in range(200)))
    assert 1_000 < len(body) < 50_000
    response = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert response.status_code == 200, response.text
    assert response.json()["concepts_created"] == 200
    too_big = lines(*({"kind": "concept", "name": f"c {i}"} for i in range(3_000)))
    assert_problem(client.post(f"/projects/{pid}/import", content=too_big, headers=JSONL),
                   413, "payload-too-large")

    def chunks() -> Any:  # no Content-Length: counted as it streams
        yield too_big
    assert_problem(client.post(f"/projects/{pid}/import", content=chunks(), headers=JSONL),
                   413, "payload-too-large")
    assert_problem(client.post(f"/projects/{pid}/concepts",
                               json={"concepts": [{"name": "n" * 500}] * 3}),
                   413, "payload-too-large")


def test_al_cpl_import_gives_the_closure_of_labeling_through_the_api(
        client: TestClient, al_cpl: Path) -> None:
    domain = load_domain(al_cpl, "data_mining")
    imported = new_project(client)
    body = "".join(record_json(r) + "\n" for r in al_cpl_records(
        al_cpl, "data_mining", with_labels=True)).encode()
    summary = client.post(f"/projects/{imported}/import", content=body, headers=JSONL).json()
    assert (summary["concepts_created"], summary["pairs_created"], summary["labels_created"]) \
        == (len(domain.concepts), len(domain.pairs), len(domain.pairs))
    # Direction (the dataset's README): row Decision_tree_model,Conditional_probability, label 1.
    status = client.get(f"/projects/{imported}/pairs/status", params={
        "a": "Conditional_probability", "b": "Decision_tree_model"}).json()
    assert status["status"] == "positive"

    labeled = new_project(client, concepts=domain.concepts)
    response = client.post(f"/projects/{labeled}/labels/bulk", json={"labels": [
        {"a": a, "b": b, "label": "positive" if y else "negative"}
        for (a, b), y in zip(domain.pairs, domain.labels, strict=True)]})
    assert response.status_code == 201, response.text
    assert decided(client, imported) == decided(client, labeled)


def test_an_empty_import_body_is_refused(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "empty"}).json()["id"]
    response = client.post(f"/projects/{pid}/import", params={"format": "jsonl"}, content=b"")
    problem = assert_problem(response, 422, "validation-error")
    assert problem["errors"][0]["loc"] == ["body"]


def test_a_failure_part_way_through_the_writes_stores_nothing_of_the_file(
        client: TestClient, monkeypatch: Any) -> None:
    import app.services.labels.strict as writing

    pid = new_project(client, concepts=["x"])
    body = lines(
        {"kind": "concept", "name": "limit"},
        {"kind": "concept", "name": "derivative"},
        {"kind": "pair", "a": "limit", "b": "derivative", "features": [1.0]},
        {"kind": "label", "a": "limit", "b": "derivative", "label": "positive"},
    )

    def disk_full(*args: Any) -> None:  # the labels, written after concepts and pool
        raise RuntimeError("disk full")

    monkeypatch.setattr(writing, "write_encoded", disk_full)
    failed = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert failed.status_code == 500
    monkeypatch.undo()
    names = {c["name"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]}
    assert names == {"x"}  # the concepts written before the failure were rolled back too
    assert client.get(f"/projects/{pid}/pairs").json()["total"] == 0
    assert decided(client, pid) == set()
    # The cache was dropped with them: the same file now imports whole.
    again = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert again.status_code == 200 and again.json()["labels_created"] == 1
