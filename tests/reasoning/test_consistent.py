"""The consistent map: its labels form a strict order that extends the decided pairs."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.closure import Closure
from reasoning.consistent import SOURCES, consistent_map, soft_probabilities
from tests.reasoning.bruteforce import fixpoint
from tests.reasoning.cases import random_order_pairs


def random_case(seed: int):
    """A closure of some true labels, a pool, and probabilities from no order at all."""
    rng = random.Random(seed)
    n = rng.randint(3, 7)
    truth = random_order_pairs(rng, n, rng.choice([0.2, 0.4, 0.7]))
    pairs = list(itertools.permutations(range(n), 2))
    closure = Closure(range(n))
    for a, b in rng.sample(pairs, rng.randint(0, 5)):
        if closure.status(a, b).value is None:
            closure.add_label(a, b, (a, b) in truth)
    pool = np.array(rng.sample(pairs, rng.randint(2, len(pairs))))
    proba = np.array([rng.random() for _ in pool])
    return n, closure, pool, proba


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100_000), st.booleans())
def test_the_map_is_a_strict_order_extending_the_closure_by_the_brute_force_fixpoint(seed, soft):
    n, closure, pool, proba = random_case(seed)
    before = closure.values_by_index(pool[:, 0], pool[:, 1])
    result = consistent_map(closure, pool, proba, soft=soft)
    label = result.probability >= 0.5
    assert label.tolist() == result.label.tolist()
    # the map's labels together with the asserted labels are consistent, and their fixpoint
    # decides no pool pair against the map
    stated = [(lab.a, lab.b, lab.positive) for lab in closure.asserted_labels()]
    stated += [(int(a), int(b), bool(v)) for (a, b), v in zip(pool, label, strict=True)]
    positive, negative, contradictory = fixpoint(n, stated)
    assert not contradictory
    for (a, b), v in zip(pool.tolist(), label.tolist(), strict=True):
        assert ((a, b) in positive) == v and ((a, b) in negative) == (not v)
    # decided pairs keep their value, as 1 or 0, with their source
    decided = before >= 0
    assert (label[decided] == (before[decided] == 1)).all()
    assert set(result.probability[decided].tolist()) <= {0.0, 1.0}
    names = result.sources()
    asserted = {(lab.a, lab.b) for lab in closure.asserted_labels()}
    for (a, b), value, name in zip(pool.tolist(), before.tolist(), names, strict=True):
        if value < 0:
            assert name in ("predicted", "forced")
        else:
            assert name == ("asserted" if (a, b) in asserted else "inferred")
    assert closure.values_by_index(pool[:, 0], pool[:, 1]).tolist() == before.tolist()  # unchanged


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 100_000))
def test_a_predicted_pair_keeps_its_own_label_and_a_forced_one_flips_it(seed):
    _, closure, pool, proba = random_case(seed)
    result = consistent_map(closure, pool, proba, soft=False)
    for row, name in enumerate(result.sources()):
        if name == "predicted":
            assert result.label[row] == (proba[row] >= 0.5)
            assert result.probability[row] == proba[row]
        elif name == "forced":
            assert result.label[row] != (proba[row] >= 0.5)
            assert result.probability[row] == pytest.approx(
                max(0.5, (proba[row] + 1) / 2) if result.label[row] else min(proba[row] / 2, 0.5))


def test_both_directions_predicted_positive_become_one_order():
    closure = Closure(range(3))
    pool = np.array([[0, 1], [1, 0], [1, 2], [2, 1], [0, 2], [2, 0]])
    result = consistent_map(closure, pool, np.array([0.9, 0.8, 0.7, 0.6, 0.2, 0.3]))
    assert result.label.tolist() == [True, False, True, False, True, False]
    # the soft step already lowers (1, 0) and (2, 1) below 0.5 (asymmetry), but not (0, 2):
    # 0.5 · 0.2 + 0.5 · min(0.9, 0.7) = 0.45, which the order 0 ≺ 1 ≺ 2 then forces positive
    assert result.sources() == ["predicted"] * 4 + ["forced", "predicted"]
    assert result.probability[4] == pytest.approx(0.5 * 0.45 + 0.5)
    assert [SOURCES[s] for s in result.source] == result.sources()


def test_the_soft_closure_lifts_a_transitive_pair_and_lowers_the_weaker_direction():
    closure = Closure(range(3))
    closure.add_label(0, 1, True)
    pool = np.array([[1, 2], [0, 2], [2, 0], [0, 1]])
    soft = soft_probabilities(closure, pool, np.array([0.8, 0.3, 0.4, 0.5]), blend=0.0)
    # (0, 2) ≥ min(1, 0.8); (2, 0) ≤ 1 − 0.8; the decided (0, 1) stays 1
    assert soft.tolist() == pytest.approx([0.8, 0.8, 0.2, 1.0])
    blended = soft_probabilities(closure, pool, np.array([0.8, 0.3, 0.4, 0.5]))
    assert blended.tolist() == pytest.approx([0.8, 0.55, 0.3, 1.0])


def test_above_the_soft_limit_only_the_hard_step_applies(monkeypatch):
    import reasoning.consistent as module

    closure = Closure(range(3))
    pool = np.array([[0, 1], [1, 2], [0, 2]])
    proba = np.array([0.9, 0.8, 0.2])
    assert soft_probabilities(closure, pool, proba)[2] > 0.2  # lifted by 0 ≺ 1 ≺ 2
    monkeypatch.setattr(module, "SOFT_MAX_CONCEPTS", 2)
    assert soft_probabilities(closure, pool, proba).tolist() == proba.tolist()
    assert consistent_map(closure, pool, proba).label.tolist() == [True, True, True]
