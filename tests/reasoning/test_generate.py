"""The random strict orders: reproducible, strict, and with a well-formed pool."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.generate import random_order


def _truth_matrix(order) -> np.ndarray:
    n = order.n
    ia, ib = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return order.is_positive(ia, ib)


def test_same_seed_same_order_and_pool():
    first = random_order(60, 300, positive_share=0.3, random_state=7)
    second = random_order(60, 300, positive_share=0.3, random_state=7)
    other = random_order(60, 300, positive_share=0.3, random_state=8)
    assert np.array_equal(first.covers, second.covers)
    assert np.array_equal(first.reach, second.reach)
    assert np.array_equal(first.pool, second.pool)
    assert np.array_equal(first.labels, second.labels)
    assert not np.array_equal(first.pool, other.pool)
    assert first.sample_labels(random_state=3) == second.sample_labels(random_state=3)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), degree=st.sampled_from([0.5, 1.5, 3.0]),
       depth=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_truth_is_the_strict_order_generated_by_the_covers(n, degree, depth, seed):
    order = random_order(n, min(n * (n - 1), 30), degree=degree, depth=depth, random_state=seed)
    truth = _truth_matrix(order)
    assert not truth.diagonal().any(), "irreflexive"
    assert not (truth & truth.T).any(), "asymmetric"
    closed = truth.astype(np.int64) @ truth.astype(np.int64) > 0
    assert not (closed & ~truth).any(), "transitive"
    covers = nx.DiGraph(list(map(tuple, order.covers.tolist())))
    covers.add_nodes_from(range(n))
    assert nx.is_directed_acyclic_graph(covers)
    expected = {(u, v) for u in covers for v in nx.descendants(covers, u)}
    assert set(map(tuple, np.argwhere(truth).tolist())) == expected
    assert nx.transitive_reduction(covers).number_of_edges() == covers.number_of_edges()
    assert order.n_positive == len(expected)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 30), share=st.one_of(st.none(), st.floats(0, 1)),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_pool_is_distinct_pairs_without_self_pairs_labeled_by_the_truth(n, share, seed, data):
    size = data.draw(st.integers(0, n * (n - 1) // 2))
    order = random_order(n, size, positive_share=share, random_state=seed)
    pool = order.pool
    assert pool.shape == (size, 2)
    assert (pool[:, 0] != pool[:, 1]).all()
    assert ((pool >= 0) & (pool < n)).all()
    assert len({tuple(p) for p in pool.tolist()}) == size
    assert np.array_equal(order.labels, _truth_matrix(order)[pool[:, 0], pool[:, 1]])
    if share is not None:
        assert order.labels.sum() == min(round(share * size), order.n_positive)


def test_dense_pool_can_hold_every_pair():
    order = random_order(12, 12 * 11, random_state=0)
    assert len({tuple(p) for p in order.pool.tolist()}) == 12 * 11


def test_sample_labels_draws_distinct_pool_labels():
    order = random_order(30, 100, random_state=1)
    labels = order.sample_labels(40, random_state=2)
    pool = {tuple(p): bool(v) for p, v in zip(order.pool.tolist(), order.labels, strict=True)}
    assert len(labels) == len({(a, b) for a, b, _ in labels}) == 40
    assert all(pool[(a, b)] == v for a, b, v in labels)
    assert len(order.sample_labels(random_state=2)) == 100


def test_depth_bounds_the_chains():
    order = random_order(200, 10, degree=3.0, depth=3, random_state=5)
    covers = nx.DiGraph(list(map(tuple, order.covers.tolist())))
    assert nx.dag_longest_path_length(covers) <= 2


@pytest.mark.parametrize("kwargs", [{"n": 1, "pool_size": 0}, {"n": 3, "pool_size": 7},
                                    {"n": 5, "pool_size": 3, "depth": 0}])
def test_invalid_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        random_order(**kwargs)
