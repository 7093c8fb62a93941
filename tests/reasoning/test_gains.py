"""The all-candidate gain against adding each label to a copy and counting."""

from __future__ import annotations

import itertools
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.closure import Closure
from reasoning.gains import candidate_gains
from tests.reasoning.cases import orders_and_labels


def _counted(closure: Closure, a: int, b: int, positive: bool, weight) -> float:
    """The weight of the pool pairs that really become decided when (a, b) is labeled."""
    copy = closure.copy()
    update = copy.add_label(a, b, positive)
    total = weight.get((a, b, positive), 0.0)
    total += sum(weight.get((x, y, True), 0.0) for x, y in update.positive)
    total += sum(weight.get((x, y, False), 0.0) for x, y in update.negative)
    return total


@settings(max_examples=80, deadline=None)
@given(orders_and_labels(), st.integers(0, 2**32 - 1), st.booleans())
def test_gain_of_every_candidate_equals_adding_the_label_to_a_copy(case, seed, sparse):
    n, labels = case
    closure = Closure(range(n))
    for a, b, value in labels:
        closure.add_label(a, b, value)
    rng = random.Random(seed)
    pairs = list(itertools.permutations(range(n), 2))
    pool = np.array(rng.sample(pairs, rng.randint(1, len(pairs))))
    wp = np.array([rng.choice([0.0, 0.25, 1.0, 2.5]) for _ in pool])
    wn = np.array([rng.choice([0.0, 0.5, 1.0, 3.0]) for _ in pool])
    undecided = closure.values_by_index(pool[:, 0], pool[:, 1]) == -1
    candidates = pool[undecided]
    weight = {}
    for (u, v), p, q in zip(pool.tolist(), wp, wn, strict=True):
        if closure.status(u, v).value is None:  # decided pool pairs weigh nothing
            weight[(u, v, True)], weight[(u, v, False)] = p, q
    gain_pos, gain_neg = candidate_gains(closure, candidates, pool, wp, wn, sparse=sparse)
    for k, (a, b) in enumerate(candidates.tolist()):
        assert np.isclose(gain_pos[k], _counted(closure, a, b, True, weight))
        assert np.isclose(gain_neg[k], _counted(closure, a, b, False, weight))


def test_counts_with_unit_weights_on_a_chain():
    # a ≺ b is known; c is free. Labelling (b, c) positive adds (a, c) too, and the
    # negatives (c, b), (c, a).
    closure = Closure(range(3))
    closure.add_label(0, 1, True)
    pool = np.array([(1, 2), (0, 2), (2, 1), (2, 0)])
    ones = np.ones(len(pool))
    gain_pos, gain_neg = candidate_gains(closure, pool[:1], pool, ones, ones)
    assert gain_pos.tolist() == [4.0]
    assert gain_neg.tolist() == [1.0]


def test_no_candidates_gives_empty_gains():
    closure = Closure(range(2))
    gain_pos, gain_neg = candidate_gains(closure, np.zeros((0, 2), int), np.array([[0, 1]]),
                                         np.ones(1), np.ones(1))
    assert gain_pos.shape == gain_neg.shape == (0,)
