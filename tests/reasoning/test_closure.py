"""The closure against a brute-force fixpoint of the four completeness rules."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reasoning.closure import (
    Cause,
    Closure,
    ContradictionError,
    InvalidLabelError,
    Label,
)
from reasoning.data import domain_names, load_domain
from tests.reasoning.bruteforce import fixpoint
from tests.reasoning.cases import arbitrary_labels, orders_and_labels


def _state(closure: Closure) -> tuple[set, set]:
    return set(closure.positive_pairs()), set(closure.negative_pairs())


@settings(max_examples=150, deadline=None)
@given(orders_and_labels())
def test_incremental_closure_equals_bruteforce_fixpoint(case):
    n, labels = case
    closure = Closure(range(n))
    for a, b, value in labels:
        closure.add_label(a, b, value)
    positive, negative, contradictory = fixpoint(n, labels)
    assert not contradictory
    assert _state(closure) == (positive, negative)
    assert closure.n_positive == len(positive) and closure.n_negative == len(negative)


@settings(max_examples=150, deadline=None)
@given(arbitrary_labels())
def test_contradiction_verdict_equals_bruteforce(case):
    n, labels = case
    closure = Closure(range(n))
    accepted: list[tuple[int, int, bool]] = []
    for a, b, value in labels:
        before = _state(closure)
        contradicts = fixpoint(n, [*accepted, (a, b, value)])[2]
        if contradicts:
            with pytest.raises(ContradictionError) as info:
                closure.add_label(a, b, value)
            assert _state(closure) == before, "a refused label must change nothing"
            proof = info.value.proof
            assert (proof.a, proof.b, proof.positive) == (a, b, not value)
            _assert_proof_derives(proof, set(map(tuple, accepted)), n)
        else:
            closure.add_label(a, b, value)
            accepted.append((a, b, value))
    assert _state(closure) == fixpoint(n, accepted)[:2]


def _assert_proof_derives(proof, asserted: set, n: int) -> None:
    used = {(lab.a, lab.b, lab.positive) for lab in proof.labels}
    assert used <= asserted, "a proof may use asserted labels only"
    positive, negative, _ = fixpoint(n, sorted(used))
    assert (proof.a, proof.b) in (positive if proof.positive else negative)
    for chain in proof.chains:
        for x, y in itertools.pairwise(chain):
            assert (x, y, True) in used


@settings(max_examples=100, deadline=None)
@given(orders_and_labels(), st.randoms(use_true_random=False))
def test_insertion_order_bulk_and_incremental_agree(case, rng):
    n, labels = case
    shuffled = list(labels)
    rng.shuffle(shuffled)
    first, second = Closure(range(n)), Closure(range(n))
    for a, b, value in labels:
        first.add_label(a, b, value)
    for a, b, value in shuffled:
        second.add_label(a, b, value)
    bulk = Closure.from_labels(labels, range(n))
    assert _state(first) == _state(second) == _state(bulk)
    assert bulk.asserted == {(a, b): v for a, b, v in labels}
    for x, y in itertools.permutations(range(n), 2):
        assert first.status(x, y) == bulk.status(x, y)


@settings(max_examples=100, deadline=None)
@given(orders_and_labels(), st.data())
def test_retraction_equals_rebuild_from_the_rest(case, data):
    n, labels = case
    assume(labels)  # a label to retract
    closure = Closure.from_labels(labels, range(n))
    a, b, _ = data.draw(st.sampled_from(labels))
    rest = [lab for lab in labels if (lab[0], lab[1]) != (a, b)]
    retracted = closure.retract(a, b)
    assert _state(retracted) == fixpoint(n, rest)[:2]
    assert retracted.status(a, b).asserted is False
    assert _state(closure) == fixpoint(n, labels)[:2], "retract must not change the original"


@settings(max_examples=100, deadline=None)
@given(arbitrary_labels())
def test_growth_counts_exactly_what_a_label_would_decide(case):
    n, labels = case
    closure = Closure(range(n))
    for a, b, positive in labels:
        before = len(closure)
        predicted = closure.growth(a, b, positive)
        try:
            closure.add_label(a, b, positive)
        except ContradictionError:
            assert len(closure) == before
            continue
        assert len(closure) - before == predicted


@settings(max_examples=60, deadline=None)
@given(orders_and_labels(), st.data())
def test_replay_names_the_first_label_that_decides_each_pair(case, data):
    n, labels = case
    assume(labels)  # a label to retract after the replay
    order = [Label(*lab) for lab in labels]
    closure, causes = Closure.replay(order, range(n))
    positive, negative = fixpoint(n, labels)[:2]
    assert _state(closure) == (positive, negative)
    assert set(causes) == positive | negative
    for pair, cause in causes.items():
        before = fixpoint(n, labels[:cause.caused_by])[:2]
        after = fixpoint(n, labels[:cause.caused_by + 1])[:2]
        assert pair not in before[0] | before[1], "decided before its cause"
        assert pair in (after[0] if cause.positive else after[1])
        asserted = [k for k, lab in enumerate(order) if (lab.a, lab.b) == pair]
        assert cause.asserted_by == (asserted[-1] if asserted else None)
    a, b, _ = data.draw(st.sampled_from(labels))
    rest, rest_causes = closure.retract_explained(a, b)
    remaining = [lab for lab in labels if (lab[0], lab[1]) != (a, b)]
    assert _state(rest) == fixpoint(n, remaining)[:2]
    assert rest_causes == Closure.replay([Label(*lab) for lab in remaining], range(n))[1]
    assert isinstance(next(iter(rest_causes.values()), Cause(True, 0)), Cause)


@settings(max_examples=100, deadline=None)
@given(orders_and_labels())
def test_every_proof_uses_asserted_labels_and_derives_its_pair(case):
    n, labels = case
    closure = Closure.from_labels(labels, range(n))
    asserted = set(labels)
    for x, y in itertools.permutations(range(n), 2):
        proof = closure.proof(x, y)
        value = closure.status(x, y).value
        if value is None:
            assert proof is None
            continue
        assert proof is not None and proof.positive == value
        _assert_proof_derives(proof, asserted, n)


@settings(max_examples=100, deadline=None)
@given(orders_and_labels())
def test_graph_and_bitset_index_never_disagree(case):
    n, labels = case
    closure = Closure(range(n))
    for a, b, value in labels:
        closure.add_label(a, b, value)
        reach = {(u, v) for u in closure.graph for v in nx.descendants(closure.graph, u)}
        assert reach == set(closure.positive_pairs())
    positive, negative = closure.matrices()
    assert {tuple(p) for p in np.argwhere(positive)} == set(closure.positive_pairs())
    assert {tuple(p) for p in np.argwhere(negative)} == set(closure.negative_pairs())
    lower, upper = closure.query_bounds()
    assert lower <= upper == closure.n_positive


@settings(max_examples=60, deadline=None)
@given(orders_and_labels())
def test_update_reports_exactly_the_newly_decided_pairs(case):
    n, labels = case
    closure = Closure(range(n))
    for a, b, value in labels:
        before_pos, before_neg = _state(closure)
        was_decided = closure.status(a, b).value is not None
        update = closure.add_label(a, b, value)
        after_pos, after_neg = _state(closure)
        own = {(a, b)}
        assert set(update.positive) == after_pos - before_pos - own
        assert set(update.negative) == after_neg - before_neg - own
        assert len(update.positive) == len(set(update.positive))
        assert len(update.negative) == len(set(update.negative))
        if was_decided:
            assert not update.positive and not update.negative


def test_self_pairs_and_unknown_concepts_are_invalid():
    closure = Closure(["x", "y"])
    with pytest.raises(InvalidLabelError):
        closure.add_label("x", "x", True)
    with pytest.raises(InvalidLabelError):
        closure.add_label("x", "nowhere", False)
    with pytest.raises(InvalidLabelError):
        closure.status("y", "y")


def test_reasserting_a_label_is_a_noop():
    closure = Closure("abc")
    closure.add_label("a", "b", True)
    again = closure.add_label("a", "b", True)
    assert again.recorded is False and not again.positive and not again.negative
    assert len(closure.asserted) == 1


def test_inferred_label_asserted_again_survives_retraction_of_its_premises():
    closure = Closure("abc")
    closure.add_label("a", "b", True)
    closure.add_label("b", "c", True)
    assert closure.status("a", "c").value is True and not closure.status("a", "c").asserted
    update = closure.add_label("a", "c", True)
    assert update.recorded and not update.positive and not update.negative
    assert closure.status("a", "c").asserted
    rest = closure.retract("a", "b").retract("b", "c")
    assert rest.status("a", "c") == rest.status("a", "c").__class__(True, True)
    assert rest.status("c", "a").value is False


def test_contradiction_carries_a_chain_proof():
    closure = Closure("abcd")
    closure.add_label("a", "b", True)
    closure.add_label("b", "c", True)
    closure.add_label("a", "d", False)
    with pytest.raises(ContradictionError) as info:
        closure.add_label("c", "a", True)
    proof = info.value.proof
    assert proof.positive is False and proof.chains == (("a", "b", "c"),)
    assert set(proof.labels) == {Label("a", "b", True), Label("b", "c", True)}
    with pytest.raises(ContradictionError) as info:
        closure.add_label("b", "d", True)  # a ≺ b, (a, d) negative ⇒ (b, d) negative
    assert Label("a", "d", False) in info.value.proof.labels


def test_concepts_can_be_added_after_labels():
    closure = Closure("ab")
    closure.add_label("a", "b", True)
    closure.add_concept("c")
    update = closure.add_label("b", "c", True)
    assert update.positive == [("a", "c")]
    assert closure.status("c", "a").value is False


@pytest.mark.parametrize("name", ["data_mining", "geometry", "precalculus"])
def test_real_domain_closes_without_contradiction_and_deduces_the_truth(al_cpl, name):
    assert name in domain_names(al_cpl)
    domain = load_domain(al_cpl, name)
    labels = list(zip(*zip(*domain.pairs, strict=True), domain.labels.tolist(), strict=True))
    rng = random.Random(0)
    rng.shuffle(labels)
    closure = Closure(domain.concepts)
    for a, b, value in labels:
        closure.add_label(a, b, value)
    bulk = Closure.from_labels(labels, domain.concepts)
    assert _state(bulk) == _state(closure)
    half = Closure.from_labels(labels[: len(labels) // 2], domain.concepts)
    for (a, b), value in zip(domain.pairs, domain.labels.tolist(), strict=True):
        assert closure.status(a, b).value is value
        assert half.status(a, b).value in (None, value)


def _pairs_of(update) -> tuple[set, set]:
    own = {(update.label.a, update.label.b)} if update.own_new else set()
    positive, negative = set(update.positive), set(update.negative)
    if own:
        (positive if update.label.positive else negative).update(own)
    return positive, negative


@settings(max_examples=120, deadline=None)
@given(orders_and_labels(), st.randoms(use_true_random=False))
def test_canonical_replay_decides_what_the_label_by_label_replay_decides(case, rng):
    n, labels = case
    order = [Label(*lab) for lab in labels]
    rng.shuffle(order)
    found = Closure.canonical_order(order)
    assert found is not None
    positions, n_positive = found
    assert sorted(positions) == list(range(len(order)))
    canonical = [order[k] for k in positions]
    assert all(lab.positive for lab in canonical[:sum(lab.positive for lab in canonical)])
    fast, updates = Closure.replay_effects(canonical, range(n))
    slow = Closure(range(n))
    for k, (lab, update) in enumerate(zip(canonical, updates, strict=True)):
        expected = slow.add_label(lab.a, lab.b, lab.positive)
        assert _pairs_of(update) == _pairs_of(expected)
        assert (update.recorded, update.own_new) == (expected.recorded, expected.own_new)
        assert (update.n_positive, update.n_negative) == (expected.n_positive,
                                                          expected.n_negative)
        if k in (0, len(canonical) // 2):  # a prefix is decided as the fixpoint says
            prefix = [(x.a, x.b, x.positive) for x in canonical[:k + 1]]
            decided = set().union(*(_pairs_of(u)[0] | _pairs_of(u)[1] for u in updates[:k + 1]))
            positive, negative = fixpoint(n, prefix)[:2]
            assert decided == positive | negative
    assert _state(fast) == _state(slow) == fixpoint(n, labels)[:2]
    assert n_positive == fast.n_positive
    assert (fast.n_positive, fast.n_negative) == (slow.n_positive, slow.n_negative)
    assert fast.asserted == slow.asserted
    for a in range(n):  # the column bitsets agree too (the gains read them)
        for b in range(n):
            if a != b:
                assert fast.status(a, b) == slow.status(a, b)
    assert fast.reach() == slow.reach()


def test_a_long_chain_closes_in_its_rows_not_its_pairs():
    n = 3000  # 4.5 million pairs each way: label by label, minutes; canonically, a blink
    chain = [Label(k, k + 1, True) for k in range(n - 1)]
    positions, n_positive = Closure.canonical_order(chain)
    assert positions == list(range(n - 2, -1, -1)) and n_positive == n * (n - 1) // 2
    closure, updates = Closure.replay_effects([chain[k] for k in positions], range(n))
    assert closure.n_positive == closure.n_negative == n * (n - 1) // 2
    assert all(len(u.lines[0]) == len(u.lines[1]) == 1 for u in updates)
    last = updates[-1]  # (0, 1), applied last, decides 0 ≺ everything
    assert last.label == Label(0, 1, True) and last.n_positive == n - 2
    assert closure.status(0, n - 1).value is True and closure.status(n - 1, 0).value is False


@settings(max_examples=80, deadline=None)
@given(orders_and_labels(), st.randoms(use_true_random=False))
def test_sparse_relations_follow_every_label_row_by_row(case, rng):
    n, labels = case
    closure = Closure(range(n))
    for a, b, value in labels:
        closure.add_label(a, b, value)
        if rng.random() < 0.5:  # read between labels: the cached rows must follow
            positive, negative = closure.matrices()
            assert (closure.relation(True).toarray() > 0).tolist() == positive.tolist()
            assert (closure.relation(False).toarray() > 0).tolist() == negative.tolist()
    closure.add_concept("late")
    copy = closure.copy()
    positive, negative = copy.matrices()
    assert (copy.relation(True).toarray() > 0).tolist() == positive.tolist()
    assert (closure.relation(False).toarray() > 0).tolist() == negative.tolist()
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    if pairs:
        ia, ib = np.array(pairs).T
        expected = [-1 if closure.status(a, b).value is None else int(closure.status(a, b).value)
                    for a, b in pairs]
        assert closure.values_by_index(ia, ib).tolist() == expected


def test_values_of_a_large_closure_read_the_sparse_rows():
    n = 2500  # past the dense way's 2,048 concepts
    closure = Closure(range(n))
    rng = random.Random(3)
    for k in range(0, n - 1, 7):
        closure.add_label(k, k + 1, True)
    for _ in range(40):
        a, b = rng.sample(range(n), 2)
        if closure.status(a, b).value is None:
            closure.add_label(a, b, False)
    pairs = [tuple(rng.sample(range(n), 2)) for _ in range(3000)]
    pairs += [(k, k + 1) for k in range(0, 700, 7)] + [(k + 1, k) for k in range(0, 700, 7)]
    ia, ib = np.array(pairs).T
    expected = [-1 if closure.status(a, b).value is None else int(closure.status(a, b).value)
                for a, b in pairs]
    assert closure.values_by_index(ia, ib).tolist() == expected
    assert {0, 1} <= set(expected)
