"""The generated corpus: texts and links that follow the order, reproducibly."""

from __future__ import annotations

import numpy as np

from reasoning.corpus import random_corpus
from reasoning.features import FEATURE_NAMES, corpus_statistics, pair_features


def test_same_seed_same_corpus():
    one, two = (random_corpus(40, 150, words=60, random_state=3) for _ in range(2))
    assert one.texts == two.texts and one.titles == two.titles
    np.testing.assert_array_equal(one.links, two.links)
    np.testing.assert_array_equal(one.order.pool, two.order.pool)


def test_titles_are_unique_and_links_mostly_point_to_prerequisites():
    corpus = random_corpus(60, 200, words=60, link_noise=0.2, random_state=1)
    assert len(set(corpus.titles)) == 60
    u, v = corpus.links[:, 0], corpus.links[:, 1]
    follows = corpus.order.is_positive(v, u)  # u links to its prerequisite v
    assert follows.mean() > 0.7


def test_texts_mention_prerequisites_more_than_other_concepts():
    corpus = random_corpus(80, 400, words=150, random_state=2)
    stats = corpus_statistics(corpus.titles, corpus.texts, corpus.links, n_topics=5)
    rows = pair_features(stats, corpus.order.pool)
    mentions = rows[:, FEATURE_NAMES.index("mentions_of_a_in_b")]
    truth = corpus.order.labels
    assert mentions[truth].mean() > 3 * mentions[~truth].mean()
