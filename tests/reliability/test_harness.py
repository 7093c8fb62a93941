"""The oracle of the reliability tests agrees with the naive rule-by-rule fixpoint.

``closure_fixpoint`` (boolean matrices, for 200 concepts) must be right before the service
is judged by it: on small random label sets it equals ``tests.reasoning.bruteforce.fixpoint``,
which loops over pairs of pairs.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tests.reasoning.bruteforce import fixpoint
from tests.reliability.harness import closure_fixpoint, generate_order, sample_labels


@pytest.mark.parametrize("seed", range(40))
def test_matrix_fixpoint_equals_the_naive_fixpoint(seed: int) -> None:
    rng = random.Random(seed)
    order = generate_order(rng.randint(2, 9), seed=seed)
    n = len(order.concepts)
    labels = sample_labels(order, rng.randint(1, n * (n - 1)), flip=0.15, seed=seed)
    positive, negative, contradictory = fixpoint(
        order.concepts, [(a, b, label == "positive") for a, b, label in labels])
    if contradictory:
        with pytest.raises(AssertionError):
            closure_fixpoint(order.concepts, labels)
        return
    expected = {**dict.fromkeys(positive, "positive"), **dict.fromkeys(negative, "negative")}
    assert closure_fixpoint(order.concepts, labels) == expected


def test_generated_order_is_a_strict_order() -> None:
    less = generate_order(50, seed=1).less
    assert not less.diagonal().any()
    assert not (less & less.T).any()
    assert np.array_equal(less, less | ((less.astype(int) @ less.astype(int)) > 0))
    assert less.any()


def test_true_labels_close_to_the_order_itself() -> None:
    order = generate_order(12, seed=2)
    n = len(order.concepts)
    everything = sample_labels(order, n * (n - 1), seed=2)
    decided = closure_fixpoint(order.concepts, everything)
    assert len(decided) == n * (n - 1)
    assert all(order.label(a, b) == value for (a, b), value in decided.items())
