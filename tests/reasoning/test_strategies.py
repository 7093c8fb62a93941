"""The nine strategies pick what the paper's formulas say, and batches never hold entangled pairs.

The hand-made order used throughout: concepts 0..3 with the asserted label ``1 ≺ 2`` (so
``(2, 1)`` is negative), and the pool ``(0,1), (0,2), (1,3), (2,3), (3,1)``. What each answer
decides, by closure.md (``A*``/``D*`` ancestors/descendants with the concept itself):

=======  ==========================================  ===========================
pair     positive answer decides (pool pairs only)    negative answer decides
=======  ==========================================  ===========================
(0,1)    (0,1)+ (0,2)+                                (0,1)−
(0,2)    (0,2)+                                       (0,1)− (0,2)−
(1,3)    (1,3)+ (3,1)−                                (1,3)− (2,3)−
(2,3)    (1,3)+ (2,3)+ (3,1)−                         (2,3)−
(3,1)    (3,1)+ (1,3)− (2,3)−                         (3,1)−
=======  ==========================================  ===========================
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.closure import Closure
from reasoning.strategies import (
    ALL_STRATEGIES,
    DEFAULT_STRATEGY,
    NEW_STRATEGIES,
    STRATEGY_NAMES,
    entangled,
    family,
    fit_model,
    get_strategy,
    needs_model,
    parse_strategy,
    score_candidates,
    select,
    uses_closure,
)

POOL = np.array([[0, 1], [0, 2], [1, 3], [2, 3], [3, 1]])
ALL = np.ones(len(POOL), dtype=bool)


def hand_closure() -> Closure:
    closure = Closure(range(4))
    closure.add_label(1, 2, True)
    return closure


class FixedProbabilities:
    """A fitted-classifier stand-in: ``p(positive)`` is the first feature."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = np.asarray(X, dtype=float)[:, 0]
        return np.column_stack([1 - p, p])


class FixedVotes:
    """A committee stand-in: member i votes the feature i (1 = positive)."""

    def votes(self, X):
        return np.asarray(X, dtype=np.int64).T


def pick(strategy, X, model, candidates=ALL, seed=0, pool=POOL, closure=None):
    closure = hand_closure() if closure is None else closure
    chosen = select(get_strategy(strategy), closure=closure, pool=pool, X=X, candidates=candidates,
                    model=model, random_state=seed)
    return tuple(pool[chosen.rows[0]])


# ------------------------------------------------------------------------------ names
@pytest.mark.parametrize("text, name", [
    ("lc-r+", "LC-R+"), ("QBC-Rplus", "QBC-R+"), ("LC-R ", "LC-R+"), ("cnt", "CNT"),
    ("random-r", "Random-R"), ("Random-R ", "Random-R"), ("qbc", "QBC"),
])
def test_parse_strategy_reads_names_leniently(text, name):
    assert parse_strategy(text) == name


def test_parse_strategy_names_the_valid_ones_when_refusing():
    with pytest.raises(ValueError, match="LC-R\\+"):
        parse_strategy("LC-R++")


def test_settings_follow_table_3():
    assert [uses_closure(s) for s in STRATEGY_NAMES] == [False] * 3 + [True] * 6
    assert [needs_model(s) for s in STRATEGY_NAMES] == [False, True, True] * 3


# ------------------------------------------------------------------------------ single picks
def test_random_picks_every_candidate_and_nothing_else():
    candidates = np.array([True, False, True, True, False])
    picks = {pick("Random", np.zeros((5, 1)), None, candidates, seed) for seed in range(200)}
    assert picks == {(0, 1), (1, 3), (2, 3)}


def test_random_r_never_picks_a_decided_pair():
    pool = np.array([[0, 1], [2, 1], [1, 3]])  # (2, 1) is decided negative by 1 ≺ 2
    picks = {pick("Random-R", np.zeros((3, 1)), None, np.ones(3, bool), seed, pool)
             for seed in range(200)}
    assert picks == {(0, 1), (1, 3)}


# p(positive) per pool row; least confident: |p - 0.5| smallest
P = np.array([[0.6], [0.5], [0.9], [0.9], [0.1]])


def test_lc_picks_the_probability_closest_to_one_half():
    assert pick("LC", P, FixedProbabilities()) == (0, 2)  # p = 0.5
    without = np.array([True, False, True, True, True])
    assert pick("LC", P, FixedProbabilities(), without) == (0, 1)  # p = 0.6 is next


def test_lc_r_skips_a_decided_pair_that_lc_would_ask():
    pool = np.vstack([POOL, [[2, 1]]])
    X = np.vstack([P, [[0.5]]])  # the decided pair is as uncertain as can be
    rows = np.ones(6, dtype=bool)
    lc = {pick("LC", X, FixedProbabilities(), rows, seed, pool) for seed in range(40)}
    lc_r = {pick("LC-R", X, FixedProbabilities(), rows, seed, pool) for seed in range(40)}
    assert lc == {(0, 2), (2, 1)}
    assert lc_r == {(0, 2)}


# votes of the three members per pool row
VOTES = np.array([[1, 1, 1], [1, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 0]])


def test_qbc_picks_among_the_pairs_with_a_dissenting_member():
    X = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    picks = {pick("QBC", X, FixedVotes(), seed=seed) for seed in range(100)}
    assert picks == {(1, 3), (3, 1)}


def test_cnt_scores_are_the_hand_counted_min_of_both_answers():
    # min over answers of the counts in the module table: 1, 1, 2, 1, 1
    scores = score_candidates(get_strategy("CNT"), closure=hand_closure(), pool=POOL,
                              X=np.zeros((5, 1)), candidates=ALL)
    assert scores.gain_positive.tolist() == [2, 1, 2, 3, 3]
    assert scores.gain_negative.tolist() == [1, 2, 2, 1, 1]
    assert scores.scores.tolist() == [1, 1, 2, 1, 1]
    assert pick("CNT", np.zeros((5, 1)), None) == (1, 3)


def test_lc_r_plus_weighs_positive_by_one_minus_p_and_negative_by_p():
    # wp = 1 - p = .4 .5 .1 .1 .9 ; wn = p = .6 .5 .9 .9 .1
    # (0,1): F+ = .4+.5 = .9, F- = .6  -> .6
    # (0,2): F+ = .5,         F- = .6+.5 = 1.1 -> .5
    # (1,3): F+ = .1+.1 = .2, F- = .9+.9 -> .2
    # (2,3): F+ = .1+.1+.1 = .3, F- = .9 -> .3
    # (3,1): F+ = .9+.9+.9 = 2.7, F- = .1 -> .1
    scores = score_candidates(get_strategy("LC-R+"), closure=hand_closure(), pool=POOL, X=P,
                              candidates=ALL, model=FixedProbabilities())
    np.testing.assert_allclose(scores.scores, [0.6, 0.5, 0.2, 0.3, 0.1])
    assert pick("LC-R+", P, FixedProbabilities()) == (0, 1)


def test_qbc_r_plus_weighs_by_the_votes_against_each_answer():
    # wp = members voting negative = 0 2 2 1 1 ; wn = members voting positive = 3 1 1 2 2
    # (0,1): F+ = 0+2 = 2, F- = 3 -> 2 ; (0,2): F+ = 2, F- = 3+1 = 4 -> 2
    # (1,3): F+ = 2+2 = 4, F- = 1+2 = 3 -> 3 ; (2,3): F+ = 2+1+2 = 5, F- = 2 -> 2
    # (3,1): F+ = 1+1+2 = 4, F- = 2 -> 2
    scores = score_candidates(get_strategy("QBC-R+"), closure=hand_closure(), pool=POOL, X=VOTES,
                              candidates=ALL, model=FixedVotes())
    assert scores.scores.tolist() == [2, 2, 3, 2, 2]
    assert pick("QBC-R+", VOTES, FixedVotes()) == (1, 3)


def test_a_strategy_without_a_model_falls_back_to_random_ties():
    picks = {pick("LC-R+", P, None, seed=seed) for seed in range(50)}
    assert picks == {(1, 3)}  # no model: every pair weighs 1, CNT's choice
    assert fit_model(family("LC"), np.zeros((3, 2)), [1, 1, 1]) is None
    assert fit_model(family("Random"), np.zeros((3, 2)), [0, 1, 1]) is None


def _fitted_case():
    """Noisy labels on 60 rows, so a fitted model is unsure of some of 80 fresh pool rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + rng.normal(scale=0.7, size=60) > 0
    return X, y, rng.normal(size=(80, 3))


def test_fitted_lc_model_scores_least_confidence_of_its_probabilities():
    X, y, pool_X = _fitted_case()
    model = fit_model(family("LC"), X, y, random_state=0)
    assert model is not None
    proba = model.predict_proba(pool_X)
    p = proba[:, list(model.classes_).index(1)]
    assert ((0 <= p) & (p <= 1)).all() and len(np.unique(p)) > 10
    candidates = np.arange(80) % 3 != 0  # a third of the rows may not be asked
    scored = score_candidates(get_strategy("LC"), closure=None, pool=np.zeros((80, 2)), X=pool_X,
                              candidates=candidates, model=model)
    assert scored.rows.tolist() == np.flatnonzero(candidates).tolist()
    expected = np.array([1 - max(q, 1 - q) for q in p[candidates]])
    np.testing.assert_allclose(scored.scores, expected)
    assert scored.scores.max() > 0.2 and scored.scores.min() < 0.1


def test_fitted_committee_scores_the_members_disagreeing_with_the_majority():
    X, y, pool_X = _fitted_case()
    model = fit_model(family("QBC"), X, y, random_state=0)
    assert model is not None
    members = model.bagging_.estimators_
    features = model.bagging_.estimators_features_
    votes = np.array([model.classes_[m.predict(pool_X[:, f]).astype(int)] == 1
                      for m, f in zip(members, features, strict=True)])
    positive = votes.sum(axis=0)
    expected = [min(v, len(members) - v) for v in positive]
    scored = score_candidates(get_strategy("QBC"), closure=None, pool=np.zeros((80, 2)), X=pool_X,
                              candidates=np.ones(80, bool), model=model)
    assert scored.scores.tolist() == expected
    assert 0 < sum(expected) and max(expected) == len(members) // 2


def test_fitted_models_pick_a_best_scored_row_with_the_closure():
    X, y, pool_X = _fitted_case()
    pool = np.random.default_rng(1).permutation(list(itertools.permutations(range(12), 2)))[:80]
    for strategy in ("LC-R+", "QBC-R+"):
        model = fit_model(family(strategy), X, y, random_state=0)
        assert model is not None
        scored = score_candidates(get_strategy(strategy), closure=Closure(range(12)), pool=pool,
                                  X=pool_X, candidates=np.ones(80, bool), model=model)
        chosen = select(get_strategy(strategy), closure=Closure(range(12)), pool=pool, X=pool_X,
                        candidates=np.ones(80, bool), model=model, random_state=0)
        assert len(chosen.rows) == 1 and chosen.scores[0] == scored.scores.max() > 0


# ------------------------------------------------------------------------------ brute force
def random_case(seed: int, n: int = 6):
    """A random strict order, a closure of some of its labels, a pool and model stand-ins."""
    rng = random.Random(seed)
    rank = list(range(n))
    rng.shuffle(rank)
    truth = {(a, b) for a in range(n) for b in range(n)
             if rank[a] < rank[b] and rng.random() < 0.4}
    while True:  # close transitively
        new = {(a, c) for a, b in truth for b2, c in truth if b == b2} - truth
        if not new:
            break
        truth |= new
    pairs = list(itertools.permutations(range(n), 2))
    closure = Closure(range(n))
    for a, b in rng.sample(pairs, rng.randint(0, 6)):
        if closure.status(a, b).value is None:
            closure.add_label(a, b, (a, b) in truth)
    pool = np.array(rng.sample(pairs, rng.randint(3, len(pairs))))
    p = np.array([[rng.random()] for _ in pool])
    votes = np.array([[rng.randint(0, 1) for _ in range(3)] for _ in pool])
    return closure, pool, p, votes


def brute_gains(closure: Closure, pool, wp, wn, a, b):
    """Add each answer to a copy and weigh the pool pairs it newly decides."""
    before = closure.values_by_index(pool[:, 0], pool[:, 1])
    out = []
    for answer in (True, False):
        copy = closure.copy()
        copy.add_label(int(a), int(b), answer)
        after = copy.values_by_index(pool[:, 0], pool[:, 1])
        new = (before < 0) & (after >= 0)
        out.append(float(np.sum(np.where(after == 1, wp, wn)[new])))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_r_plus_scores_equal_adding_each_answer_to_a_copy_and_counting(seed):
    closure, pool, p, votes = random_case(seed)
    undecided = closure.values_by_index(pool[:, 0], pool[:, 1]) < 0
    cases = {"CNT": (np.zeros_like(p), None, np.ones(len(pool)), np.ones(len(pool))),
             "LC-R+": (p, FixedProbabilities(), 1 - p[:, 0], p[:, 0]),
             "QBC-R+": (votes, FixedVotes(), 3.0 - votes.sum(1), votes.sum(1).astype(float))}
    for strategy, (X, model, wp, wn) in cases.items():
        scores = score_candidates(get_strategy(strategy), closure=closure, pool=pool, X=X,
                                  candidates=np.ones(len(pool), bool), model=model)
        assert scores.rows.tolist() == np.flatnonzero(undecided).tolist()
        for i, row in enumerate(scores.rows):
            gp, gn = brute_gains(closure, pool, wp, wn, *pool[row])
            assert scores.gain_positive[i] == pytest.approx(gp)
            assert scores.gain_negative[i] == pytest.approx(gn)
            assert scores.scores[i] == pytest.approx(min(gp, gn))


# ------------------------------------------------------------------------------ batches
def decides(closure: Closure, first, second) -> bool:
    """Whether either answer to ``first`` decides ``second`` (by adding it to a copy)."""
    for answer in (True, False):
        copy = closure.copy()
        copy.add_label(int(first[0]), int(first[1]), answer)
        if copy.status(int(second[0]), int(second[1])).value is not None:
            return True
    return False


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 5), st.sampled_from(["CNT", "Random-R"]))
def test_a_batch_never_holds_two_pairs_that_decide_each_other(seed, k, strategy):
    closure, pool, _, _ = random_case(seed)
    chosen = select(get_strategy(strategy), closure=closure, pool=pool, X=np.zeros((len(pool), 1)),
                    candidates=np.ones(len(pool), bool), k=k, random_state=seed)
    n_open = int((closure.values_by_index(pool[:, 0], pool[:, 1]) < 0).sum())
    assert 1 <= len(chosen.rows) <= k if n_open else len(chosen.rows) == 0
    for i, j in itertools.permutations(chosen.rows, 2):
        assert not decides(closure, pool[i], pool[j])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_entangled_agrees_with_adding_answers_to_a_copy(seed):
    closure, pool, _, _ = random_case(seed)
    open_rows = pool[closure.values_by_index(pool[:, 0], pool[:, 1]) < 0]
    for pair in open_rows:
        expected = [decides(closure, pair, other) or decides(closure, other, pair)
                    for other in open_rows]
        assert entangled(closure, pair, open_rows).tolist() == expected


def test_a_batch_skips_the_reverse_of_a_chosen_pair_and_keeps_the_best_first():
    closure = Closure(range(4))
    pool = np.array([[0, 1], [1, 0], [2, 3]])
    # each of (0,1), (1,0) decides the other; (2,3) is independent of both
    for seed in range(20):
        batch = select(get_strategy("CNT"), closure=closure, pool=pool, X=np.zeros((3, 1)),
                       candidates=np.ones(3, bool), k=3, random_state=seed)
        single = select(get_strategy("CNT"), closure=closure, pool=pool, X=np.zeros((3, 1)),
                        candidates=np.ones(3, bool), k=1, random_state=seed)
        assert sorted(batch.rows.tolist()) in ([0, 2], [1, 2])
        assert batch.rows[0] == single.rows[0]


# ------------------------------------------------------------------------------ beyond the paper
def test_default_resolves_to_the_default_strategy_by_its_own_name():
    assert parse_strategy("default") == parse_strategy(" Default") == DEFAULT_STRATEGY
    assert DEFAULT_STRATEGY in ALL_STRATEGIES
    assert parse_strategy("edp") == "EDP"
    assert ALL_STRATEGIES[:9] == STRATEGY_NAMES and set(NEW_STRATEGIES) <= set(ALL_STRATEGIES)
    assert uses_closure("EDP") and needs_model("EDP")
    with pytest.raises(ValueError, match="default"):
        parse_strategy("defaults")


def test_edp_scores_the_expected_count_of_newly_decided_pairs():
    # counts from the module table: F+ = 2 1 2 3 3, F- = 1 2 2 1 1; p = .5 .5 .5 .9 .1
    # EDP = p F+ + (1 - p) F- = 1.5 1.5 2 2.8 1.2
    X = np.array([[0.5], [0.5], [0.5], [0.9], [0.1]])
    scores = score_candidates(get_strategy("EDP"), closure=hand_closure(), pool=POOL, X=X,
                              candidates=ALL, model=FixedProbabilities())
    assert scores.gain_positive.tolist() == [2, 1, 2, 3, 3]
    assert scores.gain_negative.tolist() == [1, 2, 2, 1, 1]
    np.testing.assert_allclose(scores.scores, [1.5, 1.5, 2.0, 2.8, 1.2])
    assert pick("EDP", X, FixedProbabilities()) == (2, 3)


def test_edp_without_a_model_scores_the_mean_of_both_counts():
    scores = score_candidates(get_strategy("EDP"), closure=hand_closure(), pool=POOL,
                              X=np.zeros((5, 1)), candidates=ALL)
    np.testing.assert_allclose(scores.scores, [1.5, 1.5, 2.0, 2.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_edp_equals_adding_each_answer_to_a_copy_and_averaging_by_p(seed):
    closure, pool, p, _ = random_case(seed)
    ones = np.ones(len(pool))
    scores = score_candidates(get_strategy("EDP"), closure=closure, pool=pool, X=p,
                              candidates=np.ones(len(pool), bool), model=FixedProbabilities())
    for i, row in enumerate(scores.rows):
        gp, gn = brute_gains(closure, pool, ones, ones, *pool[row])
        q = p[row, 0]
        assert scores.scores[i] == pytest.approx(q * gp + (1 - q) * gn)


def test_edp_q_weighs_the_counts_by_the_committee_share_voting_positive():
    votes = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]])  # rows: pool pairs
    scores = score_candidates(get_strategy("EDP-Q"), closure=hand_closure(), pool=POOL, X=votes,
                              candidates=ALL, model=FixedVotes())
    share = votes.mean(axis=1)
    expected = share * np.array([2, 1, 2, 3, 3]) + (1 - share) * np.array([1, 2, 2, 1, 1])
    np.testing.assert_allclose(scores.scores, expected)
    assert parse_strategy("edp-q") == "EDP-Q" and needs_model("EDP-Q")


def test_edp_c_weighs_the_counts_by_order_respecting_probabilities():
    from reasoning.consistent import soft_probabilities

    # 1 ≺ 2 is decided: p(0, 1) = .9 lifts p(0, 2) by the max-min closure
    X = np.array([[0.9], [0.1], [0.5], [0.5], [0.5]])
    closure = hand_closure()
    scores = score_candidates(get_strategy("EDP-C"), closure=closure, pool=POOL, X=X,
                              candidates=ALL, model=FixedProbabilities())
    soft = soft_probabilities(closure, POOL, X[:, 0])
    assert soft[1] == pytest.approx(0.5 * 0.1 + 0.5 * 0.9)
    expected = soft * np.array([2, 1, 2, 3, 3]) + (1 - soft) * np.array([1, 2, 2, 1, 1])
    np.testing.assert_allclose(scores.scores, expected)
    plain = score_candidates(get_strategy("EDP"), closure=closure, pool=POOL, X=X, candidates=ALL,
                             model=FixedProbabilities())
    assert scores.scores[1] != pytest.approx(plain.scores[1])


# ------------------------------------------------------------------------------ the registry
def test_registry_keeps_the_order_that_seeds_the_simulation_and_its_objects_pickle():
    import pickle

    from reasoning.strategies import STRATEGIES

    assert ALL_STRATEGIES == ("Random", "LC", "QBC", "Random-R", "LC-R", "QBC-R", "CNT",
                              "LC-R+", "QBC-R+", "EDP", "EDP-Q", "EDP-C", "EDP-F")
    assert [get_strategy(s.name) for s in STRATEGIES] == list(STRATEGIES)
    assert get_strategy(STRATEGIES[7]) is STRATEGIES[7]
    assert pickle.loads(pickle.dumps(STRATEGIES)) == STRATEGIES
