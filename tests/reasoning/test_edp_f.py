"""EDP-F: the path-discounted expected count, its model's inputs, and the path chance itself.

Everything is checked against a direct computation: loops over the pairs for the features,
the product over every intermediate concept for the path chance, and answers added to a copy
of the closure for the counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import ExtraTreesClassifier

from reasoning.closure import Closure
from reasoning.model_features import forest_features, label_rates, reverse_features
from reasoning.strategies import (
    FOREST_STRATEGY_TREES,
    PATH_FLOOR,
    family,
    fit_model,
    get_strategy,
    model_inputs,
    needs_model,
    parse_strategy,
    path_free,
    score_candidates,
    uses_closure,
)
from tests.reasoning.test_strategies import FixedProbabilities, brute_gains, random_case


def brute_path_free(closure: Closure, pool, p, a, b) -> float:
    positive, _ = closure.matrices()
    values = closure.values_by_index(pool[:, 0], pool[:, 1])
    q = positive.astype(float)
    for row, (x, y) in enumerate(pool.tolist()):
        if values[row] < 0:
            q[x, y] = p[row]
    out = 1.0
    for c in range(closure.n):
        out *= 1.0 - q[a, c] * q[c, b]
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_path_free_is_the_product_over_every_intermediate_concept(seed):
    closure, pool, p, _ = random_case(seed)
    rows = np.flatnonzero(closure.values_by_index(pool[:, 0], pool[:, 1]) < 0)
    got = path_free(closure, pool, p[:, 0], rows)
    for i, row in enumerate(rows.tolist()):
        a, b = pool[row]
        assert got[i] == pytest.approx(brute_path_free(closure, pool, p[:, 0], a, b), abs=1e-9)


def test_path_free_past_its_budget_gives_the_last_candidates_zero():
    closure = Closure(range(3))
    pool = np.array([[0, 1], [1, 2], [0, 2]])
    p = np.array([0.5, 0.5, 0.5])
    full = path_free(closure, pool, p, np.array([0, 1, 2]))
    assert full.tolist() == pytest.approx([1.0, 1.0, 0.75])
    cut = path_free(closure, pool, p, np.array([0, 1, 2]), order=np.array([2, 0, 1]), budget=1)
    assert cut.tolist() == pytest.approx([0.0, 0.0, 0.75])  # the first in order always counts


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_edp_f_discounts_the_positive_count_by_the_path_chance(seed):
    closure, pool, p, _ = random_case(seed)
    ones = np.ones(len(pool))
    scores = score_candidates(get_strategy("EDP-F"), closure=closure, pool=pool, X=p,
                              candidates=np.ones(len(pool), bool), model=FixedProbabilities())
    for i, row in enumerate(scores.rows.tolist()):
        a, b = pool[row]
        gp, gn = brute_gains(closure, pool, ones, ones, a, b)
        free = brute_path_free(closure, pool, p[:, 0], a, b)
        q = p[row, 0]
        expected = q * (PATH_FLOOR + (1 - PATH_FLOOR) * free) * gp + (1 - q) * gn
        assert scores.scores[i] == pytest.approx(expected)


def test_edp_f_discounts_only_the_pair_that_a_likely_path_implies():
    # 0 ≺ 1 decided and (1, 2) likely: (0, 2) would be implied by the path through 1
    closure = Closure(range(3))
    closure.add_label(0, 1, True)
    pool = np.array([[1, 2], [0, 2]])
    X = np.array([[0.9], [0.9]])
    scores = score_candidates(get_strategy("EDP-F"), closure=closure, pool=pool, X=X,
                              candidates=np.ones(2, bool), model=FixedProbabilities())
    plain = score_candidates(get_strategy("EDP"), closure=closure, pool=pool, X=X,
                             candidates=np.ones(2, bool), model=FixedProbabilities())
    assert scores.scores[0] == pytest.approx(plain.scores[0])  # no path can imply (1, 2)
    # (0, 2): F+ = 1, F- = 2, free = 1 - 1·0.9
    free = 0.1
    assert scores.scores[1] == pytest.approx(0.9 * (PATH_FLOOR + (1 - PATH_FLOOR) * free)
                                             + 0.1 * 2)
    assert scores.scores[1] < plain.scores[1]


def test_edp_f_is_a_reasoning_strategy_with_an_extra_trees_model():
    assert parse_strategy("edp-f") == "EDP-F" and family("EDP-F") == "forest"
    assert uses_closure("EDP-F") and needs_model("EDP-F")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    model = fit_model(family("EDP-F"), X, (X[:, 0] > 0).astype(int), random_state=0)
    assert isinstance(model, ExtraTreesClassifier)
    assert len(model.estimators_) == FOREST_STRATEGY_TREES


# ------------------------------------------------------------------------------ features
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_reverse_features_are_those_of_the_reverse_pool_pair(seed):
    rng = np.random.default_rng(seed)
    ids = rng.choice(10**9, size=6, replace=False)  # large, sparse concept ids
    pairs = [(int(a), int(b)) for a in ids for b in ids if a != b and rng.random() < 0.5]
    assume(pairs)
    pool = np.array(pairs)
    X = rng.normal(size=(len(pool), 3))
    got = reverse_features(pool, X)
    row_of = {pair: row for row, pair in enumerate(pairs)}
    for row, (a, b) in enumerate(pairs):
        if (b, a) in row_of:
            assert got[row].tolist() == X[row_of[(b, a)]].tolist() + [1.0]
        else:
            assert got[row].tolist() == [0.0, 0.0, 0.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_label_rates_count_each_concepts_decided_pairs_without_the_row_itself(seed):
    rng = np.random.default_rng(seed)
    pool = np.array([(a, b) for a in range(5) for b in range(5)
                     if a != b and rng.random() < 0.6] or [(0, 1)])
    values = rng.integers(-1, 2, size=len(pool))
    got = label_rates(pool, values)
    for row, (a, b) in enumerate(pool.tolist()):
        def count(side, concept, value, skip):
            return sum(1 for r, pair in enumerate(pool.tolist())
                       if pair[side] == concept and values[r] == value and r != skip)
        sides = [(0, a, row), (1, b, row), (1, a, None), (0, b, None)]
        for k, (side, concept, skip) in enumerate(sides):
            yes, no = count(side, concept, 1, skip), count(side, concept, 0, skip)
            assert got[row, k] == pytest.approx((yes + 0.5) / (yes + no + 1))
            assert got[row, 4 + k] == pytest.approx(np.log1p(yes))


def test_model_inputs_add_the_reverse_pair_and_rates_for_the_forest_family_only():
    pool = np.array([[0, 1], [1, 0], [1, 2]])
    X = np.array([[1.0], [2.0], [3.0]])
    values = np.array([1, 0, -1])
    assert model_inputs(family("EDP"), pool, X, values) is not None
    np.testing.assert_array_equal(model_inputs(family("EDP"), pool, X, values), X)
    inputs = model_inputs(family("EDP-F"), pool, X, values)
    np.testing.assert_array_equal(inputs, forest_features(pool, X, values))
    assert inputs.shape == (3, 1 + 2 + 8)


def test_path_free_reads_a_large_closure_sparsely_and_agrees():
    # past 2,048 concepts the closure answers lookups from its sparse rows
    rng = np.random.default_rng(3)
    closure = Closure(range(2100))
    for a, b in [(0, 1), (1, 2), (5, 6), (2, 7)]:
        closure.add_label(a, b, True)
    closure.add_label(3, 4, False)
    pool = np.array([(a, b) for a in range(9) for b in range(9) if a != b])
    p = rng.random(len(pool))
    rows = np.flatnonzero(closure.values_by_index(pool[:, 0], pool[:, 1]) < 0)
    got = path_free(closure, pool, p, rows)
    for i, row in enumerate(rows.tolist()):
        a, b = pool[row]
        assert got[i] == pytest.approx(brute_path_free(closure, pool, p, a, b), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(1, 10_000), (3, 10_000), (2, 3)]))
def test_edp_f_scores_its_best_exactly_and_no_other_above_them(seed, bounds):
    import reasoning.strategies.scores as strategies

    exact_first, most = bounds
    closure, pool, p, _ = random_case(seed)
    ones = np.ones(len(pool))
    full = score_candidates(get_strategy("EDP-F"), closure=closure, pool=pool, X=p,
                            candidates=np.ones(len(pool), bool), model=FixedProbabilities())
    saved = strategies.PATH_EXACT, strategies.PATH_MOST
    strategies.PATH_EXACT, strategies.PATH_MOST = exact_first, most
    try:
        pruned = score_candidates(get_strategy("EDP-F"), closure=closure, pool=pool, X=p,
                                  candidates=np.ones(len(pool), bool),
                                  model=FixedProbabilities())
    finally:
        strategies.PATH_EXACT, strategies.PATH_MOST = saved
    assert pruned.rows.tolist() == full.rows.tolist()
    for i, row in enumerate(full.rows.tolist()):  # never above the exact score, never below
        gp, gn = brute_gains(closure, pool, ones, ones, *pool[row])  # the least path chance
        q = p[row, 0]
        assert q * PATH_FLOOR * gp + (1 - q) * gn - 1e-9 <= pruned.scores[i]
        assert pruned.scores[i] <= full.scores[i] + 1e-9
    if most >= len(full.rows):  # every contender computed: the best ones are exact
        best = np.sort(full.scores)[::-1][:exact_first]
        np.testing.assert_allclose(np.sort(pruned.scores)[::-1][:exact_first], best)
