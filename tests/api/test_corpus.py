"""Texts and links, and pool features sporal computes from them (app.services.corpus)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from reasoning.features import FEATURE_NAMES, corpus_statistics, pair_features
from tests.api.conftest import assert_problem, label, new_project, without_quality

JSONL = {"Content-Type": "application/jsonl"}
CONCEPTS = [
    {"name": "limit", "text": "A limit is a value a function approaches."},
    {"name": "derivative", "text": "The derivative is a limit of difference quotients."},
    {"name": "integral", "text": "The integral uses limits and the derivative."},
    {"name": "series"},
]
LINKS = [("derivative", "limit"), ("integral", "derivative"), ("integral", "limit")]


def computed_project(client: TestClient, pairs: list[tuple[str, str]]) -> int:
    pid = new_project(client)
    assert client.post(f"/projects/{pid}/concepts", json={"concepts": CONCEPTS}).status_code == 201
    response = client.post(f"/projects/{pid}/links", json={"links": [
        {"source": u, "target": v} for u, v in LINKS]})
    assert response.status_code == 201, response.text
    assert response.json() == {"created": 3, "unchanged": 0, "recomputed_pairs": 0}
    response = client.post(f"/projects/{pid}/pairs",
                           json={"pairs": [{"a": a, "b": b} for a, b in pairs]})
    assert response.status_code == 201, response.text
    return pid


def features_of(client: TestClient, pid: int) -> dict[tuple[str, str], list[float]]:
    items = client.get(f"/projects/{pid}/pairs").json()["items"]
    return {(i["a"], i["b"]): i["features"] for i in items}


def expected(texts: dict[str, str], links: list[tuple[str, str]],
             pairs: list[tuple[str, str]]) -> np.ndarray:
    names = [c["name"] for c in CONCEPTS]
    row = {n: i for i, n in enumerate(names)}
    stats = corpus_statistics(names, [texts.get(n, "") for n in names],
                              [(row[u], row[v]) for u, v in links])
    return pair_features(stats, [(row[a], row[b]) for a, b in pairs])


def test_pairs_without_features_get_the_computed_ones(client: TestClient) -> None:
    pairs = [("limit", "derivative"), ("derivative", "integral"), ("series", "limit")]
    pid = computed_project(client, pairs)
    project = client.get(f"/projects/{pid}").json()
    assert project["features_computed"] is True
    assert project["feature_length"] == len(FEATURE_NAMES)
    texts = {c["name"]: c["text"] for c in CONCEPTS if "text" in c}
    got = features_of(client, pid)
    np.testing.assert_allclose([got[p] for p in pairs], expected(texts, LINKS, pairs))
    assert got[("limit", "derivative")][FEATURE_NAMES.index("links_b_to_a")] == 1


def test_a_text_or_link_change_recomputes_every_pool_pair(client: TestClient) -> None:
    pairs = [("limit", "derivative"), ("derivative", "integral")]
    pid = computed_project(client, pairs)
    assert label(client, pid, "limit", "derivative").status_code == 201
    response = client.post(f"/projects/{pid}/links",
                           json={"links": [{"source": "limit", "target": "series"}]})
    assert response.json() == {"created": 1, "unchanged": 0, "recomputed_pairs": 2}
    new_text = "Integrals sum areas; no derivative here."
    response = client.post(f"/projects/{pid}/concepts", json={"concepts": [
        {"name": "integral", "text": new_text}]})
    assert response.status_code == 201
    texts = {c["name"]: c["text"] for c in CONCEPTS if "text" in c} | {"integral": new_text}
    links = [*LINKS, ("limit", "series")]
    got = features_of(client, pid)
    np.testing.assert_allclose([got[p] for p in pairs], expected(texts, links, pairs))
    # the labels and closure survive the rebuild
    status = client.get(f"/projects/{pid}/pairs/status",
                        params={"a": "limit", "b": "derivative"}).json()
    assert status["status"] == "positive"
    response = client.delete(f"/projects/{pid}/links",
                             params={"source": "limit", "target": "series"})
    assert response.json() == {"created": 1, "unchanged": 0, "recomputed_pairs": 2}
    links_now = client.get(f"/projects/{pid}/links").json()
    assert links_now["total"] == 3


def test_features_and_no_features_do_not_mix(client: TestClient) -> None:
    pid = computed_project(client, [("limit", "derivative")])
    response = client.post(f"/projects/{pid}/pairs", json={"pairs": [
        {"a": "limit", "b": "series", "features": [1.0]}]})
    body = assert_problem(response, 422, "invalid-items")
    assert "computed" in body["errors"][0]["reason"]
    client_pid = new_project(client, ["a", "b", "c"], [("a", "b", [0.5])])
    response = client.post(f"/projects/{client_pid}/pairs", json={"pairs": [{"a": "b", "b": "c"}]})
    assert_problem(response, 422, "invalid-items")


def test_links_name_known_concepts_and_two_of_them(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    response = client.post(f"/projects/{pid}/links", json={"links": [{"source": "a",
                                                                      "target": "zz"}]})
    assert_problem(response, 422, "unknown-concept")
    response = client.post(f"/projects/{pid}/links", json={"links": [{"source": "a",
                                                                      "target": "a"}]})
    assert_problem(response, 422, "invalid-items")


def lines(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_import_text_and_link_records_and_export_import_gives_the_same_features(
        client: TestClient) -> None:
    pid = new_project(client)
    body = lines(
        {"kind": "concept", "name": "limit", "text": CONCEPTS[0]["text"]},
        {"kind": "concept", "name": "derivative"},
        {"kind": "concept", "name": "integral"},
        {"kind": "text", "name": "derivative", "text": CONCEPTS[1]["text"]},
        {"kind": "link", "source": "derivative", "target": "limit"},
        {"kind": "pair", "a": "limit", "b": "derivative"},
        {"kind": "pair", "a": "derivative", "b": "integral"},
        {"kind": "label", "a": "limit", "b": "derivative", "label": "positive"},
    )
    response = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert (summary["texts_set"], summary["links_created"], summary["pairs_created"]) == \
        (1, 1, 2)
    exported = client.get(f"/projects/{pid}/export", params={"format": "project"}).content
    records = [json.loads(line) for line in exported.decode().splitlines()]
    assert records[0]["features"] == "computed"
    assert all("features" not in r for r in records if r["kind"] == "pair")
    other = new_project(client)
    response = client.post(f"/projects/{other}/import", content=exported, headers=JSONL)
    assert response.status_code == 200, response.text
    assert features_of(client, other) == features_of(client, pid)
    again = client.get(f"/projects/{other}/export", params={"format": "project"}).content
    assert without_quality(again) == without_quality(exported)


def test_import_refuses_a_pair_without_features_in_a_client_project(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", [0.5])])
    body = lines({"kind": "pair", "a": "b", "b": "c"},
                 {"kind": "link", "source": "a", "target": "a"})
    response = client.post(f"/projects/{pid}/import", content=body, headers=JSONL)
    errors = assert_problem(response, 422, "invalid-items")["errors"]
    assert [e["line"] for e in errors] == [1, 2]


def test_pool_suggest_returns_new_pairs_both_ways_and_registers_them(client: TestClient) -> None:
    pid = computed_project(client, [("limit", "derivative")])
    response = client.post(f"/projects/{pid}/pool/suggest", params={"per_concept": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    pairs = {(i["a"], i["b"]) for i in body["items"]}
    assert body["registered"] == 0 and pairs
    assert ("limit", "derivative") not in pairs  # already in the pool
    assert all((b, a) in pairs or (b, a) == ("limit", "derivative") for a, b in pairs)
    linked = {(i["a"], i["b"]): i["link_distance"] for i in body["items"]}
    assert linked[("integral", "limit")] == 1
    response = client.post(f"/projects/{pid}/pool/suggest",
                           params={"per_concept": 2, "register": "true"})
    assert response.json()["registered"] == len(pairs)
    pool = features_of(client, pid)
    assert pairs <= set(pool) and len(pool) == len(pairs) + 1
    again = client.post(f"/projects/{pid}/pool/suggest", params={"per_concept": 2}).json()
    assert again["items"] == []


def test_pool_suggest_cannot_register_into_a_client_features_pool(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", [0.5])])
    client.post(f"/projects/{pid}/links", json={"links": [{"source": "c", "target": "a"}]})
    response = client.post(f"/projects/{pid}/pool/suggest", params={"register": "true"})
    assert_problem(response, 422, "invalid-items")


def test_a_rename_recomputes_the_features_of_a_computed_project(client: TestClient) -> None:
    pairs = [("limit", "derivative"), ("derivative", "integral")]
    pid = computed_project(client, pairs)
    before = features_of(client, pid)[("derivative", "integral")]
    response = client.post(f"/projects/{pid}/concepts/rename",
                           json={"name": "derivative", "new_name": "slope"})
    assert response.status_code == 200, response.text
    after = features_of(client, pid)[("slope", "integral")]
    mentions = FEATURE_NAMES.index("mentions_of_a_in_b")
    assert before[mentions] == 1 and after[mentions] == 0  # the integral's text names no slope
    project = client.get(f"/projects/{pid}").json()
    assert project["features_computed"] is True
