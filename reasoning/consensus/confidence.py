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

from collections.abc import Hashable, Mapping
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
                 uniform: float | None = None) -> None:
        self._index = index  # concept -> row of the matrices (the labels' concepts only)
        self._closure = closure
        self._positive, self._negative = positive, negative
        self._asserted = asserted
        self._uniform = uniform  # every label alike: every decided pair has this confidence

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


def _widest(weights: np.ndarray) -> np.ndarray:
    """Per pair ``(i, j)``, the greatest over the paths from ``i`` to ``j`` of the least edge
    weight (1 on the diagonal: the empty path): max-min Floyd–Warshall."""
    best = weights.copy()
    np.fill_diagonal(best, 1.0)
    for k in np.flatnonzero(weights.any(axis=0) & weights.any(axis=1)):
        np.maximum(best, np.minimum(best[:, k, None], best[None, k, :]), out=best)
    return best


def derived_confidence(closure: Closure, asserted: Mapping[Any, float]) -> Derived:
    """The confidence of every decided pair of ``closure`` from its asserted labels'.

    Parameters
    ----------
    closure : Closure
        The closure of the asserted labels.
    asserted : mapping
        Per asserted pair (as ``closure.asserted`` has it), its label's confidence in [0, 1]
        (a missing one counts as 1).

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
    if len(levels) <= 1:  # every label alike (strict's trusted labels): nothing to compute
        empty = np.zeros((0, 0))
        return Derived(closure, index, empty, empty, weights, next(iter(levels), 1.0))
    n = len(named)
    pos_w = np.zeros((n, n))
    neg_w = np.zeros((n, n))
    for (a, b), value in labels.items():
        (pos_w if value else neg_w)[index[a], index[b]] = weights[(a, b)]
    widest = _widest(pos_w)
    # an asserted negative (u, v) with u ⪯ i and j ⪯ v makes (i, j) negative
    through = np.zeros((n, n))  # [i, v]: max over u of min(widest[u, i], neg_w[u, v])
    for u in np.flatnonzero(neg_w.any(axis=1)):
        np.maximum(through, np.minimum(widest[u, :, None], neg_w[u, None, :]), out=through)
    negative = widest.T.copy()  # j ≺ i makes (i, j) negative
    np.fill_diagonal(negative, 0.0)
    for v in np.flatnonzero(through.any(axis=0)):
        np.maximum(negative, np.minimum(through[:, v, None], widest[None, :, v]), out=negative)
    return Derived(closure, index, widest, negative, weights)
