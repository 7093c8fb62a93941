"""The wrong-pair counts of reasoning.quality: each decided pair's bottleneck label against a
brute-force fixpoint, the counts' distributions against Monte Carlo, and the intervals' coverage
on planted noisy teams."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reasoning.closure import Closure
from reasoning.consensus import Vote, consensus
from reasoning.consensus.confidence import derived_confidence
from reasoning.quality import decided_wrong, predicted_wrong, weighted_wrong
from tests.reasoning.bruteforce import fixpoint


def _random_labels(rng: np.random.Generator, n: int, k: int) -> Closure:
    truth = rng.permutation(n)  # a total order's ranks: every label is consistent
    closure = Closure(range(n))
    for _ in range(k):
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        closure.add_label(a, b, bool(truth[a] < truth[b]))  # one order: never a contradiction
    return closure


@pytest.mark.parametrize("seed", range(12))
def test_each_decided_pair_comes_from_its_strongest_proof_s_weakest_label(seed: int) -> None:
    rng = np.random.default_rng(seed)
    closure = _random_labels(rng, 7, 9)
    labels = closure.asserted
    weight = dict(zip(labels, rng.permutation(len(labels)) / len(labels) + 0.05, strict=True))
    derived = derived_confidence(closure, weight, sources=True)
    decided = [(a, b, v) for a, b, v, _ in closure.decided()]
    sources = derived.sources([(a, b) for a, b, _ in decided],
                              np.array([int(v) for _, _, v in decided]))
    order = list(labels)
    for (a, b, value), source in zip(decided, sources.tolist(), strict=True):
        w = weight[order[source]]
        assert derived.of(a, b) == pytest.approx(w)
        if (a, b) in labels:  # an asserted pair is as right as its own label
            assert order[source] == (a, b)
            continue
        # the pair follows from the labels at least as strong as its source, not from the
        # stronger ones alone (distinct weights: the bottleneck label is unique)
        strong = [(x, y, v) for (x, y), v in labels.items() if weight[(x, y)] >= w]
        stronger = [(x, y, v) for (x, y), v in labels.items() if weight[(x, y)] > w]
        assert (a, b) in fixpoint(7, strong)[0 if value else 1]
        assert (a, b) not in fixpoint(7, stronger)[0 if value else 1]


@pytest.mark.parametrize("seed", range(4))
def test_the_weighted_count_matches_monte_carlo(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.4, 60) * (rng.random(60) < 0.5)
    s = rng.integers(1, 12, 60)
    count = weighted_wrong(p, s)
    draws = ((rng.random((40_000, 60)) < p) * s).sum(axis=1)
    assert count.estimate == pytest.approx(draws.mean(), rel=0.03)
    low, high = np.quantile(draws, [0.05, 0.95])
    assert abs(count.low - low) <= 1 and abs(count.high - high) <= 1


def test_the_predicted_count_matches_the_exact_poisson_binomial() -> None:
    rng = np.random.default_rng(3)
    proba = rng.uniform(0, 1, 300)
    q = np.minimum(proba, 1 - proba)
    pmf = np.zeros(len(q) + 1)
    pmf[0] = 1.0
    for x in q:  # the textbook recursion, one pair at a time
        pmf[1:] = pmf[1:] * (1 - x) + pmf[:-1] * x
        pmf[0] *= 1 - x
    cdf = np.cumsum(pmf)
    count = predicted_wrong(proba)
    assert count.estimate == pytest.approx(q.sum())
    assert count.low == int(np.searchsorted(cdf, 0.05))
    assert abs(count.high - int(np.searchsorted(cdf, 0.95))) <= 1  # probabilities binned


def _planted_team(seed: int) -> tuple[int, int, int]:
    """A noisy team on a random order: (true wrong decided pairs, interval low, high)."""
    rng = np.random.default_rng(seed)
    n = 12
    rank = rng.permutation(n)
    truth_positive = {(a, b) for a in range(n) for b in range(n) if rank[a] + 3 <= rank[b]}
    pool = list(itertools.permutations(range(n), 2))
    asked = [pool[i] for i in rng.permutation(len(pool))[:40]]
    accuracy = {"ann": 0.9, "bo": 0.85, "cy": 0.8}
    votes = [Vote(a, b, ((a, b) in truth_positive) ^ bool(rng.random() > acc), name)
             for a, b in asked for name, acc in accuracy.items() if rng.random() < 0.6]
    result = consensus(votes, range(n))
    closure = result.closure if result.closure is not None else Closure(range(n))
    confidence = {pair: (q if v else 1 - q) for pair, v in closure.asserted.items()
                  for q in [result.posterior.get(pair, 1.0 if v else 0.0)]}
    values = closure.values_by_index(np.array([a for a, _ in pool]), np.array([b for _, b in pool]))
    count = decided_wrong(closure, confidence, pool, values)
    wrong = sum(int(v >= 0 and (v == 1) != (pair in truth_positive))
                for pair, v in zip(pool, values.tolist(), strict=True))
    return wrong, count.low, count.high


def test_the_decided_interval_holds_the_true_count_on_planted_teams() -> None:
    runs = [_planted_team(seed) for seed in range(30)]
    covered = sum(low <= wrong <= high for wrong, low, high in runs)
    assert any(wrong > 0 for wrong, _, _ in runs)  # the teams do make mistakes
    assert covered >= 0.8 * len(runs), runs
