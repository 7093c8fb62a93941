"""The gain of every candidate at once: what each answer would newly decide, weighted.

For an undecided candidate ``(a, b)`` every set that a label adds is a product of two index sets
(:mod:`reasoning.closure`), so the weighted count of the pool pairs it newly decides is a
bilinear form ``Σ_{u ∈ rows(a)} Σ_{v ∈ cols(b)} W[u, v]``. With ``R = I + P`` and
``NI = I + N`` (``shared/design/closure.md``):

* negative answer: ``u ∈ D*(a)``, ``v ∈ A*(b)`` over ``Wn``;
* positive answer: ``u ∈ A*(a)``, ``v ∈ D*(b)`` over ``Wp``, plus over ``Wn`` the negatives
  ``D*(b) × NR*(a)`` and ``NC*(b) × A*(a)`` minus their overlap ``D*(b) × A*(a)``.

Each form is ``((L @ W)[rows] * M[cols]).sum(axis=1)`` where the rows of ``L`` and ``M`` are the
index sets: three matrix products serve every candidate. Dense matrices for a few hundred
concepts; above :data:`DENSE_LIMIT`, sparse ones, so that the cost follows the pool and the
closure, not ``n³``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from reasoning.closure import Closure

__all__ = ["DENSE_LIMIT", "candidate_gains"]

DENSE_LIMIT = 600
"""Up to this many concepts the products are dense (BLAS); above it they are sparse."""


def _pair_sums(left_w, right, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``Σ_v (left_w)[ia[k], v] · right[ib[k], v]`` for every k."""
    if sp.issparse(left_w):
        return np.asarray(left_w[ia].multiply(right[ib]).sum(axis=1)).ravel()
    return np.einsum("kv,kv->k", left_w[ia], right[ib])


def _weights(n: int, pool: np.ndarray, w: np.ndarray, sparse: bool):
    if sparse:
        return sp.csr_matrix((w, (pool[:, 0], pool[:, 1])), shape=(n, n))
    dense = np.zeros((n, n))
    np.add.at(dense, (pool[:, 0], pool[:, 1]), w)
    return dense


def candidate_gains(
    closure: Closure,
    candidates: np.ndarray,
    pool: np.ndarray,
    wp: np.ndarray,
    wn: np.ndarray,
    *,
    sparse: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted counts of the pool pairs each answer to each candidate would newly decide.

    Parameters
    ----------
    closure : Closure
        The current complete set of decided pairs.
    candidates : array of shape (k, 2)
        Undecided pairs to score, as concept indices.
    pool : array of shape (m, 2)
        The pool pairs whose decisions count, as concept indices. Decided ones weigh 0.
    wp, wn : arrays of shape (m,)
        Weight of each pool pair becoming positive / negative.
    sparse : bool, optional
        Force the sparse or the dense computation (default: by :data:`DENSE_LIMIT`).

    Returns
    -------
    gain_positive, gain_negative : arrays of shape (k,)
        The weight newly decided by a positive and by a negative answer (the candidate's own
        pair included when it is in the pool).

    Examples
    --------
    >>> c = Closure(range(3))
    >>> _ = c.add_label(0, 1, True)
    >>> pool = np.array([[1, 2], [0, 2], [2, 0]])
    >>> gp, gn = candidate_gains(c, pool, pool, np.ones(3), np.ones(3))
    >>> gp.tolist(), gn.tolist()
    ([3.0, 2.0, 3.0], [1.0, 2.0, 1.0])
    """
    n = closure.n
    candidates = np.asarray(candidates, dtype=np.int64).reshape(-1, 2)
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    if len(candidates) == 0:
        return np.zeros(0), np.zeros(0)
    undecided = closure.values(pool[:, 0], pool[:, 1]) == -1
    pool = pool[undecided]
    wp = np.asarray(wp, dtype=np.float64)[undecided]
    wn = np.asarray(wn, dtype=np.float64)[undecided]
    if sparse is None:
        sparse = n > DENSE_LIMIT
    positive, negative = closure.matrices()
    if sparse:
        eye = sp.identity(n, dtype=np.float64, format="csr")
        r = sp.csr_matrix(positive, dtype=np.float64) + eye  # row a: D*(a)
        ni = sp.csr_matrix(negative, dtype=np.float64) + eye  # row a: NR*(a)
        rt, nit = r.T.tocsr(), ni.T.tocsr()  # row b: A*(b) / NC*(b)
    else:
        eye = np.eye(n)
        r = positive + eye
        ni = negative + eye
        rt, nit = r.T.copy(), ni.T.copy()
    w_pos = _weights(n, pool, wp, sparse)
    w_neg = _weights(n, pool, wn, sparse)
    a, b = candidates[:, 0], candidates[:, 1]
    r_wn = r @ w_neg  # row x: Σ_{u ∈ D*(x)} Wn[u, :]
    gain_negative = _pair_sums(r_wn, rt, a, b)  # D*(a) × A*(b)
    gain_positive = (
        _pair_sums(rt @ w_pos, r, a, b)  # A*(a) × D*(b), positive
        + _pair_sums(r_wn, ni, b, a)  # D*(b) × NR*(a)
        + _pair_sums(nit @ w_neg, rt, b, a)  # NC*(b) × A*(a)
        - _pair_sums(r_wn, rt, b, a)  # their overlap D*(b) × A*(a)
    )
    return gain_positive, gain_negative
