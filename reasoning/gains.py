"""The gain of every candidate at once: what each answer would newly decide, weighted.

For an undecided candidate ``(a, b)`` every set that a label adds is a product of two index sets
(:mod:`reasoning.closure`), so the weighted count of the pool pairs it newly decides is a
bilinear form ``Σ_{u ∈ rows(a)} Σ_{v ∈ cols(b)} W[u, v]``. With ``R = I + P`` and
``NI = I + N`` (``shared/design/closure.md``):

* negative answer: ``u ∈ D*(a)``, ``v ∈ A*(b)`` over ``Wn``;
* positive answer: ``u ∈ A*(a)``, ``v ∈ D*(b)`` over ``Wp``, plus over ``Wn`` the negatives
  ``D*(b) × NR*(a)`` and ``NC*(b) × A*(a)`` minus their overlap ``D*(b) × A*(a)``.

Each form is ``Σ_v (L @ W)[rows(k), v] · M[cols(k), v]`` where the rows of ``L`` and ``M`` are
indicator vectors of the index sets: three matrix products serve every candidate, and only the
candidate entries of the last product are evaluated. Up to :data:`DENSE_LIMIT` concepts the
weights are dense too (BLAS, ``n³``); above it they are sparse, so that the products cost
``n × |pool|`` and the candidate entries ``k × n``, not ``n³``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from reasoning.closure import Closure

__all__ = ["DENSE_LIMIT", "candidate_gains"]

DENSE_LIMIT = 600
"""Up to this many concepts the products are dense (BLAS); above it they are sparse."""


_CHUNK = 2048  # candidates per block of the candidate-entry sums (bounds the temporary memory)


def _pair_sums(left_w: np.ndarray, right: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``Σ_v left_w[ia[k], v] · right[ib[k], v]`` for every k, block by block."""
    out = np.empty(len(ia), dtype=np.float64)
    for start in range(0, len(ia), _CHUNK):
        stop = start + _CHUNK
        out[start:stop] = np.einsum("kv,kv->k", left_w[ia[start:stop]], right[ib[start:stop]])
    return out


def _weights(n: int, pool: np.ndarray, w: np.ndarray, sparse: bool, dtype):
    if sparse:
        return sp.csr_matrix((w.astype(dtype), (pool[:, 0], pool[:, 1])), shape=(n, n))
    dense = np.zeros((n, n), dtype=dtype)
    np.add.at(dense, (pool[:, 0], pool[:, 1]), w)
    return dense


def _product(left: np.ndarray, left_t: np.ndarray, weights) -> np.ndarray:
    """``left @ weights`` as a C-contiguous dense array; ``left_t`` is ``left.T``, contiguous.

    With sparse weights, scipy computes ``weights.T @ left_t`` row by row over the pool's
    entries (``n × |pool|``); its transpose is copied once so the candidate rows are contiguous.
    """
    if sp.issparse(weights):
        return np.ascontiguousarray((weights.T.tocsr() @ left_t).T)
    return left @ weights


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
    dtype = np.float32 if sparse else np.float64  # float32 halves the memory at large n
    positive, negative = closure.matrices()
    r = positive.astype(dtype)
    np.fill_diagonal(r, 1)  # row a: D*(a)
    ni = negative.astype(dtype)
    np.fill_diagonal(ni, 1)  # row a: NR*(a)
    del positive, negative
    rt, nit = np.ascontiguousarray(r.T), np.ascontiguousarray(ni.T)  # row b: A*(b) / NC*(b)
    w_pos = _weights(n, pool, wp, sparse, dtype)
    w_neg = _weights(n, pool, wn, sparse, dtype)
    a, b = candidates[:, 0], candidates[:, 1]
    r_wn = _product(r, rt, w_neg)  # row x: Σ_{u ∈ D*(x)} Wn[u, :]
    gain_negative = _pair_sums(r_wn, rt, a, b)  # D*(a) × A*(b)
    gain_positive = (
        _pair_sums(_product(rt, r, w_pos), r, a, b)  # A*(a) × D*(b), positive
        + _pair_sums(r_wn, ni, b, a)  # D*(b) × NR*(a)
        + _pair_sums(_product(nit, ni, w_neg), rt, b, a)  # NC*(b) × A*(a)
        - _pair_sums(r_wn, rt, b, a)  # their overlap D*(b) × A*(a)
    )
    return gain_positive, gain_negative
