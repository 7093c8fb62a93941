"""The pair features on tiny corpora whose every value is computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reasoning.features import (
    FEATURE_NAMES,
    LINK_FEATURE_NAMES,
    TEXT_FEATURE_NAMES,
    corpus_statistics,
    first_paragraph,
    first_sentence,
    pair_features,
)

TITLES = ["limit", "derivative", "integral", "limit of a sequence"]
TEXTS = [
    "A limit is a value. Limit laws.",  # 7 words
    "The derivative uses a limit. A derivative is a rate, not a Limit_of_a_sequence.",  # 16 words
    "",
    "Sequence limit.",  # 2
]
# out: 0 -> {}, 1 -> {0, 3}, 2 -> {1, 0}, 3 -> {0};  in: 0 <- {1, 2, 3}, 1 <- {2}, 3 <- {1}
LINKS = [(1, 0), (3, 0), (1, 3), (2, 1), (2, 0), (2, 0), (1, 1)]  # a duplicate, a self link


@pytest.fixture(scope="module")
def features() -> dict[tuple[int, int], dict[str, float]]:
    stats = corpus_statistics(TITLES, TEXTS, LINKS, n_topics=3)
    pairs = [(0, 1), (1, 0), (0, 3), (3, 1), (0, 2)]
    rows = pair_features(stats, pairs)
    return {pair: dict(zip(FEATURE_NAMES, row.tolist(), strict=True))
            for pair, row in zip(pairs, rows, strict=True)}


def test_feature_names_are_unique_and_text_then_link():
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    assert FEATURE_NAMES == TEXT_FEATURE_NAMES + LINK_FEATURE_NAMES


def test_first_sentence_and_paragraph():
    assert first_sentence("  Limits. They matter.") == "Limits."
    assert first_sentence("e.g.no end") == "e.g.no end"
    assert first_paragraph("a\nb\n \nc") == "a\nb"


def test_mentions_count_consecutive_title_words_both_ways(features):
    f = features[(0, 1)]
    assert f["mentions_of_a_in_b"] == 2  # "limit" and the "limit" of Limit_of_a_sequence
    assert f["mentions_of_b_in_a"] == 0
    assert f["mentions_of_a_in_b_normalised"] == pytest.approx(2 / 16)
    assert f["mentions_of_b_in_a_normalised"] == 0
    assert (f["words_a"], f["words_b"]) == (7, 16)
    assert features[(3, 1)]["mentions_of_a_in_b"] == 1  # the four words in a row
    assert features[(0, 3)]["mentions_of_a_in_b_normalised"] == pytest.approx(1 / 2)
    assert features[(1, 0)]["mentions_of_b_in_a"] == 2


def test_first_sentence_and_title_flags(features):
    f = features[(0, 1)]
    assert f["a_in_b_first_sentence"] == 1  # "The derivative uses a limit."
    assert f["b_in_a_first_sentence"] == 0
    assert f["a_in_b_title"] == 0
    g = features[(0, 3)]
    assert (g["a_in_b_title"], g["b_in_a_title"]) == (1, 0)
    assert g["title_jaccard"] == pytest.approx(1 / 4)
    assert f["title_jaccard"] == 0


def test_degrees_common_neighbours_and_links(features):
    f = features[(0, 1)]
    assert (f["out_degree_a"], f["out_degree_b"], f["in_degree_a"], f["in_degree_b"]) == \
        (0, 2, 3, 1)
    assert f["common_neighbours"] == 2  # 2 and 3 touch both
    assert (f["links_a_to_b"], f["links_b_to_a"]) == (0, 1)
    assert features[(1, 0)]["links_a_to_b"] == 1


def test_in_link_shares_ngd_pmi_refd(features):
    f = features[(0, 1)]  # in-links {1, 2, 3} and {2}: one shared, n = 4
    assert f["shared_in_links_share_a"] == pytest.approx(1 / 3)
    assert f["shared_in_links_share_b"] == pytest.approx(1)
    assert f["ngd"] == pytest.approx(math.log(3) / math.log(4))
    assert f["pmi"] == pytest.approx(math.log(4 / 3))
    # b's out-links {0, 3}: 3 links to a, so 1/2; a has no out-links: 0
    assert f["refd"] == pytest.approx(0.5)
    assert features[(1, 0)]["refd"] == pytest.approx(-0.5)
    g = features[(0, 2)]  # 2 has no in-link: undefined, by convention
    assert (g["ngd"], g["pmi"], g["shared_in_links_share_b"]) == (1, 0, 0)


def test_hits_and_pagerank_differences_on_one_link():
    stats = corpus_statistics(["a", "b"], ["", ""], [(0, 1)], n_topics=2)
    f = dict(zip(FEATURE_NAMES, pair_features(stats, [(0, 1)])[0].tolist(), strict=True))
    assert f["hub_difference"] == pytest.approx(1)
    assert f["authority_difference"] == pytest.approx(-1)
    # b dangles and spreads its rank evenly: p_a = 0.075 + 0.425 p_b and p_a + p_b = 1
    p_a = 0.5 / 1.425
    assert f["pagerank_difference"] == pytest.approx(p_a - (1 - p_a), abs=1e-8)


def test_tfidf_cosines_of_texts_and_first_paragraphs():
    # smooth idf: x, q in both texts: 1; y, z in one: ln(3/2) + 1
    stats = corpus_statistics(["t1", "t2"], ["x y\n\nq", "x z\n\nq"], n_topics=2)
    f = dict(zip(FEATURE_NAMES, pair_features(stats, [(0, 1)])[0].tolist(), strict=True))
    w = (math.log(3 / 2) + 1) ** 2
    assert f["first_paragraph_cosine"] == pytest.approx(1 / (1 + w))
    assert f["text_cosine"] == pytest.approx(2 / (2 + w))


def test_lda_entropies_are_bounded_and_cross_entropy_is_larger(features):
    for (a, b), f in features.items():
        for name in ("lda_entropy_a", "lda_entropy_b"):
            assert 0 <= f[name] <= math.log(3) + 1e-12
        assert f["lda_cross_entropy_ab"] >= f["lda_entropy_a"] - 1e-12, (a, b)
        assert f["lda_cross_entropy_ba"] >= f["lda_entropy_b"] - 1e-12, (a, b)


def test_same_corpus_same_features_and_symmetric_cosine():
    one = pair_features(corpus_statistics(TITLES, TEXTS, LINKS, n_topics=3), [(0, 1), (1, 0)])
    two = pair_features(corpus_statistics(TITLES, TEXTS, LINKS, n_topics=3), [(0, 1), (1, 0)])
    np.testing.assert_array_equal(one, two)
    col = FEATURE_NAMES.index("text_cosine")
    assert one[0, col] == pytest.approx(one[1, col])
    assert 0 < one[0, col] < 1


def test_no_texts_and_no_links_give_finite_neutral_features():
    stats = corpus_statistics(["a", "b", "c"], ["", "", ""], n_topics=4)
    rows = pair_features(stats, [(0, 1), (2, 0)])
    assert rows.shape == (2, len(FEATURE_NAMES))
    assert np.isfinite(rows).all()
    named = dict(zip(FEATURE_NAMES, rows[0].tolist(), strict=True))
    assert named["ngd"] == 1 and named["text_cosine"] == 0
    assert named["lda_entropy_a"] == pytest.approx(math.log(4))
    assert pair_features(stats, np.zeros((0, 2))).shape == (0, len(FEATURE_NAMES))


def test_out_of_range_pairs_and_links_are_refused():
    stats = corpus_statistics(["a", "b"], ["", ""], n_topics=2)
    with pytest.raises(ValueError, match="outside"):
        pair_features(stats, [(0, 2)])
    with pytest.raises(ValueError, match="outside"):
        corpus_statistics(["a", "b"], ["", ""], [(0, 5)])


def test_a_concept_without_text_or_link_changes_no_other_pair():
    pairs = [(0, 1), (1, 0), (0, 3), (3, 1), (0, 2)]
    before = pair_features(corpus_statistics(TITLES, TEXTS, LINKS, n_topics=3), pairs)
    after = pair_features(corpus_statistics([*TITLES, "series"], [*TEXTS, ""], LINKS,
                                            n_topics=3), pairs)
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12)


def test_both_ways_links_between_two_concepts():
    stats = corpus_statistics(["a", "b", "c"], ["", "", ""], [(0, 1), (1, 0)], n_topics=2)
    f = dict(zip(FEATURE_NAMES, pair_features(stats, [(0, 2)])[0].tolist(), strict=True))
    assert f["hub_difference"] == pytest.approx(0.5) and f["pagerank_difference"] > 0


def test_hits_agrees_with_networkx_on_a_random_graph():
    import networkx as nx

    rng = np.random.default_rng(0)
    links = {(int(u), int(v)) for u, v in rng.integers(0, 12, size=(30, 2)) if u != v}
    stats = corpus_statistics([f"c{i}" for i in range(12)], [""] * 12, sorted(links),
                              n_topics=2)
    graph = nx.DiGraph(sorted(links))
    hubs, authorities = nx.hits(graph, max_iter=10_000, tol=1e-12)
    for node in graph:
        assert stats.hub[node] == pytest.approx(hubs[node], abs=1e-6)
        assert stats.authority[node] == pytest.approx(authorities[node], abs=1e-6)
