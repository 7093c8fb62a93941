"""Per-project budgets are refused before the work; a label's answer stays small."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.api.conftest import assert_problem, label, new_project


def _chain(client: TestClient, n: int) -> tuple[int, list[str]]:
    names = [f"c{i:03d}" for i in range(n)]
    return new_project(client, names), names


def test_a_label_past_the_decided_pairs_budget_is_refused_with_the_size(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_decided_pairs=50)
    pid, names = _chain(client, 12)
    for a, b in zip(names[:5], names[1:6], strict=True):  # a chain of 6: 30 decided pairs
        assert label(client, pid, a, b).status_code == 201
    before = client.get(f"/projects/{pid}").json()["counts"]
    # Joining the chain of 6 to a chain of 2 would make a chain of 8: 56 pairs, past 50.
    assert label(client, pid, names[6], names[7]).status_code == 201
    problem = assert_problem(label(client, pid, names[5], names[6]), 422, "budget-exceeded")
    assert problem["budget"] == "decided_pairs" and problem["limit"] == 50
    assert problem["would_reach"] == 8 * 7  # a chain of 8 decides every ordered pair
    after = client.get(f"/projects/{pid}").json()["counts"]
    assert after == before | {"asserted_labels": before["asserted_labels"] + 1,
                              "inferred_negative": after["inferred_negative"]}
    status = client.get(f"/projects/{pid}/pairs/status", params={"a": names[5], "b": names[6]})
    assert status.json()["status"] == "undecided"  # nothing of the refused label was applied
    bulk = client.post(f"/projects/{pid}/labels/bulk", json={"labels": [
        {"a": names[8], "b": names[9], "label": "negative"},
        {"a": names[5], "b": names[6], "label": "positive"}]})
    problem = assert_problem(bulk, 422, "budget-exceeded")
    assert "label 1 of the import" in problem["detail"]
    assert client.get(f"/projects/{pid}/labels",
                      params={"source": "asserted"}).json()["total"] == 6


def test_concepts_past_their_budget_are_refused(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_concepts=5)
    pid, _ = _chain(client, 4)
    response = client.post(f"/projects/{pid}/concepts",
                           json={"concepts": [{"name": "x"}, {"name": "y"}, {"name": "c000"}]})
    problem = assert_problem(response, 422, "budget-exceeded")
    assert (problem["budget"], problem["limit"], problem["would_reach"]) == ("concepts", 5, 6)
    assert client.get(f"/projects/{pid}/concepts").json()["total"] == 4
    assert client.post(f"/projects/{pid}/concepts",
                       json={"concepts": [{"name": "x"}]}).status_code == 201


def test_a_label_that_decides_many_pairs_lists_the_first_thousand(client: TestClient) -> None:
    pid, names = _chain(client, 70)
    half = 35
    labels = [{"a": a, "b": b, "label": "positive"}
              for a, b in zip(names[:half - 1], names[1:half], strict=True)]
    labels += [{"a": a, "b": b, "label": "positive"}
               for a, b in zip(names[half:-1], names[half + 1:], strict=True)]
    assert client.post(f"/projects/{pid}/labels/bulk", json={"labels": labels}).status_code == 201
    body = label(client, pid, names[half - 1], names[half]).json()
    total = body["newly_decided"]["positive"] + body["newly_decided"]["negative"]
    assert body["decided_total"] == total > 1000 and len(body["decided"]) == 1000
    rest = body["decided_rest"]
    assert rest == f"/projects/{pid}/labels?caused_by={body['id']}&source=inferred"
    page = client.get(rest + "&limit=10000").json()
    assert page["total"] == total
    listed = {(d["a"], d["b"], d["label"]) for d in body["decided"]}
    assert listed <= {(i["a"], i["b"], i["label"]) for i in page["items"]}
    assert all(i["caused_by"] == body["id"] for i in page["items"])
    small = label(client, pid, names[0], names[half + 1])
    assert small.json()["decided_rest"] is None
