"""Hypothesis strategies shared by the reasoning tests: random strict orders and their labels."""

from __future__ import annotations

import itertools
import random

import networkx as nx
from hypothesis import strategies as st

__all__ = ["arbitrary_labels", "orders_and_labels", "random_order_pairs"]


def random_order_pairs(rng: random.Random, n: int, density: float) -> set[tuple[int, int]]:
    """The positive pairs of a random strict order on ``range(n)`` (any DAG, not layered)."""
    rank = list(range(n))
    rng.shuffle(rank)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((rank[i], rank[j]) for i in range(n) for j in range(i + 1, n)
                         if rng.random() < density)
    return {(u, v) for u in graph for v in nx.descendants(graph, u)}


@st.composite
def orders_and_labels(draw, max_n: int = 9):
    """``(n, labels)``: true labels of some pairs of a random strict order, in random order."""
    n = draw(st.integers(2, max_n))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    truth = random_order_pairs(rng, n, draw(st.sampled_from([0.1, 0.3, 0.6])))
    pairs = [p for p in itertools.product(range(n), repeat=2) if p[0] != p[1]]
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=len(pairs), unique=True))
    return n, [(a, b, (a, b) in truth) for a, b in chosen]


@st.composite
def arbitrary_labels(draw, max_n: int = 7):
    """``(n, labels)`` from no particular order, so that some contradict the ones before."""
    n = draw(st.integers(2, max_n))
    pair = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
    labels = draw(st.lists(st.tuples(pair, st.booleans()), max_size=25))
    return n, [(a, b, v) for (a, b), v in labels]
