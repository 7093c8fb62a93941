"""Choosing a pool: the pairs worth asking about, from concept texts and links.

With ``n`` concepts there are ``n (n - 1)`` ordered pairs; prerequisites are mostly among the
concepts a text is close to or a few links away. :func:`suggest_pairs` gives each concept a
budget of neighbours, taken alternately from the closest texts (TF-IDF cosine) and the closest
by links (distance 1, then 2, in either direction; ties by text similarity), and suggests both
directions of each chosen pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reasoning.features import CorpusStatistics

__all__ = ["SuggestedPairs", "suggest_pairs"]

_BLOCK = 512  # rows of the similarity matrix computed at once (bounds the memory)


@dataclass(frozen=True)
class SuggestedPairs:
    """Suggested ordered pairs (concept indices), each with its similarity and link distance.

    ``distance[i]`` is 1 or 2 (links between the two, either direction), or -1 when farther.
    """

    pairs: np.ndarray
    similarity: np.ndarray
    distance: np.ndarray


def _ranked_similar(similarity: np.ndarray, self_index: int, budget: int) -> list[int]:
    """The ``budget`` most similar others (positive similarity), most similar first."""
    row = similarity.copy()
    row[self_index] = 0.0
    top = min(budget, len(row) - 1)
    if top <= 0:
        return []
    best = np.argpartition(-row, top - 1)[:top] if top < len(row) else np.arange(len(row))
    best = best[row[best] > 0]
    return best[np.lexsort((best, -row[best]))].tolist()


def _ranked_linked(near: np.ndarray, far: np.ndarray, similarity: np.ndarray) -> list[int]:
    """Distance-1 concepts, then distance-2, each by similarity (most similar first)."""
    out: list[int] = []
    for group in (near, far):
        out.extend(group[np.lexsort((group, -similarity[group]))].tolist())
    return out


def suggest_pairs(stats: CorpusStatistics, per_concept: int) -> SuggestedPairs:
    """Suggest pool pairs: ``per_concept`` neighbours per concept, both directions of each.

    Parameters
    ----------
    stats : CorpusStatistics
        The corpus (:func:`reasoning.features.corpus_statistics`).
    per_concept : int
        Neighbours chosen per concept (at least 1), alternately the next most similar text and
        the next closest by links; fewer when a concept has fewer neighbours with a positive
        similarity or within two links.

    Returns
    -------
    SuggestedPairs
        Distinct ordered pairs in the order of their first concept, then of choice.

    Examples
    --------
    >>> from reasoning.features import corpus_statistics
    >>> stats = corpus_statistics(["a", "b", "c"], ["x y", "x z", "q"], [(2, 0)], n_topics=2)
    >>> suggest_pairs(stats, 1).pairs.tolist()
    [[0, 1], [1, 0], [2, 0], [0, 2]]
    """
    if per_concept < 1:
        raise ValueError("per_concept must be at least 1")
    n = stats.n
    vectors = stats.text_vectors
    undirected = ((stats.links + stats.links.T) > 0).astype(np.float64).tocsr()
    two_steps = (undirected @ undirected).tocsr()
    chosen: dict[tuple[int, int], tuple[float, int]] = {}
    for start in range(0, n, _BLOCK):
        block = (vectors[start: start + _BLOCK] @ vectors.T).toarray()
        for offset, similarity in enumerate(block):
            c = start + offset
            near = undirected.indices[undirected.indptr[c]: undirected.indptr[c + 1]]
            far = np.setdiff1d(two_steps.indices[two_steps.indptr[c]: two_steps.indptr[c + 1]],
                               np.append(near, c))
            distance = {int(d): 1 for d in near} | {int(d): 2 for d in far}
            text = _ranked_similar(similarity, c, per_concept)
            linked = _ranked_linked(near, far, similarity)
            picked: list[int] = []
            while len(picked) < per_concept and (text or linked):
                for source in (text, linked):
                    while source and source[0] in picked:
                        source.pop(0)
                    if source and len(picked) < per_concept:
                        picked.append(source.pop(0))
            for d in picked:
                value = (float(similarity[d]), distance.get(d, -1))
                chosen.setdefault((c, d), value)
                chosen.setdefault((d, c), value)
    pairs = np.array(list(chosen), dtype=np.int64).reshape(-1, 2)
    values = list(chosen.values())
    return SuggestedPairs(pairs, np.array([v[0] for v in values], dtype=np.float64),
                          np.array([v[1] for v in values], dtype=np.int64))
