"""The literal baseline (Theorem 1 as stated) against the brute-force fixpoint."""

from __future__ import annotations

import copy
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.literal import LiteralClosure, LiteralContradiction
from tests.reasoning.bruteforce import fixpoint
from tests.reasoning.cases import arbitrary_labels, orders_and_labels

VARIANTS = [True, False]  # prune (Proposition 2) or compute O in full


@pytest.mark.parametrize("prune", VARIANTS)
@settings(max_examples=60, deadline=None)
@given(case=orders_and_labels())
def test_literal_closure_equals_bruteforce_fixpoint(prune, case):
    n, labels = case
    closure = LiteralClosure(prune=prune)
    for a, b, value in labels:
        before = (set(closure.positive), set(closure.negative))
        new_positive, new_negative = closure.add_label(a, b, value)
        assert closure.value(a, b) is value
        own = {(a, b)} - (before[0] if value else before[1])
        assert new_positive | (own if value else set()) == closure.positive - before[0]
        assert new_negative | (set() if value else own) == closure.negative - before[1]
    positive, negative, contradictory = fixpoint(n, labels)
    assert not contradictory
    assert (closure.positive, closure.negative) == (positive, negative)


@settings(max_examples=40, deadline=None)
@given(case=orders_and_labels(max_n=7), rng=st.randoms(use_true_random=False))
def test_insertion_order_and_pruning_do_not_change_the_closure(case, rng):
    _, labels = case
    shuffled = list(labels)
    rng.shuffle(shuffled)
    results = []
    for prune, sequence in itertools.product(VARIANTS, [labels, shuffled]):
        closure = LiteralClosure(prune=prune)
        for label in sequence:
            closure.add_label(*label)
        results.append((closure.positive, closure.negative))
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("prune", VARIANTS)
@settings(max_examples=60, deadline=None)
@given(case=arbitrary_labels())
def test_contradiction_verdict_equals_bruteforce(prune, case):
    n, labels = case
    closure = LiteralClosure(prune=prune)
    accepted: list[tuple[int, int, bool]] = []
    for a, b, value in labels:
        if fixpoint(n, [*accepted, (a, b, value)])[2]:
            before = (set(closure.positive), set(closure.negative))
            with pytest.raises(LiteralContradiction):
                closure.add_label(a, b, value)
            assert (closure.positive, closure.negative) == before
        else:
            closure.add_label(a, b, value)
            accepted.append((a, b, value))
    assert (closure.positive, closure.negative) == fixpoint(n, accepted)[:2]


@pytest.mark.parametrize("prune", VARIANTS)
@settings(max_examples=40, deadline=None)
@given(case=orders_and_labels(), seed=st.integers(0, 2**32))
def test_gain_counts_the_pool_pairs_that_adding_the_label_decides(prune, case, seed):
    n, labels = case
    rng = random.Random(seed)
    closure = LiteralClosure(prune=prune)
    for label in labels:
        closure.add_label(*label)
    pairs = list(itertools.permutations(range(n), 2))
    pool = set(rng.sample(pairs, rng.randint(0, len(pairs))))
    truth = fixpoint(n, labels)
    for a, b in pairs:
        if closure.value(a, b) is not None:
            continue
        for value in (True, False):
            state = (set(closure.positive), set(closure.negative))
            gain = closure.gain(a, b, value, pool)
            assert (closure.positive, closure.negative) == state, "gain must not change H"
            trial = copy.deepcopy(closure)
            trial.add_label(a, b, value)
            decided = (trial.positive | trial.negative) - (truth[0] | truth[1])
            assert gain == len(decided & pool)


def test_self_pair_is_refused_and_repeats_are_no_ops():
    closure = LiteralClosure()
    with pytest.raises(ValueError):
        closure.add_label(3, 3, False)
    closure.add_label(0, 1, True)
    assert closure.add_label(0, 1, True) == (set(), set())
    with pytest.raises(LiteralContradiction):
        closure.add_label(1, 0, True)
