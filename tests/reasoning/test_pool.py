"""Pool suggestion: neighbours by text similarity and link distance, both directions."""

from __future__ import annotations

import numpy as np
import pytest

from reasoning.corpus import random_corpus
from reasoning.features import corpus_statistics
from reasoning.pool import suggest_pairs

# 0 and 1 share words; 2 is linked to 0; 3 is two links from 0 (0 - 2 - 3); 4 is alone
TITLES = ["a", "b", "c", "d", "e"]
TEXTS = ["x y", "x z", "q", "r", "s"]
LINKS = [(2, 0), (3, 2)]


def test_neighbours_alternate_text_and_links_within_the_budget():
    stats = corpus_statistics(TITLES, TEXTS, LINKS, n_topics=2)
    one = {tuple(p) for p in suggest_pairs(stats, 1).pairs.tolist()}
    # a: text b; b: text a; c: link a (distance 1 first); d: link c; e: nothing
    assert one == {(0, 1), (1, 0), (2, 0), (0, 2), (3, 2), (2, 3)}
    two = suggest_pairs(stats, 2)
    got = {tuple(p): (s, d) for p, s, d in zip(two.pairs.tolist(), two.similarity.tolist(),
                                                 two.distance.tolist(), strict=True)}
    # a now also takes its closest by links, c; d takes a at distance 2
    assert set(got) == one | {(3, 0), (0, 3)}
    assert got[(0, 3)][1] == 2 and got[(0, 2)][1] == 1 and got[(0, 1)][1] == -1
    assert got[(0, 1)][0] > 0 and got[(0, 2)][0] == 0


def test_every_pair_comes_with_its_reverse_and_never_a_self_pair():
    corpus = random_corpus(60, 100, words=60, random_state=4)
    stats = corpus_statistics(corpus.titles, corpus.texts, corpus.links, n_topics=3)
    pairs = suggest_pairs(stats, 3).pairs
    as_set = {tuple(p) for p in pairs.tolist()}
    assert len(as_set) == len(pairs)
    assert all((b, a) in as_set for a, b in as_set)
    assert (pairs[:, 0] != pairs[:, 1]).all()
    assert len(pairs) <= 2 * 3 * 60


def test_suggested_pairs_hold_more_prerequisites_than_random_ones():
    corpus = random_corpus(150, 100, words=100, random_state=5)
    stats = corpus_statistics(corpus.titles, corpus.texts, corpus.links, n_topics=5)
    pairs = suggest_pairs(stats, 4).pairs
    suggested = corpus.order.is_positive(pairs[:, 0], pairs[:, 1]).mean()
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 150, size=(2, 20_000))
    keep = a != b
    random_share = corpus.order.is_positive(a[keep], b[keep]).mean()
    assert suggested > 3 * random_share


def test_a_budget_below_one_is_refused():
    stats = corpus_statistics(["a", "b"], ["", ""], n_topics=2)
    with pytest.raises(ValueError):
        suggest_pairs(stats, 0)
