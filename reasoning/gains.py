"""The gain of every candidate at once: what each answer would newly decide, weighted.

For an undecided candidate ``(a, b)`` every set that a label adds is a product of two index sets
(:mod:`reasoning.closure`), so the weighted count of the pool pairs it newly decides is a
bilinear form ``Σ_{u ∈ rows(a)} Σ_{v ∈ cols(b)} W[u, v]``. With ``R = I + P`` and
``NI = I + N`` (``docs/design/closure.md``):

* negative answer: ``u ∈ D*(a)``, ``v ∈ A*(b)`` over ``Wn``, i.e. ``(R·Wn·R)[a, b]``;
* positive answer: ``u ∈ A*(a)``, ``v ∈ D*(b)`` over ``Wp``, plus over ``Wn`` the negatives
  ``D*(b) × NR*(a)`` and ``NC*(b) × A*(a)`` minus their overlap ``D*(b) × A*(a)``, i.e.
  ``(Rᵀ·Wp·Rᵀ)[a, b] + (R·Wn·NIᵀ + NIᵀ·Wn·R − R·Wn·R)[b, a]``.

Two ways to evaluate them, both without BLAS (whose threads stall on a busy machine):

* **sparse** (the default while the closure is sparse): every product is a sparse matrix
  product and only the candidate entries are read; the cost follows the pool and the closure.
* **reach**: for a dense closure of thousands of concepts, the reachability matrices are dense
  (float32) and the weights sparse: the products cost ``n × |pool|`` and the candidate entries
  ``k × n``, never ``n³``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from reasoning.closure import Closure

__all__ = ["DENSE_DENSITY", "candidate_gains"]

DENSE_DENSITY = 0.05
"""Above this share of decided pairs (and 1,000 concepts) the dense-reachability way is used."""

_SMALL_N = 1000
_CHUNK = 2048  # candidates per block of the candidate-entry sums (bounds the temporary memory)


def _reflexive(closure: Closure, positive: bool) -> sp.csr_matrix:
    """A relation of the closure with the identity added (``I + relation``), as CSR."""
    return (closure.relation(positive) + sp.identity(closure.n, format="csr")).tocsr()


def _entries(matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.asarray(matrix.tocsr()[rows, cols], dtype=np.float64).ravel()


def _sparse_gains(closure, a, b, pool, wp, wn):
    n = closure.n
    r, ni = _reflexive(closure, True), _reflexive(closure, False)
    rt, nit = r.T.tocsr(), ni.T.tocsr()
    w_pos = sp.csr_matrix((wp, (pool[:, 0], pool[:, 1])), shape=(n, n))
    w_neg = sp.csr_matrix((wn, (pool[:, 0], pool[:, 1])), shape=(n, n))
    r_wn = r @ w_neg
    r_wn_r = r_wn @ r
    gain_negative = _entries(r_wn_r, a, b)
    bracket = r_wn @ nit + nit @ w_neg @ r - r_wn_r  # read at [b, a]
    gain_positive = _entries(rt @ w_pos @ rt, a, b) + _entries(bracket, b, a)
    return gain_positive, gain_negative


def _pair_sums(left_w: np.ndarray, right: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``Σ_v left_w[ia[k], v] · right[ib[k], v]`` for every k, block by block."""
    out = np.empty(len(ia), dtype=np.float64)
    for start in range(0, len(ia), _CHUNK):
        stop = start + _CHUNK
        out[start:stop] = np.einsum("kv,kv->k", left_w[ia[start:stop]], right[ib[start:stop]])
    return out


def _product(left_t: np.ndarray, weights: sp.csr_matrix) -> np.ndarray:
    """``left @ weights`` as a C-contiguous dense array, given ``left_t = left.T`` contiguous.

    scipy computes ``weights.T @ left_t`` over the pool's entries (``n × |pool|``); its transpose
    is copied once so that the candidate rows are contiguous.
    """
    return np.ascontiguousarray((weights.T.tocsr() @ left_t).T)


def _reach_gains(closure, a, b, pool, wp, wn):
    n = closure.n
    positive, negative = closure.matrices()
    r = positive.astype(np.float32)  # float32 halves the memory of these n × n matrices
    np.fill_diagonal(r, 1)  # row a: D*(a)
    ni = negative.astype(np.float32)
    np.fill_diagonal(ni, 1)  # row a: NR*(a)
    del positive, negative
    rt = np.ascontiguousarray(r.T)  # row b: A*(b)
    w_pos = sp.csr_matrix((wp.astype(np.float32), (pool[:, 0], pool[:, 1])), shape=(n, n))
    w_neg = sp.csr_matrix((wn.astype(np.float32), (pool[:, 0], pool[:, 1])), shape=(n, n))
    r_wn = _product(rt, w_neg)  # row x: Σ_{u ∈ D*(x)} Wn[u, :]
    gain_negative = _pair_sums(r_wn, rt, a, b)  # D*(a) × A*(b)
    gain_positive = (
        _pair_sums(_product(r, w_pos), r, a, b)  # A*(a) × D*(b), positive
        + _pair_sums(r_wn, ni, b, a)  # D*(b) × NR*(a)
        + _pair_sums(_product(ni, w_neg), rt, b, a)  # NC*(b) × A*(a)
        - _pair_sums(r_wn, rt, b, a)  # their overlap D*(b) × A*(a)
    )
    return gain_positive, gain_negative


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
        Force the sparse (True) or the dense-reachability (False) evaluation; by default sparse
        up to 1,000 concepts or while at most :data:`DENSE_DENSITY` of the pairs are decided.

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
    undecided = closure.values_by_index(pool[:, 0], pool[:, 1]) == -1
    pool = pool[undecided]
    wp = np.asarray(wp, dtype=np.float64)[undecided]
    wn = np.asarray(wn, dtype=np.float64)[undecided]
    if sparse is None:
        sparse = n <= _SMALL_N or len(closure) <= DENSE_DENSITY * n * n
    way = _sparse_gains if sparse else _reach_gains
    return way(closure, candidates[:, 0], candidates[:, 1], pool, wp, wn)
