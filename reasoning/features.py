"""Pair features computed from concept texts and the links between concepts.

The features of the paper (Liang et al. 2018, Table 4) that need no outside corpus: text
features from each concept's title and text, and link features from a directed graph in which
a link ``u -> v`` says that ``u``'s text refers to ``v`` (a wiki link, a syllabus reference).
A pair ``(a, b)`` is ordered as everywhere in the project: its positive label says *a is a
prerequisite of b*. Every feature is named in :data:`FEATURE_NAMES` (the column order) and
explained in ``docs/features.md``.

The work has two steps: :func:`corpus_statistics` reads the corpus once (TF-IDF, the topic
model, the mention counts, the link matrices, HITS and PageRank), and :func:`pair_features`
reads any number of pairs from it at once (array indexing, no loop over pairs).

Words are runs of letters and digits (``_`` separates words, as in wiki titles), compared in
lower case. A title *appears* in a text where its words appear consecutively.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

__all__ = [
    "FEATURE_NAMES",
    "LINK_FEATURE_NAMES",
    "TEXT_FEATURE_NAMES",
    "CorpusStatistics",
    "corpus_statistics",
    "first_paragraph",
    "first_sentence",
    "pair_features",
    "tokens",
]

TEXT_FEATURE_NAMES: tuple[str, ...] = (
    "text_cosine",
    "first_paragraph_cosine",
    "a_in_b_first_sentence",
    "b_in_a_first_sentence",
    "a_in_b_title",
    "b_in_a_title",
    "title_jaccard",
    "mentions_of_a_in_b",
    "mentions_of_b_in_a",
    "mentions_of_a_in_b_normalised",
    "mentions_of_b_in_a_normalised",
    "words_a",
    "words_b",
    "lda_entropy_a",
    "lda_entropy_b",
    "lda_cross_entropy_ab",
    "lda_cross_entropy_ba",
)
"""The text features, in column order (see ``docs/features.md``)."""

LINK_FEATURE_NAMES: tuple[str, ...] = (
    "out_degree_a",
    "out_degree_b",
    "in_degree_a",
    "in_degree_b",
    "common_neighbours",
    "links_a_to_b",
    "links_b_to_a",
    "shared_in_links_share_a",
    "shared_in_links_share_b",
    "ngd",
    "pmi",
    "refd",
    "hub_difference",
    "authority_difference",
    "pagerank_difference",
)
"""The link features, in column order (see ``docs/features.md``)."""

FEATURE_NAMES: tuple[str, ...] = TEXT_FEATURE_NAMES + LINK_FEATURE_NAMES
"""Every feature of :func:`pair_features`, in column order."""

_WORD = re.compile(r"[^\W_]+")
_TOKEN_PATTERN = r"[^\W_]+"
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def tokens(text: str) -> list[str]:
    """The words of ``text`` in lower case.

    Examples
    --------
    >>> tokens("Decision_tree model, v2!")
    ['decision', 'tree', 'model', 'v2']
    """
    return _WORD.findall(text.lower())


def first_sentence(text: str) -> str:
    """``text`` up to its first ``.``, ``!`` or ``?`` followed by a space or the end.

    Examples
    --------
    >>> first_sentence("A limit is a value. It is approached.")
    'A limit is a value.'
    """
    text = text.strip()
    end = _SENTENCE_END.search(text)
    return text if end is None else text[: end.start() + 1]


def first_paragraph(text: str) -> str:
    """``text`` up to its first blank line (the whole text when it has none).

    Examples
    --------
    >>> first_paragraph("One.\\nStill one.\\n\\nTwo.")
    'One.\\nStill one.'
    """
    text = text.strip()
    return _BLANK_LINE.split(text, maxsplit=1)[0]


@dataclass(frozen=True, eq=False)
class CorpusStatistics:
    """What :func:`pair_features` reads: per concept (index ``i``) and per concept pair.

    Attributes
    ----------
    n : int
        Concepts.
    size : int
        Concepts *in the corpus*: those with a non-empty text or a link.
    text_vectors, paragraph_vectors : sparse matrix of shape (n, v)
        L2-normalised TF-IDF rows of the texts and of their first paragraphs.
    title_words : list of frozenset of str
    mentions_in_text, mentions_in_first_sentence, mentions_in_title : sparse (n, n)
        Entry ``[i, j]``: how often concept ``j``'s title appears in concept ``i``'s text (its
        first sentence, its title).
    words : array of shape (n,)
        Words of each text.
    topics : array of shape (n, k)
        Each text's topic distribution under the LDA fitted on the corpus (rows sum to 1).
    links : sparse (n, n)
        ``[u, v]`` is 1 if ``u`` links to ``v`` (self links dropped).
    hub, authority, pagerank : array of shape (n,)
        HITS and PageRank of the graph of the linked concepts (networkx; each sums to 1), 0
        for a concept without links.
    """

    n: int
    size: int
    text_vectors: sp.csr_matrix
    paragraph_vectors: sp.csr_matrix
    title_words: list[frozenset[str]]
    mentions_in_text: sp.csr_matrix
    mentions_in_first_sentence: sp.csr_matrix
    mentions_in_title: sp.csr_matrix
    words: np.ndarray
    topics: np.ndarray
    links: sp.csr_matrix
    hub: np.ndarray
    authority: np.ndarray
    pagerank: np.ndarray


def _tfidf(documents: list[str]) -> sp.csr_matrix:
    """TF-IDF rows fitted on the non-empty documents (an empty one is a zero row)."""
    written = [doc for doc in documents if doc.strip()]
    try:
        vectorizer = TfidfVectorizer(token_pattern=_TOKEN_PATTERN).fit(written)
    except ValueError:  # no word in any document
        return sp.csr_matrix((len(documents), 1))
    return sp.csr_matrix(vectorizer.transform(documents))


def _mentions(documents: list[list[str]], titles: list[list[str]]) -> sp.csr_matrix:
    """``[i, j]``: occurrences of title ``j``'s words, consecutive, in document ``i``."""
    by_words: dict[tuple[str, ...], list[int]] = {}
    for j, words in enumerate(titles):
        if words:
            by_words.setdefault(tuple(words), []).append(j)
    lengths_by_first: dict[str, set[int]] = {}
    for key in by_words:
        lengths_by_first.setdefault(key[0], set()).add(len(key))
    rows: list[int] = []
    cols: list[int] = []
    for i, doc in enumerate(documents):
        for start, word in enumerate(doc):
            lengths = lengths_by_first.get(word)
            if lengths is None:
                continue
            for length in lengths:
                if start + length > len(doc):
                    continue
                found = by_words.get(tuple(doc[start: start + length]))
                if found is not None:
                    rows.extend([i] * len(found))
                    cols.extend(found)
    n = len(titles)
    matrix = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(documents), n))
    matrix.sum_duplicates()
    return matrix


def _topics(texts: list[str], n_topics: int, random_state: int) -> np.ndarray:
    """Topic distributions of an LDA fitted on the non-empty texts (uniform for the others)."""
    n = len(texts)
    uniform = np.full((n, n_topics), 1.0 / n_topics)
    written = [i for i, text in enumerate(texts) if text.strip()]
    try:
        counts = CountVectorizer(token_pattern=_TOKEN_PATTERN, stop_words="english") \
            .fit_transform([texts[i] for i in written])
    except ValueError:  # no word left: every text has the same (uniform) topics
        return uniform
    lda = LatentDirichletAllocation(n_components=n_topics, learning_method="batch",
                                    max_iter=10, max_doc_update_iter=20,
                                    random_state=random_state)
    theta = lda.fit_transform(counts)
    has_words = np.asarray(counts.sum(axis=1)).ravel() > 0
    rows = np.array(written, dtype=np.int64)[has_words]
    uniform[rows] = theta[has_words] / theta[has_words].sum(axis=1, keepdims=True)
    return uniform


def _link_matrix(n: int, links: np.ndarray) -> sp.csr_matrix:
    links = np.asarray(links, dtype=np.int64).reshape(-1, 2)
    if len(links) and (links.min() < 0 or links.max() >= n):
        raise ValueError(f"a link names a concept outside 0 .. {n - 1}")
    keep = links[:, 0] != links[:, 1]
    u, v = links[keep, 0], links[keep, 1]
    matrix = sp.csr_matrix((np.ones(len(u)), (u, v)), shape=(n, n))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


def _hits(links: sp.csr_matrix, *, max_iter: int = 10_000,
          tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """HITS hubs and authorities by power iteration from a uniform start, each summing to 1.

    networkx's ``hits`` (ARPACK) answers the same on a graph with one dominant hub vector, but
    from a random start, and nonsense where the top singular value is repeated (two concepts
    linking to each other); the power iteration answers the same every time.
    """
    n = links.shape[0]
    hub = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        new = links @ (links.T @ hub)
        new /= new.max()
        done = np.abs(new - hub).sum() < n * tol
        hub = new
        if done:
            break
    authority = links.T @ hub
    return hub / hub.sum(), authority / authority.sum()


def _rankings(n: int, links: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HITS hubs, authorities and PageRank of the linked concepts (0 for the others)."""
    pagerank = np.zeros(n)
    if links.nnz == 0:
        return np.zeros(n), np.zeros(n), pagerank
    linked = np.flatnonzero(np.asarray((links + links.T).sum(axis=1)).ravel() > 0)
    hub, authority = np.zeros(n), np.zeros(n)
    hub[linked], authority[linked] = _hits(links[linked][:, linked].tocsr())
    coo = links.tocoo()
    graph = nx.DiGraph()
    graph.add_edges_from(zip(coo.row.tolist(), coo.col.tolist(), strict=True))
    for node, rank in nx.pagerank(graph, tol=1e-10).items():
        pagerank[node] = rank
    return hub, authority, pagerank


def corpus_statistics(titles: Sequence[str], texts: Sequence[str], links=(), *,
                      n_topics: int = 10, random_state: int = 0) -> CorpusStatistics:
    """Read a corpus once: the statistics every pair feature is computed from.

    Parameters
    ----------
    titles : sequence of str
        Each concept's title (its name).
    texts : sequence of str
        Each concept's text, ``""`` when it has none.
    links : array-like of shape (k, 2), optional
        Directed links ``(u, v)`` between concept indices: ``u``'s text refers to ``v``.
        Duplicates count once and self links are dropped.
    n_topics : int, default 10
        Topics of the LDA model fitted on the texts.
    random_state : int, default 0
        Seed of the LDA model: the same corpus gives the same features.

    Returns
    -------
    CorpusStatistics

    Notes
    -----
    Only the concepts with a text or a link make the corpus: TF-IDF and the topic model are
    fitted on the non-empty texts, NGD and PMI count the corpus's concepts, HITS and PageRank
    rank the linked concepts. So a concept with neither leaves every other pair's features as
    they were (a concept added to a project does not change its pool's features).

    Examples
    --------
    >>> stats = corpus_statistics(["limit", "derivative"],
    ...                           ["A limit is a value.", "The derivative is a limit."],
    ...                           [(1, 0)], n_topics=2)
    >>> stats.mentions_in_text.toarray().tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    if len(titles) != len(texts):
        raise ValueError("one text per title")
    n = len(titles)
    texts = [text or "" for text in texts]
    links_matrix = _link_matrix(n, np.asarray(links, dtype=np.int64).reshape(-1, 2))
    hub, authority, pagerank = _rankings(n, links_matrix)
    linked = np.asarray((links_matrix + links_matrix.T).sum(axis=1)).ravel() > 0
    written = np.array([bool(text.strip()) for text in texts], dtype=bool)
    return CorpusStatistics(
        n=n,
        size=int((linked | written).sum()),
        **_text_statistics(titles, texts, n_topics, random_state),
        links=links_matrix,
        hub=hub, authority=authority, pagerank=pagerank,
    )


def _text_statistics(titles: Sequence[str], texts: list[str], n_topics: int,
                     random_state: int) -> dict[str, Any]:
    """The fields of :class:`CorpusStatistics` read from the titles and texts, by name."""
    title_tokens: list[list[str]] = [tokens(title) for title in titles]
    text_tokens = [tokens(text) for text in texts]
    return {
        "text_vectors": _tfidf(texts),
        "paragraph_vectors": _tfidf([first_paragraph(text) for text in texts]),
        "title_words": [frozenset(words) for words in title_tokens],
        "mentions_in_text": _mentions(text_tokens, title_tokens),
        "mentions_in_first_sentence": _mentions(
            [tokens(first_sentence(text)) for text in texts], title_tokens),
        "mentions_in_title": _mentions(title_tokens, title_tokens),
        "words": np.array([len(words) for words in text_tokens], dtype=np.float64),
        "topics": _topics(texts, n_topics, random_state),
    }


def _entries(matrix: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    if len(rows) == 0:
        return np.zeros(0)
    return np.asarray(matrix[rows, cols], dtype=np.float64).ravel()


def _row_dots(matrix: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(a) == 0:
        return np.zeros(0)
    return np.asarray(matrix[a].multiply(matrix[b]).sum(axis=1), dtype=np.float64).ravel()


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, 0 where ``den`` is 0."""
    out = np.zeros_like(num, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _entropy(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise cross entropy ``-Σ p log q`` (natural log); the entropy when ``q`` is ``p``."""
    return -(p * np.log(np.clip(q, 1e-300, None))).sum(axis=1)


def _text_columns(stats: CorpusStatistics, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    union = np.array([len(stats.title_words[i] | stats.title_words[j])
                      for i, j in zip(a.tolist(), b.tolist(), strict=True)], dtype=np.float64)
    common = np.array([len(stats.title_words[i] & stats.title_words[j])
                       for i, j in zip(a.tolist(), b.tolist(), strict=True)], dtype=np.float64)
    a_in_b = _entries(stats.mentions_in_text, b, a)
    b_in_a = _entries(stats.mentions_in_text, a, b)
    words_a, words_b = stats.words[a], stats.words[b]
    theta_a, theta_b = stats.topics[a], stats.topics[b]
    return [
        _row_dots(stats.text_vectors, a, b),
        _row_dots(stats.paragraph_vectors, a, b),
        (_entries(stats.mentions_in_first_sentence, b, a) > 0).astype(np.float64),
        (_entries(stats.mentions_in_first_sentence, a, b) > 0).astype(np.float64),
        (_entries(stats.mentions_in_title, b, a) > 0).astype(np.float64),
        (_entries(stats.mentions_in_title, a, b) > 0).astype(np.float64),
        _ratio(common, union),
        a_in_b,
        b_in_a,
        _ratio(a_in_b, words_b),
        _ratio(b_in_a, words_a),
        words_a,
        words_b,
        _entropy(theta_a, theta_a),
        _entropy(theta_b, theta_b),
        _entropy(theta_a, theta_b),
        _entropy(theta_b, theta_a),
    ]


def _link_columns(stats: CorpusStatistics, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    links = stats.links
    out_degree = np.asarray(links.sum(axis=1), dtype=np.float64).ravel()
    in_degree = np.asarray(links.sum(axis=0), dtype=np.float64).ravel()
    undirected = ((links + links.T) > 0).astype(np.float64).tocsr()
    common = _row_dots(undirected, a, b)
    links_t = links.T.tocsr()  # row v: who links to v (v's in-links)
    shared_in = _row_dots(links_t, a, b)
    in_a, in_b = in_degree[a], in_degree[b]
    # RefD with equal weights: the share of b's out-links that link to a, minus the share of
    # a's out-links that link to b (positive when b's references lean on a).
    two_step = (links @ links).tocsr()
    refd = _ratio(_entries(two_step, b, a), out_degree[b]) - \
        _ratio(_entries(two_step, a, b), out_degree[a])
    return [
        out_degree[a], out_degree[b], in_a, in_b, common,
        _entries(links, a, b), _entries(links, b, a),
        _ratio(shared_in, in_a), _ratio(shared_in, in_b),
        _ngd(in_a, in_b, shared_in, stats.size), _pmi(in_a, in_b, shared_in, stats.size),
        refd,
        stats.hub[a] - stats.hub[b],
        stats.authority[a] - stats.authority[b],
        stats.pagerank[a] - stats.pagerank[b],
    ]


def _ngd(in_a: np.ndarray, in_b: np.ndarray, shared: np.ndarray, n: int) -> np.ndarray:
    """Normalised Google distance of the in-link sets; 1 where it is undefined."""
    out = np.ones_like(in_a, dtype=np.float64)
    big, small = np.maximum(in_a, in_b), np.minimum(in_a, in_b)
    defined = (shared > 0) & (small > 0) & (n > small)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (np.log(big) - np.log(shared)) / (np.log(n) - np.log(small))
    out[defined] = value[defined]
    return out


def _pmi(in_a: np.ndarray, in_b: np.ndarray, shared: np.ndarray, n: int) -> np.ndarray:
    """Pointwise mutual information of the in-link sets; 0 where they share none."""
    out = np.zeros_like(in_a, dtype=np.float64)
    defined = shared > 0
    out[defined] = np.log(shared[defined] * n / (in_a[defined] * in_b[defined]))
    return out


def pair_features(stats: CorpusStatistics, pairs) -> np.ndarray:
    """The features of ``pairs``, one row per pair, columns as in :data:`FEATURE_NAMES`.

    Parameters
    ----------
    stats : CorpusStatistics
        From :func:`corpus_statistics`.
    pairs : array-like of shape (m, 2)
        Concept indices ``(a, b)``.

    Returns
    -------
    array of shape (m, len(FEATURE_NAMES)), float64, every value finite

    Examples
    --------
    >>> stats = corpus_statistics(["limit", "derivative"],
    ...                           ["A limit is a value.", "The derivative is a limit."],
    ...                           [(1, 0)], n_topics=2)
    >>> row = pair_features(stats, [(0, 1)])[0]
    >>> named = dict(zip(FEATURE_NAMES, row.tolist()))
    >>> named["mentions_of_a_in_b"], named["links_b_to_a"], named["words_b"]
    (1.0, 1.0, 5.0)
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= stats.n):
        raise ValueError(f"a pair names a concept outside 0 .. {stats.n - 1}")
    a, b = pairs[:, 0], pairs[:, 1]
    columns = _text_columns(stats, a, b) + _link_columns(stats, a, b)
    return np.column_stack(columns) if len(pairs) else np.zeros((0, len(FEATURE_NAMES)))
