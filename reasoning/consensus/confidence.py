"""How sure a decided pair is: an asserted pair's confidence is its label's; an inferred pair's
is that of its strongest derivation, the weakest label of it.

A pair the closure decides may follow from several sets of asserted labels (its *proofs*: a
chain of positives, or a negative label with chains on either side, ``docs/closure.md``). Its
confidence is the greatest, over its proofs, of the least confidence among the proof's labels:
a bottleneck (widest-path) value, which does not depend on which proof a listing shows. It is
computed for every pair at once on dense ``n × n`` matrices (``O(n³)`` numpy, no Python loop per
pair) over the concepts that asserted labels name (only those are in decided pairs), so the
exports and ``pairs/status`` read the same numbers; when every label has the same confidence
(``strict``'s trusted labels) every decided pair has it, with nothing computed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from reasoning.closure import Closure

__all__ = ["Derived", "derived_confidence"]

Pair = tuple[Hashable, Hashable]


class Derived:
    """The confidence of every pair a closure decides (:func:`derived_confidence`)."""

    @classmethod
    def alike(cls, confidence: float) -> Derived:
        """Every label (and so every decided pair) of this confidence, no closure needed:
        :meth:`of` then answers for any pair, to be asked of decided pairs only."""
        empty = np.zeros((0, 0))
        return cls(None, {}, empty, empty, {}, confidence)

    def __init__(self, closure: Closure | None, index: Mapping[Hashable, int],
                 positive: np.ndarray,
                 negative: np.ndarray, asserted: Mapping[Any, float],
                 uniform: float | None = None, *,
                 sources: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self._index = index  # concept -> row of the matrices (the labels' concepts only)
        self._closure = closure
        self._positive, self._negative = positive, negative
        self._asserted = asserted
        self._uniform = uniform  # every label alike: every decided pair has this confidence
        self._sources = sources  # per decided pair, its bottleneck label's position

    def of(self, a: Hashable, b: Hashable) -> float | None:
        """The confidence of the decided pair ``(a, b)``; None when it is undecided."""
        if self._closure is None:
            return self._uniform
        if (a, b) in self._asserted:
            return float(self._asserted[(a, b)])
        i, j = self._index.get(a), self._index.get(b)
        if i is None or j is None:  # a concept no label names: the pair is undecided
            return None
        value = self._closure.status(a, b).value
        if value is None:
            return None
        if self._uniform is not None:
            return self._uniform
        return float(self._positive[i, j] if value else self._negative[i, j])

    def sources(self, pairs: Sequence[tuple[Hashable, Hashable]], values: np.ndarray
                ) -> np.ndarray:
        """Per pair of ``pairs`` (with its closure value in ``values``: 1, 0, or -1 when
        undecided), the position (in ``closure.asserted`` order) of the label its confidence
        comes from: its own when asserted, else its strongest proof's bottleneck; -1 when
        undecided. Needs ``derived_confidence(..., sources=True)``."""
        if self._sources is None:
            raise ValueError("derived without sources: pass sources=True")
        positions = {pair: k for k, pair in enumerate(self._asserted)}
        w_src, n_src = self._sources
        out = np.full(len(pairs), -1, dtype=np.int64)
        for row, (pair, value) in enumerate(zip(pairs, np.asarray(values).tolist(),
                                                strict=True)):
            own = positions.get(pair)
            if own is not None:
                out[row] = own
            elif value >= 0:
                i, j = self._index[pair[0]], self._index[pair[1]]
                out[row] = w_src[i, j] if value == 1 else n_src[i, j]
        return out


def _widest(weights: np.ndarray, source: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per pair ``(i, j)``, the greatest over the paths from ``i`` to ``j`` of the least edge
    weight (1 on the diagonal: the empty path): max-min Floyd–Warshall. With ``source`` (per
    edge, the position of its label; -1 where none), also the label of each path's least edge
    (its bottleneck)."""
    best = weights.copy()
    np.fill_diagonal(best, 1.0)
    src = None if source is None else source.copy()
    for k in np.flatnonzero(weights.any(axis=0) & weights.any(axis=1)):
        left, right = best[:, k, None], best[None, k, :]
        via = np.minimum(left, right)
        if src is not None:
            better = via > best
            src[better] = np.where(left < right, src[:, k, None], src[None, k, :])[better]
        np.maximum(best, via, out=best)
    return best, src


def derived_confidence(closure: Closure, asserted: Mapping[Any, float], *,
                       sources: bool = False) -> Derived:
    """The confidence of every decided pair of ``closure`` from its asserted labels'.

    Parameters
    ----------
    closure : Closure
        The closure of the asserted labels.
    asserted : mapping
        Per asserted pair (as ``closure.asserted`` has it), its label's confidence in [0, 1]
        (a missing one counts as 1).
    sources : bool
        Also find, per decided pair, the label its confidence comes from (the bottleneck of
        its strongest proof; :meth:`Derived.sources`).

    Returns
    -------
    Derived

    Examples
    --------
    >>> c = Closure("abcd")
    >>> _ = c.add_label("a", "b", True), c.add_label("b", "c", True), c.add_label("b", "d", False)
    >>> d = derived_confidence(c, {("a", "b"): 0.9, ("b", "c"): 0.7, ("b", "d"): 0.8})
    >>> d.of("a", "c"), d.of("c", "a"), d.of("c", "d"), d.of("b", "d"), d.of("a", "d")
    (0.7, 0.7, 0.7, 0.8, None)
    """
    labels = closure.asserted
    weights = {pair: float(asserted.get(pair, 1.0)) for pair in labels}
    # a decided pair's concepts are both named by asserted labels (closure.md): only those rows
    named = list(dict.fromkeys(c for pair in labels for c in pair))
    index = {c: k for k, c in enumerate(named)}
    levels = set(weights.values())
    if len(levels) <= 1 and not sources:  # every label alike (strict's trusted labels)
        empty = np.zeros((0, 0))
        return Derived(closure, index, empty, empty, weights, next(iter(levels), 1.0))
    n = len(named)
    pos_w, neg_w = np.zeros((n, n)), np.zeros((n, n))
    pos_s, neg_s = np.full((n, n), -1), np.full((n, n), -1)
    for position, ((a, b), value) in enumerate(labels.items()):
        i, j = index[a], index[b]
        (pos_w if value else neg_w)[i, j] = weights[(a, b)]
        (pos_s if value else neg_s)[i, j] = position
    widest, w_src = _widest(pos_w, pos_s if sources else None)
    negative, n_src = _negative(widest, w_src, neg_w, neg_s)
    found = None if w_src is None or n_src is None else (w_src, n_src)
    return Derived(closure, index, widest, negative, weights, sources=found)


def _negative(widest: np.ndarray, w_src: np.ndarray | None, neg_w: np.ndarray,
              neg_s: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Per pair, the confidence of its strongest negative proof (and, with ``w_src``, the
    position of that proof's bottleneck label): ``j ≺ i``, or an asserted negative ``(u, v)``
    with ``u ⪯ i`` and ``j ⪯ v``."""
    n = len(widest)
    through = np.zeros((n, n))  # [i, v]: max over u of min(widest[u, i], neg_w[u, v])
    t_src = None if w_src is None else np.full((n, n), -1)
    for u in np.flatnonzero(neg_w.any(axis=1)):
        left, right = widest[u, :, None], neg_w[u, None, :]
        via = np.minimum(left, right)
        if t_src is not None and w_src is not None:
            better = via > through
            t_src[better] = np.where(left < right, w_src[u, :, None], neg_s[u, None, :])[better]
        np.maximum(through, via, out=through)
    negative = widest.T.copy()  # j ≺ i makes (i, j) negative
    np.fill_diagonal(negative, 0.0)
    n_src = None if w_src is None else w_src.T.copy()
    for v in np.flatnonzero(through.any(axis=0)):
        left, right = through[:, v, None], widest[None, :, v]
        via = np.minimum(left, right)
        if n_src is not None and t_src is not None and w_src is not None:
            better = via > negative
            n_src[better] = np.where(left <= right, t_src[:, v, None], w_src[None, :, v])[better]
        np.maximum(negative, via, out=negative)
    return negative, n_src
