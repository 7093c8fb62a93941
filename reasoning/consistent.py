"""A predicted map that is itself a strict order: the decided labels completed consistently.

A classifier scores every pool pair on its own, so its labels (``p ≥ 0.5``) can say both
``a ≺ b`` and ``b ≺ a``, or ``a ≺ b ≺ c`` with ``(a, c)`` negative. :func:`consistent_map`
completes the closure's decided labels with the classifier in two steps:

1. **soft**: the probabilities of the undecided pool pairs are made order-respecting: the
   max-min transitive closure (``p(a, c) ≥ min(p(a, b), p(b, c))``, decided positives count 1)
   with asymmetry (``p(a, b) ≤ 1 − p(b, a)``), blended with the raw ``p``
   (:func:`soft_probabilities`);
2. **hard**: the undecided pool pairs are taken from the most confident down and each is added,
   with the label of its soft probability, to a copy of the closure unless the copy has
   decided it meanwhile; the copy's closure then decides the rest. Every label of the result
   comes from one complete, consistent closure, so the labels form a strict order that
   extends the decided pairs.

Each pool pair gets a label, a probability on the side of 0.5 that its label takes (decided
pairs 1 or 0) and a source:

* ``asserted`` / ``inferred``: decided by the labels (asserted on the pair, or by the closure);
* ``predicted``: the label is the pair's own soft prediction;
* ``forced``: consistency with the more confident predictions overrode the pair's own
  prediction; its probability is the soft one blended 50/50 with the forced 0/1 value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reasoning.closure import Closure

__all__ = ["SOFT_MAX_CONCEPTS", "SOURCES", "ConsistentMap", "consistent_map",
           "soft_probabilities"]

SOURCES = ("asserted", "inferred", "predicted", "forced")

SOFT_MAX_CONCEPTS = 1000
"""Above this many concepts the soft step (``n³``: about 1 s at 1,000 concepts on one core) is
skipped; the hard step still applies."""

_BELOW_HALF = float(np.nextafter(0.5, 0.0))


@dataclass(frozen=True)
class ConsistentMap:
    """The completed map of a pool, row by row.

    ``label`` (True: positive) and ``probability`` (on the side of 0.5 its label takes: 1 or 0
    for decided pairs) per pool row; ``source`` indexes :data:`SOURCES`.
    """

    label: np.ndarray
    probability: np.ndarray
    source: np.ndarray

    def sources(self) -> list[str]:
        """The source of every row by name."""
        return [SOURCES[s] for s in self.source.tolist()]


def soft_probabilities(closure: Closure, pool, proba, *, blend: float = 0.5) -> np.ndarray:
    """Order-respecting probabilities of the pool pairs (decided pairs 1 or 0).

    The max-min transitive closure of the matrix holding 1 on the decided positive pairs, ``p``
    on the undecided pool pairs and 0 elsewhere, then ``p(a, b) ≤ 1 − p(b, a)`` (the larger of
    the two directions keeps its value), blended as ``blend · p + (1 − blend) · closed``.

    Examples
    --------
    >>> c = Closure(range(3))
    >>> pool = np.array([[0, 1], [1, 2], [0, 2], [1, 0]])
    >>> soft_probabilities(c, pool, np.array([0.9, 0.8, 0.2, 0.7])).round(2).tolist()
    [0.9, 0.8, 0.5, 0.4]
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    proba = np.asarray(proba, dtype=np.float64)
    values = closure.values_by_index(pool[:, 0], pool[:, 1])
    out = np.where(values == 1, 1.0, np.where(values == 0, 0.0, proba))
    undecided = values < 0
    n = closure.n
    if not undecided.any() or n > SOFT_MAX_CONCEPTS:
        return out
    positive, negative = closure.matrices()
    closed = positive.astype(np.float64)
    a, b = pool[undecided, 0], pool[undecided, 1]
    closed[a, b] = proba[undecided]
    for k in range(n):
        np.maximum(closed, np.minimum(closed[:, k:k + 1], closed[k:k + 1, :]), out=closed)
    closed[positive] = 1.0
    closed[negative] = 0.0
    mirror = closed.T.copy()
    closed = np.where(closed <= mirror, np.minimum(closed, 1.0 - mirror), closed)
    out[undecided] = blend * proba[undecided] + (1.0 - blend) * closed[a, b]
    return out


def consistent_map(closure: Closure, pool, proba, *, blend: float = 0.5,
                   soft: bool = True) -> ConsistentMap:
    """Complete the closure's labels on ``pool`` with ``proba``, consistently.

    Parameters
    ----------
    closure : Closure
        The decided pairs; never changed (the completion works on a copy).
    pool : array of shape (m, 2)
        Pool pairs as concept indices of ``closure``.
    proba : array of shape (m,)
        The classifier's probability of positive for every pool row (read on undecided rows).
    blend : float
        The raw ``p``'s share in the soft probabilities.
    soft : bool
        False: the raw ``p`` orders and labels the hard completion.

    Returns
    -------
    ConsistentMap

    Examples
    --------
    >>> c = Closure(range(3))
    >>> pool = np.array([[0, 1], [1, 0], [1, 2], [0, 2]])
    >>> m = consistent_map(c, pool, np.array([0.9, 0.8, 0.7, 0.4]), soft=False)
    >>> m.label.tolist(), m.sources()
    ([True, False, True, True], ['predicted', 'forced', 'predicted', 'forced'])
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    proba = np.asarray(proba, dtype=np.float64)
    values = closure.values_by_index(pool[:, 0], pool[:, 1])
    asserted = {(closure.index(lab.a), closure.index(lab.b))
                for lab in closure.asserted_labels()}
    source = np.array([0 if (a, b) in asserted else 1 for a, b in pool.tolist()],
                      dtype=np.int8)
    score = soft_probabilities(closure, pool, proba, blend=blend) if soft else proba.copy()
    label = values == 1
    probability = np.where(values == 1, 1.0, 0.0)
    open_rows = np.flatnonzero(values < 0)
    if len(open_rows) == 0:
        return ConsistentMap(label, probability, source)
    names = closure.concepts
    completed = closure.copy()
    confidence = np.abs(score[open_rows] - 0.5)
    for row in open_rows[np.argsort(-confidence, kind="stable")].tolist():
        a, b = names[pool[row, 0]], names[pool[row, 1]]
        if completed.status(a, b).value is None:
            completed.add_label(a, b, bool(score[row] >= 0.5))
    final = completed.values_by_index(pool[open_rows, 0], pool[open_rows, 1]) == 1
    own = score[open_rows] >= 0.5
    label[open_rows] = final
    source[open_rows] = np.where(final == own, 2, 3)
    forced_p = 0.5 * score[open_rows] + 0.5 * final
    p = np.where(final == own, score[open_rows], forced_p)
    probability[open_rows] = np.where(final, np.maximum(p, 0.5), np.minimum(p, _BELOW_HALF))
    return ConsistentMap(label, probability, source)
