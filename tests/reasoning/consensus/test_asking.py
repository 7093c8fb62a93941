"""The question-choosing policy of a team: disagreements, second opinions, checks, new pairs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reasoning.closure import Closure
from reasoning.consensus import Vote, check_candidates, consensus
from reasoning.consensus.asking import AskPolicy, TeamView, stakes


def _view(answers, concepts, pool, **kwargs) -> TeamView:
    by: dict = {}
    for ans in answers:
        by.setdefault((ans.a, ans.b), []).append(ans)
    return TeamView(consensus(answers, concepts), by, set(pool), **kwargs)


def test_a_disagreement_comes_first_and_never_to_who_answered_it():
    answers = [Vote("x", "y", True, "a"), Vote("x", "y", False, "b"),
               Vote("y", "z", True, "a")]
    view = _view(answers, "xyz", [("x", "y"), ("y", "z"), ("x", "z")])
    choice = AskPolicy().choose(view, "c", new_pair=lambda: ("x", "z"))
    assert (choice.a, choice.b, choice.reason) == ("x", "y", "disagreement")
    for who in ("a", "b"):  # they answered it: a new pair instead
        choice = AskPolicy(check_rate=0).choose(view, who, new_pair=lambda: ("x", "z"))
        assert choice.reason != "disagreement"


def test_a_pair_that_gave_way_asks_the_links_of_its_proof():
    answers = [Vote("a", "b", True, "p"), Vote("b", "c", True, "q"),
               Vote("a", "c", False, "r", check=True)]
    view = _view(answers, "abc", list(itertools.permutations("abc", 2)))
    choice = AskPolicy().disagreement(view, "r")
    assert choice is not None and (choice.a, choice.b) in {("a", "b"), ("b", "c")}
    assert AskPolicy().disagreement(view, "p").b in {"c"}


def test_second_opinions_go_where_p_wrong_times_stake_is_largest():
    answers = [Vote(0, 1, True, "a"), Vote(2, 3, True, "a"), Vote(4, 5, False, "a")]
    pool = [(0, 1), (2, 3), (4, 5)]
    stake = {(0, 1): 1, (2, 3): 30, (4, 5): 30}
    proba = {(2, 3): 0.9, (4, 5): 0.9}  # the model agrees with (2, 3), not with (4, 5)
    view = _view(answers, range(6), pool, proba=proba, stake=stake)
    choice = AskPolicy(check_rate=0).choose(view, "b")
    assert (choice.a, choice.b, choice.reason) == (4, 5, "second-opinion")
    assert AskPolicy(check_rate=0).second_opinion(view, "a") is None  # answered them all
    assert AskPolicy(threshold=1e9).second_opinion(view, "b") is None


def test_a_failed_check_makes_that_annotators_negatives_suspect():
    answers = [Vote(0, 1, True, "a"), Vote(1, 2, True, "b"),
               Vote(0, 2, False, "d", check=True), Vote(3, 4, False, "d"),
               Vote(5, 6, False, "e")]
    pool = [(0, 1), (1, 2), (0, 2), (3, 4), (5, 6)]
    view = _view(answers, range(7), pool, stake=dict.fromkeys(pool, 2))
    policy = AskPolicy(check_rate=0, threshold=0.5)
    assert policy.suspects(view) == {"d": pytest.approx(1 - 1.1 / 2)}
    choice = policy.second_opinion(view, "c")
    assert (choice.a, choice.b) == (3, 4)  # d's negative, not e's


def test_check_questions_come_at_the_rate_and_are_check_candidates():
    closure_answers = [Vote(0, 1, True, "a"), Vote(1, 2, True, "a"),
                       Vote(2, 3, True, "a")]
    pool = list(itertools.permutations(range(4), 2))
    view = _view(closure_answers, range(4), pool, stake=dict.fromkeys(pool, 1))
    policy = AskPolicy(threshold=1e9)
    expected = set(check_candidates(view.closure, view.answers))
    assert expected == {(0, 2), (1, 3), (0, 3)}
    rng = np.random.default_rng(0)
    choices = [policy.choose(view, "b", draw=float(rng.random()), new_pair=lambda: (3, 0))
               for _ in range(4000)]
    checks = [c for c in choices if c.check]
    assert {(c.a, c.b) for c in checks} == expected
    assert all(c.reason == "new" for c in choices)  # a check question looks like any other
    assert abs(len(checks) / len(choices) - policy.check_rate) < 0.012


def test_an_annotator_who_passed_a_check_gets_fewer():
    answers = [Vote(0, 1, True, "a"), Vote(1, 2, True, "a"),
               Vote(0, 2, True, "b", check=True)]
    view = _view(answers, range(3), [(0, 1), (1, 2), (0, 2)])
    policy = AskPolicy()
    assert policy.rate(view, "b") == policy.passed_rate < policy.rate(view, "c")


def test_nothing_left_for_an_annotator_gives_none():
    answers = [Vote(0, 1, True, "a")]
    view = _view(answers, range(2), [(0, 1)])
    assert AskPolicy().choose(view, "a", draw=0.0) is None


@pytest.mark.parametrize("seed", range(4))
def test_stakes_count_the_pool_pairs_in_each_labels_product_set(seed):
    rng = np.random.default_rng(seed)
    n = 8
    closure = Closure(range(n))
    labels = {}
    for a, b in itertools.permutations(range(n), 2):
        if rng.random() < 0.15 and closure.status(a, b).value is None:
            value = bool(rng.random() < 0.5)
            closure.add_label(a, b, value)
            labels[(a, b)] = value
    pool = [p for p in itertools.permutations(range(n), 2) if rng.random() < 0.7]
    down, _ = closure.matrices()
    reach = down | np.eye(n, dtype=bool)
    got = stakes(closure, labels, pool)
    for (a, b), value in labels.items():
        if value:
            count = sum(reach[x, a] and reach[b, y] for x, y in pool) + sum(
                reach[y, a] and reach[b, x] for x, y in pool)
        else:
            count = sum(reach[a, x] and reach[y, b] for x, y in pool)
        assert got[(a, b)] == max(count, 1)
