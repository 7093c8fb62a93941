"""The ask policy's variants: the pool pairs resting on a label now, the stake rules, the prior
on the accuracies, and the simulation's registry of consensus variants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import reasoning.consensus.asking as asking_module
from reasoning.closure import Closure
from reasoning.consensus import Vote, consensus
from reasoning.consensus.asking import (
    PRIOR_ACCURACY,
    AskPolicy,
    TeamView,
    asked_stake,
    covering_stake,
    held_alone,
    now_stake,
    resting,
    rests_densely,
)
from reasoning.generate import random_order
from reasoning.simulation.teams import CONSENSUS_VARIANTS, POLICIES


def _view(answers, concepts, pool, **kwargs) -> TeamView:
    by: dict = {}
    for ans in answers:
        by.setdefault((ans.a, ans.b), []).append(ans)
    return TeamView(consensus(answers, concepts), by, set(pool), **kwargs)


def test_a_chain_rests_on_each_link_and_a_parallel_label_shares_it():
    pool = list(itertools.permutations("abc", 2))
    closure = Closure("abc")
    closure.add_label("a", "b", True)
    closure.add_label("b", "c", True)
    # each link alone holds itself, (a, c) and both mirrors
    assert resting(closure, pool) == {("a", "b"): 4, ("b", "c"): 4}
    closure.add_label("a", "c", True)  # a second path to (a, c): no link holds it alone
    assert resting(closure, pool) == {("a", "b"): 2, ("b", "c"): 2, ("a", "c"): 1}


@pytest.mark.parametrize("seed", range(6))
def test_what_rests_on_a_label_alone_is_undecided_without_it(seed):
    """Against retraction: every pair held alone is undecided once the label is retracted;
    with positive labels only, those are exactly the pairs that become undecided."""
    order = random_order(9, 40, positive_share=0.4, depth=3, random_state=seed)
    rng = np.random.default_rng(seed)
    pool = [(int(a), int(b)) for a, b in order.pool.tolist()]
    truth = dict(zip(pool, order.labels.tolist(), strict=True))
    for positives_only in (True, False):
        chosen = [p for p in pool if rng.random() < 0.5 and (truth[p] or not positives_only)]
        closure = Closure.from_labels([(a, b, truth[(a, b)]) for a, b in chosen], range(9))
        keys, held = held_alone(closure, pool)
        before = np.array([closure.status(*p).value is not None for p in pool])
        for k, pair in enumerate(keys):
            rest = closure.retract(*pair)
            after = np.array([rest.status(*p).value is not None for p in pool])
            lost = before & ~after
            assert not (held[k] & ~lost).any(), pair
            if positives_only:
                assert (held[k] == lost).all(), pair


def test_the_stake_now_asks_a_link_that_holds_a_chain_the_asked_stake_does_not():
    answers = [Vote("a", "b", True, "p"), Vote("b", "c", True, "q"),
               Vote("c", "d", True, "q")]
    pool = list(itertools.permutations("abcd", 2))
    stake = {("a", "b"): 1, ("b", "c"): 1, ("c", "d"): 1}  # each decided little when asked
    view = _view(answers, "abcd", pool, stake=stake)
    now = now_stake(view)
    assert now[("b", "c")] == 8 and now[("a", "b")] == 6  # (b, c) is the middle link
    assert asked_stake(view) == stake
    assert covering_stake(view)[("b", "c")] == 8
    assert AskPolicy(check_rate=0, threshold=0.5).second_opinion(view, "r") is None
    choice = AskPolicy(check_rate=0, threshold=0.5, stake=now_stake).second_opinion(view, "r")
    assert choice is not None and (choice.a, choice.b) == ("b", "c")


def test_covering_stake_keeps_the_asked_stake_on_negatives():
    answers = [Vote("a", "b", True, "p"), Vote("c", "d", False, "q")]
    pool = list(itertools.permutations("abcd", 2))
    view = _view(answers, "abcd", pool, stake={("a", "b"): 1, ("c", "d"): 7})
    assert covering_stake(view) == {("a", "b"): 2, ("c", "d"): 7}
    assert now_stake(view) == {("a", "b"): 2, ("c", "d"): 1}


def test_a_stronger_prior_draws_the_accuracies_towards_the_prior():
    answers = [Vote(0, 1, True, "a"), Vote(0, 1, False, "b"), Vote(0, 1, True, "c"),
               Vote(2, 3, True, "a")]
    view = _view(answers, range(4), [(0, 1), (2, 3)])
    estimated = view.result.accuracy
    assert AskPolicy().accuracies(view) == estimated
    drawn = AskPolicy(prior_answers=20.0).accuracies(view)
    for name in ("a", "b", "c"):  # one answer each on a pair with several answers
        assert drawn[name] == pytest.approx((estimated[name] + 20 * PRIOR_ACCURACY) / 21)
    assert abs(drawn["b"] - PRIOR_ACCURACY) < abs(estimated["b"] - PRIOR_ACCURACY)
    low, high = (AskPolicy(prior_answers=w).p_wrong(view, (2, 3), True, {})
                 for w in (0.0, 20.0))
    assert (low < high) == (estimated["a"] > drawn["a"])


def test_every_consensus_variant_is_a_policy_and_sets_only_its_fields():
    base = AskPolicy(check_rate=0.2, threshold=0.7)
    for name, variant in CONSENSUS_VARIANTS.items():
        assert name in POLICIES
        policy = variant.policy(base)
        if "threshold" not in variant.fields:
            assert policy.threshold == 0.7  # --second-opinion-value is kept
        for key, value in vars(base).items():
            assert getattr(policy, key) == variant.fields.get(key, value)
    assert CONSENSUS_VARIANTS["consensus-now"].policy(base).stake is now_stake
    assert not CONSENSUS_VARIANTS["consensus-unweighted"].weighted
    assert not CONSENSUS_VARIANTS["consensus-now-unweighted"].weighted
    assert CONSENSUS_VARIANTS["consensus-now-unweighted"].policy(base).stake is now_stake


def test_the_report_pairs_every_other_variant_with_consensus():
    from reasoning.simulation.team_report import PAIRED

    for name in set(CONSENSUS_VARIANTS) - {"consensus", "consensus-unweighted",
                                           "consensus-nocheck"}:
        assert (name, "consensus") in PAIRED
    assert ("consensus", "consensus-unweighted") in PAIRED  # the earlier pairs stay
    assert ("consensus-now", "consensus-now-unweighted") in PAIRED  # the service's weights


def test_a_map_too_large_to_rest_densely_counts_the_asked_stake(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past :data:`RESTING_CELLS` positive labels × pool pairs the stake now falls back to the
    stake each label's answer decided, instead of a dense matrix of that size."""
    answers = [Vote("a", "b", True, "ann"), Vote("b", "c", True, "ann")]
    pool = list(itertools.permutations("abc", 2))
    asked = {("a", "b"): 7, ("b", "c"): 5}
    view = _view(answers, "abc", pool, stake=asked)
    assert rests_densely(view.closure, pool)
    assert now_stake(view) == {("a", "b"): 4, ("b", "c"): 4}
    monkeypatch.setattr(asking_module, "RESTING_CELLS", 2 * len(pool) - 1)
    assert not rests_densely(view.closure, pool)
    assert now_stake(_view(answers, "abc", pool, stake=asked)) == asked
    given = {("a", "b"): 1, ("b", "c"): 9}  # what a caller kept is used as it is
    assert now_stake(_view(answers, "abc", pool, stake=asked, rest=given)) == given
