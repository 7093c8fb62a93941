"""Correcting data: rename, delete a concept or a pool pair, merge two concepts."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import assert_problem, label, new_project

F = [0.5]


def decided(client: TestClient, pid: int) -> set[tuple[str, str, str]]:
    body = client.get(f"/projects/{pid}/labels", params={"source": "all", "limit": 10_000}).json()
    return {(i["a"], i["b"], i["label"]) for i in body["items"]}


def pool(client: TestClient, pid: int) -> set[tuple[str, str]]:
    return {(i["a"], i["b"]) for i in client.get(f"/projects/{pid}/pairs").json()["items"]}


def test_rename_keeps_labels_pool_and_proofs(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", F), ("b", "c", F)])
    assert label(client, pid, "a", "b").status_code == 201
    response = client.post(f"/projects/{pid}/concepts/rename",
                           json={"name": "a", "new_name": "alpha"})
    assert response.status_code == 200, response.text
    assert response.json()["name"] == "alpha"
    assert ("alpha", "b", "positive") in decided(client, pid)
    assert pool(client, pid) == {("alpha", "b"), ("b", "c")}
    status = client.get(f"/projects/{pid}/pairs/status", params={"a": "alpha", "b": "b"}).json()
    assert status["proof"][0]["a"] == "alpha"
    taken = client.post(f"/projects/{pid}/concepts/rename", json={"name": "b", "new_name": "c"})
    assert_problem(taken, 422, "invalid-items")
    gone = client.post(f"/projects/{pid}/concepts/rename", json={"name": "a", "new_name": "z"})
    assert_problem(gone, 422, "unknown-concept")


def test_a_concept_in_use_is_not_deleted_and_the_labels_are_named(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", F), ("b", "c", F), ("c", "a", F)])
    lid = label(client, pid, "a", "b").json()["id"]
    body = assert_problem(client.delete(f"/projects/{pid}/concepts", params={"name": "b"}),
                          409, "in-use")
    assert body["labels"] == [{"id": lid, "a": "a", "b": "b", "label": "positive"}]
    assert client.delete(f"/projects/{pid}/labels/{lid}").status_code == 200
    response = client.delete(f"/projects/{pid}/concepts", params={"name": "b"})
    assert response.status_code == 200, response.text
    assert response.json() == {"name": "b", "pool_pairs": 2, "answers_kept": 1}  # retracted
    assert pool(client, pid) == {("c", "a")}
    detail = client.get(f"/projects/{pid}").json()
    assert detail["counts"]["concepts"] == 2 and detail["counts"]["pool_pairs"] == 1
    assert client.get(f"/projects/{pid}/next").json()["queries"][0]["a"] == "c"


def test_a_pool_pair_with_a_live_label_stays_an_inferred_one_goes(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", F), ("b", "c", F), ("a", "c", F)])
    lid = label(client, pid, "a", "b").json()["id"]
    label(client, pid, "b", "c")
    body = assert_problem(client.delete(f"/projects/{pid}/pairs", params={"a": "a", "b": "b"}),
                          409, "in-use")
    assert [item["id"] for item in body["labels"]] == [lid]
    response = client.delete(f"/projects/{pid}/pairs", params={"a": "a", "b": "c"})
    assert response.status_code == 204
    assert pool(client, pid) == {("a", "b"), ("b", "c")}
    assert ("a", "c", "positive") in decided(client, pid)  # still inferred, just not pooled
    assert_problem(client.delete(f"/projects/{pid}/pairs", params={"a": "a", "b": "c"}),
                   422, "invalid-items")


def test_merge_moves_labels_pool_and_closes_them_again(client: TestClient) -> None:
    pid = new_project(client, ["limit", "lim", "derivative", "integral"], [
        ("lim", "derivative", F), ("limit", "derivative", F), ("derivative", "integral", F),
        ("lim", "integral", F)])
    label(client, pid, "lim", "derivative")
    label(client, pid, "limit", "derivative")  # a duplicate once merged
    label(client, pid, "derivative", "integral")
    response = client.post(f"/projects/{pid}/concepts/merge",
                           json={"keep": "limit", "merge": "lim"})
    assert response.status_code == 200, response.text
    assert response.json() == {"keep": "limit", "merged": "lim", "labels_moved": 1,
                               "labels_dropped": 1, "pool_pairs_moved": 1,
                               "pool_pairs_dropped": 1, "disagreements_opened": 0,
                               "disagreements_closed": 0}
    assert pool(client, pid) == {("limit", "derivative"), ("derivative", "integral"),
                                 ("limit", "integral")}
    assert ("limit", "integral", "positive") in decided(client, pid)
    assert not any("lim" in (a, b) for a, b, _ in decided(client, pid))
    names = [c["name"] for c in client.get(f"/projects/{pid}/concepts").json()["items"]]
    assert names == ["limit", "derivative", "integral"]
    asserted = client.get(f"/projects/{pid}/labels", params={"source": "asserted"}).json()
    assert {(i["a"], i["b"]) for i in asserted["items"]} == {
        ("limit", "derivative"), ("derivative", "integral")}


def test_a_merge_that_contradicts_is_refused_with_its_proof(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c", "d"])
    first = label(client, pid, "a", "b").json()["id"]
    second = label(client, pid, "b", "c").json()["id"]
    # a < b < c: c and a cannot be one concept
    body = assert_problem(client.post(f"/projects/{pid}/concepts/merge",
                                      json={"keep": "a", "merge": "c"}), 409, "contradiction")
    assert {ref["id"] for ref in body["proof"]} == {first, second}
    assert {(ref["a"], ref["b"]) for ref in body["proof"]} == {("a", "b"), ("b", "c")}
    # a label between the two themselves
    body = assert_problem(client.post(f"/projects/{pid}/concepts/merge",
                                      json={"keep": "b", "merge": "a"}), 409, "contradiction")
    assert [ref["id"] for ref in body["proof"]] == [first]
    # opposite labels that become one pair
    label(client, pid, "d", "c", "negative")
    body = assert_problem(client.post(f"/projects/{pid}/concepts/merge",
                                      json={"keep": "d", "merge": "b"}), 409, "contradiction")
    assert {ref["label"] for ref in body["proof"]} == {"positive", "negative"}
    # nothing changed
    assert len(client.get(f"/projects/{pid}/concepts").json()["items"]) == 4
    assert_problem(client.post(f"/projects/{pid}/concepts/merge",
                               json={"keep": "a", "merge": "a"}), 422, "invalid-items")


def test_merge_in_a_computed_project_recomputes_the_features(client: TestClient) -> None:
    texts = {"limit": "A limit is a value.", "lim": "Lim: a limit, in short.",
             "derivative": "The derivative is a limit."}
    pid = new_project(client)
    client.post(f"/projects/{pid}/concepts", json={"concepts": [
        {"name": n, "text": t} for n, t in texts.items()]})
    client.post(f"/projects/{pid}/links", json={"links": [
        {"source": "derivative", "target": "lim"}]})
    client.post(f"/projects/{pid}/pairs", json={"pairs": [
        {"a": "lim", "b": "derivative"}, {"a": "derivative", "b": "limit"}]})
    response = client.post(f"/projects/{pid}/concepts/merge",
                           json={"keep": "limit", "merge": "lim"})
    assert response.status_code == 200, response.text
    # the same corpus built directly gives the same features
    other = new_project(client)
    client.post(f"/projects/{other}/concepts", json={"concepts": [
        {"name": "limit", "text": texts["limit"]},
        {"name": "derivative", "text": texts["derivative"]}]})
    client.post(f"/projects/{other}/links", json={"links": [
        {"source": "derivative", "target": "limit"}]})
    client.post(f"/projects/{other}/pairs", json={"pairs": [
        {"a": "limit", "b": "derivative"}, {"a": "derivative", "b": "limit"}]})
    merged = {(i["a"], i["b"]): i["features"]
              for i in client.get(f"/projects/{pid}/pairs").json()["items"]}
    direct = {(i["a"], i["b"]): i["features"]
              for i in client.get(f"/projects/{other}/pairs").json()["items"]}
    assert merged == direct
    assert client.get(f"/projects/{pid}/links").json()["items"] == [
        {"source": "derivative", "target": "limit"}]


def test_another_process_sees_renames_deletions_and_merges(make_client) -> None:
    one, two = make_client(), make_client()
    pid = new_project(one, ["a", "b", "c", "d"], [("a", "b", F), ("b", "c", F), ("c", "d", F)])
    label(one, pid, "a", "b")
    assert two.get(f"/projects/{pid}").json()["counts"]["pool_pairs"] == 3  # two is warm
    assert one.post(f"/projects/{pid}/concepts/rename",
                    json={"name": "a", "new_name": "alpha"}).status_code == 200
    status = two.get(f"/projects/{pid}/pairs/status", params={"a": "alpha", "b": "b"})
    assert status.json()["status"] == "positive"
    assert one.delete(f"/projects/{pid}/pairs", params={"a": "c", "b": "d"}).status_code == 204
    assert two.get(f"/projects/{pid}").json()["counts"]["pool_pairs"] == 2
    assert one.post(f"/projects/{pid}/concepts/merge",
                    json={"keep": "d", "merge": "c"}).status_code == 200
    counts = two.get(f"/projects/{pid}").json()["counts"]
    assert (counts["concepts"], counts["pool_pairs"]) == (3, 2)
    assert ("b", "d") in {(q["a"], q["b"]) for q in two.get(
        f"/projects/{pid}/next", params={"k": 5}).json()["queries"]}
