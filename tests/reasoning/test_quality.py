"""The wrong-pair counts of reasoning.quality: each decided pair's bottleneck label against a
brute-force fixpoint, the counts' distributions against Monte Carlo, and the intervals' coverage
on planted noisy teams, including teams whose second opinions go where an answer looks wrong."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from reasoning.closure import Closure
from reasoning.consensus import Vote, consensus
from reasoning.consensus.asking import AskPolicy, TeamView
from reasoning.consensus.confidence import derived_confidence
from reasoning.quality import (
    PIVOT,
    SHARE_PRIOR,
    SHARE_WEIGHT,
    Recalibration,
    WrongCount,
    carried_pairs,
    decided_wrong,
    derived_share,
    label_p,
    label_risk,
    overruled_firsts,
    predicted_wrong,
    rank_key,
    weighted_wrong,
)
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


@pytest.mark.parametrize("seed", range(3))
def test_the_recalibrated_count_matches_monte_carlo_over_its_uncertainty(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = 1.0 / (1.0 + np.exp(-rng.normal(-2.5, 1.0, 80)))
    s = rng.integers(1, 8, 80)
    recalibration = Recalibration((-0.5, 0.2), ((0.2, -0.03), (-0.03, 0.08)))
    count = weighted_wrong(p, s, recalibration=recalibration)
    theta = rng.multivariate_normal(recalibration.mean, recalibration.cov, 40_000)
    x = np.log(p / (1.0 - p))[None, :]
    q = 1.0 / (1.0 + np.exp(-(x + theta[:, :1] + theta[:, 1:] * (x - PIVOT))))
    draws = ((rng.random(q.shape) < q) * s).sum(axis=1)
    assert count.estimate == pytest.approx(draws.mean(), rel=0.03)
    low, high = np.quantile(draws, [0.05, 0.95])
    assert abs(count.low - low) <= 1 and abs(count.high - high) <= 1


@pytest.mark.parametrize("seed", range(3))
def test_the_count_with_a_share_of_the_carried_pairs_matches_monte_carlo(seed: int) -> None:
    """A wrong label's own pair is wrong, each other pair it carries with the share φ, drawn
    once from its Beta distribution for every label."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.4, 50)
    s = rng.integers(1, 15, 50)
    own = (rng.random(50) < 0.8).astype(int)
    share = (2.0, 6.0)
    count = weighted_wrong(p, s, own=own, share=share)
    draws = 40_000
    phi = rng.beta(*share, (draws, 1))
    spread = rng.binomial(np.broadcast_to(s - own, (draws, 50)), phi)
    wrong = ((rng.random((draws, 50)) < p) * (own + spread)).sum(axis=1)
    assert count.estimate == pytest.approx(wrong.mean(), rel=0.03)
    low, high = np.quantile(wrong, [0.05, 0.95])
    assert abs(count.low - low) <= 1 and abs(count.high - high) <= 1


def test_the_share_counts_what_an_overruled_answer_would_have_got_wrong() -> None:
    """Two chains 0 < 1 < 2 and 3 < 4 < 5, with 0 < 5, 1 ≮ 4 and 2 ≮ 3, whose first answer
    said 2 < 3: had it stood, every (x, y) with x ≤ 2 and 3 ≤ y would be positive and each
    mirror negative. The pairs the map decides among them are counted here by hand: wrong
    where the map says otherwise."""
    closure = Closure(range(6))
    for a, b, value in [(0, 1, True), (1, 2, True), (3, 4, True), (4, 5, True), (0, 5, True),
                        (1, 4, False), (2, 3, False)]:
        closure.add_label(a, b, value)
    pool = [(x, y) for x in range(6) for y in range(6) if x != y]
    values = dict(zip(pool, closure.values_by_index(
        np.array([x for x, _ in pool]), np.array([y for _, y in pool])).tolist(), strict=True))
    said = {(x, y): True for x in (0, 1, 2) for y in (3, 4, 5) if (x, y) != (2, 3)}
    said.update({(y, x): False for x in (0, 1, 2) for y in (3, 4, 5)})
    decided = [pair for pair in said if values[pair] >= 0]
    wrong = sum(values[pair] != int(said[pair]) for pair in decided)
    assert 0 < wrong < len(decided)  # (0, 5) and (5, 0) right, (1, 3) … (2, 4) wrong
    firsts = {(2, 3): True}
    alpha, beta = derived_share(closure, firsts, pool, np.array(list(values.values())))
    assert alpha - SHARE_PRIOR[0] == pytest.approx(SHARE_WEIGHT * wrong / len(decided))
    assert alpha + beta == pytest.approx(sum(SHARE_PRIOR) + SHARE_WEIGHT)
    # a first answer "no" on 0 < 5: said negative on (x, y) with 0 ≤ x and y ≤ 5, not through
    # the label itself (x above 0 but not above 5, y below 5 but not below 0)
    said = [(x, y) for x in (0, 1, 2) for y in (3, 4, 5) if (x, y) != (0, 5)]
    decided = [pair for pair in said if values[pair] >= 0]
    alpha, _ = derived_share(closure, {(0, 5): False}, pool, np.array(list(values.values())))
    assert decided and alpha - SHARE_PRIOR[0] == pytest.approx(
        SHARE_WEIGHT * sum(values[pair] == 1 for pair in decided) / len(decided))
    assert derived_share(closure, {}, pool, np.array(list(values.values()))) == SHARE_PRIOR


def test_overruled_firsts_are_the_first_answers_the_labels_now_overrule() -> None:
    answers = {("a", "b"): [Vote("a", "b", False, "ann", order=1),
                            Vote("a", "b", True, "bo", order=2),
                            Vote("a", "b", True, "cy", order=3)],
               ("b", "c"): [Vote("b", "c", True, "ann", order=4),
                            Vote("b", "c", True, "bo", order=5)],
               ("c", "d"): [Vote("c", "d", False, "ann", order=6)]}
    labels = {("a", "b"): True, ("b", "c"): True, ("c", "d"): True}
    result = consensus([v for votes in answers.values() for v in votes], "abcd")
    view = TeamView(result, answers, set(answers))
    assert overruled_firsts(view, labels) == {("a", "b"): False}


def test_the_interval_widens_when_the_same_errors_come_in_larger_stakes() -> None:
    """Twenty pairs one label carries are wrong together; twenty labels of one pair each
    are wrong one by one: the same expected count, a wider interval."""
    apart = weighted_wrong([0.25] * 20, [1] * 20)
    together = weighted_wrong([0.25], [20])
    assert apart.estimate == pytest.approx(together.estimate)
    assert (together.low, together.high) == (0, 20)
    assert together.high - together.low > apart.high - apart.low


def test_the_accuracies_uncertainty_widens_the_interval() -> None:
    p, s = [0.05] * 200, [2] * 200
    certain = weighted_wrong(p, s, recalibration=Recalibration())
    plain = weighted_wrong(p, s)
    assert (certain.low, certain.high) == (plain.low, plain.high)
    assert certain.estimate == pytest.approx(plain.estimate)
    unsure = weighted_wrong(p, s, recalibration=Recalibration(cov=((0.3, 0.0), (0.0, 0.0))))
    assert unsure.low < certain.low and unsure.high > certain.high


def test_the_recalibration_recovers_a_planted_bias() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(-2.0, 1.0, 3000)
    truth = (-1.0, 0.4)  # stated P(wrong) too high by e in odds, and too flat
    eta = x + truth[0] + truth[1] * (x - PIVOT)
    fit = Recalibration.fit(1.0 / (1.0 + np.exp(-x)), rng.random(3000) < 1.0 / (1.0 + np.exp(-eta)))
    for k in range(2):
        assert abs(fit.mean[k] - truth[k]) < 3.0 * np.sqrt(fit.cov[k][k])
    assert np.sqrt(fit.cov[0][0]) < 0.2  # three thousand labels say much


def test_without_second_opinions_nothing_is_recalibrated() -> None:
    assert Recalibration.fit([], []) == Recalibration((0.0, 0.0), ((1.0, 0.0), (0.0, 0.25)))


def _selected_team(seed: int) -> tuple[int, float, WrongCount, WrongCount]:
    """Labels whose stated P(wrong) is too high (as accuracies EM estimates low from second
    opinions that went where answers looked wrong); the labels with P(wrong) × stake at least
    0.3 got a second opinion that settled them. (wrong pairs left, expected, the interval as
    stated, recalibrated on the settled labels)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(-2.5, 1.2, 500)
    stated = 1.0 / (1.0 + np.exp(-x))
    actual = 1.0 / (1.0 + np.exp(-(x - 1.2)))
    stake = rng.geometric(0.3, 500)
    wrong = rng.random(500) < actual
    asked = stated * stake >= 0.3
    left = ~asked
    recalibration = Recalibration.fit(stated[asked], wrong[asked])
    plain = weighted_wrong(stated[left], stake[left])
    fitted = weighted_wrong(stated[left], stake[left], recalibration=recalibration)
    return int(stake[left & wrong].sum()), float((actual * stake)[left].sum()), plain, fitted


def test_second_opinions_that_go_where_answers_look_wrong_recalibrate_the_rest() -> None:
    runs = [_selected_team(seed) for seed in range(30)]
    plain = sum(c.low <= wrong <= c.high for wrong, _, c, _ in runs)
    fitted = sum(c.low <= wrong <= c.high for wrong, _, _, c in runs)
    assert fitted >= 0.8 * len(runs) > plain  # as stated, the interval misses most
    expected = np.mean([e for _, e, _, _ in runs])
    stated = np.mean([c.estimate for _, _, c, _ in runs])
    assert abs(np.mean([c.estimate for *_, c in runs]) - expected) < 0.5 * (stated - expected)


def test_label_risk_fits_on_the_first_answers_the_labels_overruled() -> None:
    """Labels three people answered, the first answer overruled on half: the first answers'
    P(wrong) alone (accuracy 0.8, a model at one half) recalibrated up from a fifth."""
    n = 40
    answers: dict = {}
    labels: dict = {}
    for k in range(n - 1):
        pair = (k, k + 1)
        overruled = k % 2 == 0  # half the first answers overruled (stated: a fifth)
        answers[pair] = [Vote(k, k + 1, not overruled, "ann", order=2 * k),
                         Vote(k, k + 1, True, "bo", order=2 * k + 1),
                         Vote(k, k + 1, True, "cy", order=2 * k + 2)]
        labels[pair] = True
    result = consensus([v for votes in answers.values() for v in votes], range(n))
    result = replace(result, accuracy={"ann": 0.8, "bo": 0.8, "cy": 0.8})
    asked = dict.fromkeys(answers, 0.5)  # the model's probability when asked: undecided
    view = TeamView(result, answers, set(answers), asked)
    p_wrong, recalibration = label_risk(view, labels, AskPolicy())
    assert set(p_wrong) == set(labels) and max(p_wrong.values()) < 0.2
    assert recalibration.mean[0] > 0.5  # overruled half the time, not a fifth
    lone = {pair: [votes[0]] for pair, votes in answers.items()}
    _, none = label_risk(TeamView(result, lone, set(lone), asked), labels, AskPolicy())
    assert none == Recalibration.fit([], [])
    # imported answers (no probability when asked): what chose them is unknown, nothing fitted
    _, unknown = label_risk(TeamView(result, answers, set(answers)), labels, AskPolicy())
    assert unknown == Recalibration.fit([], [])


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
    count = predicted_wrong(proba, shift_sd=0.0)
    assert count.estimate == pytest.approx(q.sum())
    assert count.low == int(np.searchsorted(cdf, 0.05))
    assert count.high == int(np.searchsorted(cdf, 0.95))


def test_the_predicted_count_is_mixed_over_a_shift_of_the_model_s_log_odds() -> None:
    """A shift of every pair's log-odds, δ ~ N(0, σ²), against Monte Carlo: as wide as the
    shift makes it, and wider than the pairs' independent errors alone."""
    rng = np.random.default_rng(4)
    proba = rng.uniform(0, 1, 400)
    count = predicted_wrong(proba, shift_sd=0.5)
    q = np.minimum(proba, 1 - proba)
    x = np.log(q / (1 - q))
    delta = rng.normal(0.0, 0.5, (20_000, 1))
    draws = (rng.random((20_000, len(q))) < 1 / (1 + np.exp(-(x + delta)))).sum(axis=1)
    assert count.estimate == pytest.approx(draws.mean(), rel=0.01)
    low, high = np.quantile(draws, [0.05, 0.95])
    assert abs(count.low - low) <= 0.03 * low and abs(count.high - high) <= 0.03 * high
    alone = predicted_wrong(proba, shift_sd=0.0)
    assert count.low < alone.low and count.high > alone.high


def _planted_team(seed: int) -> tuple[int, int, int]:
    """A noisy team on a random order: (true wrong decided pairs, interval low, high), the
    share of a wrong label's other pairs wrong with it measured on the overruled answers (a
    dense order: a wrong answer spreads far)."""
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
    p_wrong = {pair: (1 - q if v else q) for pair, v in closure.asserted.items()
               for q in [result.posterior.get(pair, 1.0 if v else 0.0)]}
    values = closure.values_by_index(np.array([a for a, _ in pool]), np.array([b for _, b in pool]))
    answers: dict = {}
    for vote in votes:
        answers.setdefault((vote.a, vote.b), []).append(vote)
    firsts = overruled_firsts(TeamView(result, answers, set(pool)), closure.asserted)
    share = derived_share(closure, firsts, pool, values)
    count = decided_wrong(closure, p_wrong, pool, values, share=share)
    wrong = sum(int(v >= 0 and (v == 1) != (pair in truth_positive))
                for pair, v in zip(pool, values.tolist(), strict=True))
    return wrong, count.low, count.high


def test_the_decided_interval_holds_the_true_count_on_planted_teams() -> None:
    runs = [_planted_team(seed) for seed in range(30)]
    covered = sum(low <= wrong <= high for wrong, low, high in runs)
    assert any(wrong > 0 for wrong, _, _ in runs)  # the teams do make mistakes
    assert covered >= 0.8 * len(runs), runs


def test_the_pairs_a_label_carries_depend_on_the_order_of_p_wrong_alone() -> None:
    rng = np.random.default_rng(4)
    closure = Closure(range(8))
    for a, b in [(0, 1), (1, 2), (2, 3), (0, 4), (4, 3), (5, 6), (6, 7)]:
        closure.add_label(a, b, True)
    closure.add_label(3, 5, False)
    pool = [(a, b) for a in range(8) for b in range(8) if a != b]
    values = np.array([-1 if closure.status(a, b).value is None else int(closure.status(a, b).value)
                       for a, b in pool])
    p_wrong = {pair: float(rng.uniform(0.05, 0.3)) for pair in closure.asserted}
    p = label_p(closure, p_wrong)
    squeezed = {pair: value / 2 for pair, value in p_wrong.items()}  # the same order
    assert rank_key(p) == rank_key(label_p(closure, squeezed))
    carried = carried_pairs(closure, p, pool, values)
    assert np.array_equal(carried, carried_pairs(closure, label_p(closure, squeezed), pool, values))
    assert carried.sum() == (values >= 0).sum()  # every decided pair rests on one label
    assert decided_wrong(closure, p_wrong, pool, values) == decided_wrong(
        closure, p_wrong, pool, values, carried=carried)
    flipped = dict(p_wrong)
    weakest = max(flipped, key=flipped.get)
    flipped[weakest] = 0.001  # now the strongest: another order, another key
    assert rank_key(label_p(closure, flipped)) != rank_key(p)
