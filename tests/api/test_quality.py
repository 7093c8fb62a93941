"""GET /projects/{pid}/quality: the wrong pool pairs expected among the decided and the predicted
ones, against planted teams whose wrong count is known."""

from __future__ import annotations

import itertools

import numpy as np
from fastapi.testclient import TestClient

from reasoning.closure import Closure
from tests.api.conftest import assert_problem, label, new_project

N = 14


def _truth(rng: np.random.Generator) -> Closure:
    """A random strict order over range(N): a random DAG's transitive closure."""
    perm = rng.permutation(N)
    closure = Closure(range(N))
    for i, j in itertools.combinations(range(N), 2):
        if rng.random() < 0.2 and closure.status(int(perm[i]), int(perm[j])).value is None:
            closure.add_label(int(perm[i]), int(perm[j]), True)
    return closure


def _team(client: TestClient, seed: int, policy: str, accuracy: dict[str, float]
          ) -> tuple[int, Closure, list[tuple[int, int]]]:
    """A project whose pool is every ordered pair, answered by a noisy team on a third of it."""
    rng = np.random.default_rng(seed)
    truth = _truth(rng)
    pool = list(itertools.permutations(range(N), 2))
    pid = new_project(client, [f"c{i:02d}" for i in range(N)],
                      [(f"c{a:02d}", f"c{b:02d}", [float(rng.random())]) for a, b in pool],
                      policy=policy)
    asked = [pool[i] for i in rng.permutation(len(pool))[:len(pool) // 3]]
    answers = [{"a": f"c{a:02d}", "b": f"c{b:02d}", "annotator": name,
                "label": "positive" if bool(truth.status(a, b).value) ^ bool(rng.random() > acc)
                else "negative"} for a, b in asked for name, acc in accuracy.items()]
    response = client.post(f"/projects/{pid}/labels/bulk", json={"labels": answers})
    assert response.status_code == 201, response.text
    return pid, truth, pool


def _map(client: TestClient, pid: int, **params: object) -> dict[tuple[int, int], dict]:
    """Every pool pair's row of the predictions listing (its label when decided)."""
    response = client.get(f"/projects/{pid}/predictions", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    return {(int(x["a"][1:]), int(x["b"][1:])): x for x in response.json()["items"]}


def _wrong_decided(client: TestClient, pid: int, truth: Closure) -> tuple[int, int]:
    """The decided pool pairs and how many of them the planted order contradicts."""
    decided = {pair: x["label"] for pair, x in _map(client, pid).items()
               if x["source"] in ("asserted", "inferred")}
    wrong = sum((v == "positive") != bool(truth.status(*pair).value)
                for pair, v in decided.items())
    return len(decided), wrong


def test_a_consensus_team_s_wrong_pairs_lie_in_the_interval(client: TestClient) -> None:
    covered = 0
    for seed in range(4):
        pid, truth, _ = _team(client, seed, "consensus", {"ann": 0.9, "bo": 0.85, "cy": 0.75})
        body = client.get(f"/projects/{pid}/quality").json()
        decided, wrong = _wrong_decided(client, pid, truth)
        assert body["decided"] == decided and body["undecided"] == N * (N - 1) - decided
        count = body["decided_wrong"]
        assert count["low"] <= count["estimate"] <= count["high"]
        covered += count["low"] <= wrong <= count["high"]
    assert covered >= 3  # a 90% interval, four planted teams


def test_a_perfect_team_expects_few_wrong_pairs_and_a_noisy_one_more(
        client: TestClient) -> None:
    perfect, truth, _ = _team(client, 7, "consensus", {"ann": 1.0, "bo": 1.0, "cy": 1.0})
    noisy, _, _ = _team(client, 7, "consensus", {"ann": 0.7, "bo": 0.7, "cy": 0.7})
    good = client.get(f"/projects/{perfect}/quality").json()["decided_wrong"]
    bad = client.get(f"/projects/{noisy}/quality").json()["decided_wrong"]
    assert _wrong_decided(client, perfect, truth)[1] == 0
    assert good["low"] == 0 and good["estimate"] < bad["estimate"]


def test_strict_single_answers_rest_on_the_prior_accuracy(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"], [("a", "b", [0.1]), ("b", "c", [0.2]),
                                               ("a", "c", [0.3]), ("c", "a", [0.4])])
    assert label(client, pid, "a", "b", annotator="ann").status_code == 201
    assert label(client, pid, "b", "c", annotator="ann").status_code == 201
    body = client.get(f"/projects/{pid}/quality").json()
    # four pool pairs decided (a<b, b<c, a<c and c not before a) by two labels each right with
    # the prior accuracy 0.9: (a, c) and (c, a) follow the weaker of the two. Nobody answered
    # twice, so nothing recalibrates the prior: its log-odds stay as uncertain as the
    # recalibration's prior says, E[σ(logit 0.1 + a)] = 0.134 for a ~ N(0, 1); and no answer was
    # overruled, so the share of (a, c) and (c, a) wrong with their label is the uniform
    # prior's: a half each (the two labels' own pairs count whole)
    assert body["decided"] == 4 and body["undecided"] == 0
    assert abs(body["decided_wrong"]["estimate"] - (2 + 2 * 0.5) * 0.134) < 0.02
    assert body["decided_wrong"]["high"] >= 2


def test_an_unknown_project_is_a_problem(client: TestClient) -> None:
    assert_problem(client.get("/projects/999/quality"), 404, "project-not-found")


def test_the_predicted_rest_is_counted_from_the_model_s_calibrated_probabilities(
        client: TestClient) -> None:
    """Features that say the truth with noise: the model's expected wrong pairs among the
    undecided is near the count of its predictions the planted order contradicts."""
    rng = np.random.default_rng(5)
    truth = _truth(rng)
    pool = list(itertools.permutations(range(N), 2))
    features = {p: [float(bool(truth.status(*p).value)) + rng.normal(0, 0.6), float(rng.random())]
                for p in pool}
    pid = new_project(client, [f"c{i:02d}" for i in range(N)],
                      [(f"c{a:02d}", f"c{b:02d}", features[(a, b)]) for a, b in pool])
    assert client.get(f"/projects/{pid}/quality").json()["predicted_wrong"] is None
    for a, b in [pool[i] for i in rng.permutation(len(pool))[:60]]:
        value = "positive" if truth.status(a, b).value else "negative"
        assert label(client, pid, f"c{a:02d}", f"c{b:02d}", value).status_code in (201, 200)
    body = client.get(f"/projects/{pid}/quality", params={"fresh": "true"}).json()
    assert body["model"] is not None and body["undecided"] > 0
    rows = _map(client, pid, fresh="true")
    wrong = sum((x["probability"] >= 0.5) != bool(truth.status(*pair).value)
                for pair, x in rows.items() if x["source"] == "predicted")
    predicted = body["predicted_wrong"]
    assert predicted["low"] <= predicted["estimate"] <= predicted["high"]
    assert predicted["low"] - 3 <= wrong <= predicted["high"] + 3
