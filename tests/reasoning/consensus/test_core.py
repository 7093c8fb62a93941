"""The consensus of a team's answers, p_wrong and the check candidates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from reasoning.closure import Closure, ContradictionError, Label
from reasoning.consensus import (
    TIE_DELTA,
    Vote,
    agreement,
    check_candidates,
    consensus,
    p_wrong,
)


def _random_order(n: int, rng: np.random.Generator, density: float = 0.3) -> Closure:
    """A random strict partial order over range(n): edges along a random permutation."""
    perm = rng.permutation(n)
    closure = Closure(range(n))
    for i, j in itertools.combinations(range(n), 2):
        if rng.random() < density:
            a, b = int(perm[i]), int(perm[j])
            if closure.status(a, b).value is None:
                closure.add_label(a, b, True)
    return closure


def _truth(closure: Closure, a, b) -> bool:
    return bool(closure.status(a, b).value)


def _noisy_answers(closure: Closure, rng, *, team: int, eps: float, per_pair: int):
    n = closure.n
    answers, order = [], 0
    for a, b in itertools.permutations(range(n), 2):
        if rng.random() < 0.5:
            continue
        for who in rng.choice(team, per_pair, replace=False):
            value = _truth(closure, a, b) ^ bool(rng.random() < eps)
            answers.append(Vote(a, b, value, f"t{who}", order=order))
            order += 1
    return answers


# ---------------------------------------------------------------------------- consistency
@pytest.mark.parametrize("seed", range(12))
def test_labels_are_always_consistent_and_cover_every_answered_pair(seed):
    rng = np.random.default_rng(seed)
    truth = _random_order(7, rng)
    answers = _noisy_answers(truth, rng, team=4, eps=0.25, per_pair=2)
    result = consensus(answers, range(7))
    labels = [Label(a, b, v) for (a, b), v in result.labels.items()]
    closed = Closure.closed(labels, range(7))
    assert closed is not None  # a strict partial order's labels
    answered = {(x.a, x.b) for x in answers}
    assert set(result.labels) | set(result.gave_way) | set(result.tied) == answered
    assert not set(result.labels) & set(result.gave_way)
    assert not set(result.labels) & set(result.tied)
    for pair in result.tied:  # a tie: answered both ways, contested, not asserted
        assert pair in result.contested
        assert pair in result.values or result.confidence[pair] <= 0.5 + TIE_DELTA + 1e-9
    for pair in result.gave_way:  # a pair that gave way holds the closure's opposite value
        assert closed.status(*pair).value is result.values[pair]
        assert result.confidence[pair] < 0.5
    for pair, value in result.labels.items():
        assert result.values[pair] is value


@pytest.mark.parametrize("seed", range(5))
def test_unanimous_answers_are_the_labels(seed):
    rng = np.random.default_rng(100 + seed)
    truth = _random_order(8, rng)
    answers = _noisy_answers(truth, rng, team=3, eps=0.0, per_pair=2)
    result = consensus(answers, range(8))
    assert result.labels == {(x.a, x.b): x.positive for x in answers}
    assert result.gave_way == [] and result.contested == {}


def _disjoint_team(rng, items: int = 80):
    """Pairs of distinct concepts (no order between them); 2 reliable, 3 random annotators."""
    concepts = list(range(2 * items + 2))
    truth = rng.random(items) < 0.5
    answers, order = [], 0
    for k in range(items):
        for who in ("r1", "r2"):
            answers.append(Vote(2 * k, 2 * k + 1, bool(truth[k]), who, order=order))
            order += 1
        for who in ("u1", "u2", "u3"):
            answers.append(Vote(2 * k, 2 * k + 1, bool(rng.random() < 0.5), who,
                                  order=order))
            order += 1
    last = 2 * items
    answers += [Vote(last, last + 1, True, "r1"), Vote(last, last + 1, True, "r2")]
    answers += [Vote(last, last + 1, False, u) for u in ("u1", "u2", "u3")]
    return concepts, answers, (last, last + 1)


def test_a_reliable_minority_beats_an_unreliable_majority_only_when_weighted():
    concepts, answers, test_pair = _disjoint_team(np.random.default_rng(3))
    weighted = consensus(answers, concepts)
    assert weighted.labels[test_pair] is True
    assert min(weighted.accuracy["r1"], weighted.accuracy["r2"]) > max(
        weighted.accuracy[u] for u in ("u1", "u2", "u3")) + 0.2
    alike = consensus(answers, concepts, weighted=False)
    assert alike.labels[test_pair] is False  # three against two
    assert len(set(alike.accuracy.values())) == 1


def test_reviewer_answers_are_final_and_the_later_stands():
    team = [Vote("x", "y", True, n, order=k) for k, n in enumerate(("a", "b", "c"))]
    review = [Vote("x", "y", False, "boss", reviewer=True, order=10)]
    result = consensus(team + review, "xyz")
    assert result.labels[("x", "y")] is False and result.confidence[("x", "y")] == 1.0
    assert result.contested == {}
    assert "boss" not in result.accuracy  # a resolution is not an annotator's answer
    later = review + [Vote("x", "y", True, "boss2", reviewer=True, order=11)]
    assert consensus(team + later, "xyz").labels[("x", "y")] is True
    # the reviewer's value scores the annotators who answered the pair
    assert result.accuracy["a"] < consensus(team, "xyz").accuracy["a"]


def test_an_answer_that_contradicts_the_order_gives_way_and_counts_against_its_annotator():
    answers = [Vote("a", "b", True, n) for n in ("p", "q")]
    answers += [Vote("b", "c", True, n) for n in ("p", "q")]
    answers += [Vote("a", "c", False, "d")]
    answers += [Vote(f"u{k}", f"v{k}", k % 2 == 0, n) for k in range(6) for n in "pqd"]
    concepts = ["a", "b", "c"] + [f"u{k}" for k in range(6)] + [f"v{k}" for k in range(6)]
    result = consensus(answers, concepts)
    assert result.gave_way == [("a", "c")]
    assert result.values[("a", "c")] is True and ("a", "c") in result.contested
    assert result.accuracy["d"] < result.accuracy["p"]


def test_a_failed_check_gives_way_to_the_path_it_checks():
    answers = [Vote("a", "b", True, "p"), Vote("b", "c", True, "q"),
               Vote("a", "c", False, "d", check=True)]
    result = consensus(answers, "abc")
    assert result.gave_way == [("a", "c")] and result.labels == {
        ("a", "b"): True, ("b", "c"): True}
    view = agreement(answers, result)
    row = next(r for r in view.annotators if r.annotator == "d")
    assert (row.checks.asked, row.checks.failed, row.agreement) == (1, 1, 0.0)


def test_a_split_pair_is_contested_until_settled():
    one_one = [Vote("x", "y", True, "a"), Vote("x", "y", False, "b")]
    assert ("x", "y") in consensus(one_one, "xy").contested
    two_one = one_one + [Vote("x", "y", True, "c")]
    result = consensus(two_one, "xy")
    assert result.contested == {} and result.labels[("x", "y")] is True


def test_an_annotators_later_answer_replaces_the_earlier_and_anonymous_counts_once():
    answers = [Vote("x", "y", True, None, order=1), Vote("x", "y", False, None, order=2),
               Vote("x", "y", True, "a", order=3), Vote("x", "y", False, "a", order=4)]
    result = consensus(answers, "xy")
    assert result.labels == {("x", "y"): False} and result.contested == {}


def test_unknown_concepts_are_refused():
    with pytest.raises(ValueError):
        consensus([Vote("x", "q", True, "a")], "xy")


# ---------------------------------------------------------------------------- brute force
def _orders(n: int):
    """Every strict partial order over range(n), as its value on every ordered pair."""
    pairs = list(itertools.permutations(range(n), 2))
    seen = set()
    for bits in itertools.product((False, True), repeat=len(pairs)):
        labels = [Label(a, b, True) for (a, b), v in zip(pairs, bits, strict=True) if v]
        closure = Closure.closed(labels, range(n))
        if closure is None:
            continue
        key = tuple(bool(closure.status(a, b).value) for a, b in pairs)
        if key not in seen:
            seen.add(key)
            yield dict(zip(pairs, key, strict=True))


def _log_likelihood(order: dict, answers, accuracy: dict) -> float:
    total = 0.0
    for ans in answers:
        p = min(max(accuracy[ans.annotator], 1e-3), 1 - 1e-3)
        total += math.log(p if order[(ans.a, ans.b)] == ans.positive else 1 - p)
    return total


def _completed(result, pairs) -> dict:
    """The consensus's values, the ties it leaves undecided filled in (the likelier value
    where the closure allows it) to compare with the orders."""
    closure = result.closure.copy()
    for pair in result.tied:
        if closure.status(*pair).value is None:
            try:
                closure.add_label(*pair, True)
            except ContradictionError:
                closure.add_label(*pair, False)
    for pair in pairs:  # pairs nobody answered decided as the closure allows
        if closure.status(*pair).value is None:
            closure.add_label(*pair, False)
    return {p: bool(closure.status(*p).value) for p in pairs}


def test_against_brute_force_on_tiny_instances():
    """Always a strict partial order; the exact optimum on most instances (a heuristic)."""
    orders = list(_orders(4))
    assert len(orders) == 219  # the labelled posets on 4 points
    rng = np.random.default_rng(7)
    optimal = 0
    for _ in range(60):
        truth = dict(orders[int(rng.integers(len(orders)))])
        answers = []
        for (a, b), v in truth.items():
            for who in rng.choice(3, int(rng.integers(1, 3)), replace=False):
                answers.append(Vote(a, b, v ^ bool(rng.random() < 0.2), f"t{who}"))
        result = consensus(answers, range(4), weighted=False)
        mine = _completed(result, truth)
        assert mine in orders
        scores = [_log_likelihood(o, answers, result.accuracy) for o in orders]
        optimal += _log_likelihood(mine, answers, result.accuracy) >= max(scores) - 1e-9
    assert optimal >= 48  # measured: 80% and more of the instances


# ---------------------------------------------------------------------------- p_wrong, checks
@pytest.mark.parametrize("accuracy", [0.6, 0.8, 0.95])
@pytest.mark.parametrize("p_model", [None, 0.05, 0.5, 0.9])
@pytest.mark.parametrize("positive", [True, False])
def test_p_wrong_is_bayes(accuracy, p_model, positive):
    prior = 0.5 if p_model is None else p_model
    # enumerate the truth: joint of (truth, answer)
    joint = {}
    for truth, p_truth in ((True, prior), (False, 1 - prior)):
        joint[truth] = p_truth * (accuracy if truth == positive else 1 - accuracy)
    expected = joint[not positive] / (joint[True] + joint[False])
    assert p_wrong(accuracy, p_model, positive) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(6))
def test_check_candidates_are_the_positives_through_two_steps(seed):
    rng = np.random.default_rng(seed)
    closure = _random_order(9, rng, density=0.35)
    extra = [(a, b) for a, b in closure.positive_pairs() if rng.random() < 0.2]
    got = set(check_candidates(closure, extra))
    down, _ = closure.matrices()
    expected = set()
    for a, b in closure.positive_pairs():
        between = any(down[a, z] and down[z, b] for z in range(9))
        if between and (a, b) not in closure.asserted and (a, b) not in extra:
            expected.add((a, b))
    assert got == expected
