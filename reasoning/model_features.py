"""What the ``EDP-F`` strategy's model sees beyond a pair's own features.

A pair's features say little about its *direction* on their own; the same features of the
reverse pair, side by side, do (:func:`reverse_features`). And a concept that is already known
to come early (or late) in the order tends to stay so: :func:`label_rates` gives each pair the
decided shares of its concepts' pool pairs, leaving the pair's own label out (a decided row
must not see its own answer, or the model learns nothing that carries to undecided rows).

:func:`forest_features` puts the three side by side: ``[X, X of (b, a), has (b, a),
rates of a and b]``.

Examples
--------
>>> pool = np.array([[0, 1], [1, 0], [1, 2]])
>>> X = np.array([[1.0], [2.0], [3.0]])
>>> reverse_features(pool, X).tolist()
[[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["RATE_FEATURES", "forest_features", "label_rates", "reverse_features"]

RATE_FEATURES = 8
"""Columns of :func:`label_rates`."""


def _dense(pool) -> tuple[np.ndarray, int]:
    """The pool's concepts renumbered ``0 … n − 1`` (ids may be large and sparse), and ``n``."""
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    names, inverse = np.unique(pool, return_inverse=True)
    return inverse.reshape(pool.shape), len(names)


def reverse_features(pool, X) -> np.ndarray:
    """The features of each row's reverse pair ``(b, a)`` and 1, or zeros and 0 without one.

    ``pool`` holds the pairs as non-negative integers (concept indices or ids); a reverse pair
    counts only where it is a row of ``pool`` too.
    """
    return _reverse(*_dense(pool), X)


def _reverse(dense: np.ndarray, n: int, X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64).reshape(len(dense), -1)
    out = np.zeros((len(dense), X.shape[1] + 1))
    if not len(dense):
        return out
    keys = dense[:, 0] * n + dense[:, 1]
    order = np.argsort(keys, kind="stable")
    wanted = dense[:, 1] * n + dense[:, 0]
    at = np.minimum(np.searchsorted(keys[order], wanted), len(order) - 1)
    found = keys[order][at] == wanted
    rows = order[at[found]]
    out[found, :-1] = X[rows]
    out[found, -1] = 1.0
    return out


def label_rates(pool, values) -> np.ndarray:
    """Each row's concepts' decided pool pairs: shares positive and counts, own label left out.

    ``values`` per row: 1 positive, 0 negative, -1 undecided. Columns: the positive share of
    ``a`` as first concept, of ``b`` as second, of ``a`` as second, of ``b`` as first (each
    ``(positive + ½) / (decided + 1)``), then ``log(1 + positives)`` of the same four.
    """
    return _rates(*_dense(pool), values)


def _rates(dense: np.ndarray, n: int, values) -> np.ndarray:
    values = np.asarray(values)
    if not len(dense):
        return np.zeros((0, RATE_FEATURES))
    a, b = dense[:, 0], dense[:, 1]
    yes = (values == 1).astype(np.float64)
    no = (values == 0).astype(np.float64)

    def count(side: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return np.bincount(side, weights=weight, minlength=n)

    first_yes, first_no = count(a, yes), count(a, no)
    second_yes, second_no = count(b, yes), count(b, no)
    counts = [  # (positives, negatives), the row's own label out where it is counted
        (first_yes[a] - yes, first_no[a] - no),
        (second_yes[b] - yes, second_no[b] - no),
        (second_yes[a], second_no[a]),
        (first_yes[b], first_no[b]),
    ]
    rates = [(p + 0.5) / (p + q + 1.0) for p, q in counts]
    sizes = [np.log1p(p) for p, _ in counts]
    return np.column_stack(rates + sizes)


def forest_features(pool, X, values) -> np.ndarray:
    """``[X, reverse_features, label_rates]``: what the ``EDP-F`` model is trained on (the
    pool's concepts renumbered once for both)."""
    X = np.asarray(X, dtype=np.float64)
    dense, n = _dense(pool)
    return np.hstack([X.reshape(len(X), -1), _reverse(dense, n, X), _rates(dense, n, values)])
