"""Score functions over candidate pool rows, and the scores they give.

The building blocks of the strategies (:mod:`reasoning.strategies.catalogue`): the uncertainty
of a model (:func:`least_confidence`, :func:`disagreement`), what an answer decides
(:func:`scores_by_gain`, :func:`expected_decided`) and the chance that a path implies a pair
(:func:`path_free`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from reasoning.closure import Closure

__all__ = [
    "PATH_EXACT",
    "PATH_FLOOR",
    "PATH_MOST",
    "PATH_WORK",
    "Scores",
    "disagreement",
    "expected_decided",
    "least_confidence",
    "path_free",
    "path_free_of_contenders",
    "scores_by_gain",
]

PATH_FLOOR = 0.3
"""``γ`` of ``EDP-F``: the share of a positive answer's gain kept however likely a path is."""

PATH_EXACT = 512
"""EDP-F scores the best this many candidates exactly (above any batch's ``k``); the others
keep the score of their least possible path chance (see :func:`path_free_of_contenders`)."""

PATH_MOST = 4096
"""The most candidates whose path chance one EDP-F scoring computes."""

PATH_WORK = 4_000_000
"""Bound on the entries :func:`path_free` reads per call; past it, the lowest-scored
candidates take the floor (see :func:`path_free`)."""


@dataclass(frozen=True)
class Scores:
    """Pool rows with their scores (larger is better): every candidate, or those chosen.

    ``gain_positive``/``gain_negative`` are the weights each answer would newly decide (the
    strategies that count what an answer decides, else None).
    """

    rows: np.ndarray
    scores: np.ndarray
    gain_positive: np.ndarray | None = None
    gain_negative: np.ndarray | None = None

    def take(self, positions: np.ndarray) -> Scores:
        """The rows at ``positions`` (in that order), with their scores and gains."""
        gp = None if self.gain_positive is None else self.gain_positive[positions]
        gn = None if self.gain_negative is None else self.gain_negative[positions]
        return Scores(self.rows[positions], self.scores[positions], gp, gn)


def least_confidence(p: np.ndarray) -> np.ndarray:
    """``1 - max(p, 1 - p)``: largest (0.5) where the model is least sure.

    Examples
    --------
    >>> least_confidence(np.array([0.5, 0.9, 0.2])).round(2).tolist()
    [0.5, 0.1, 0.2]
    """
    p = np.asarray(p, dtype=np.float64)
    return 1.0 - np.maximum(p, 1.0 - p)


def disagreement(votes: np.ndarray) -> np.ndarray:
    """Members disagreeing with the majority: ``min(#positive, #negative)`` per column.

    Examples
    --------
    >>> disagreement(np.array([[1, 1, 0], [1, 0, 0], [1, 1, 0]])).tolist()
    [0, 1, 0]
    """
    votes = np.asarray(votes, dtype=np.int64)
    positive = votes.sum(axis=0)
    return np.minimum(positive, len(votes) - positive)


def scores_by_gain(gain_positive: np.ndarray, gain_negative: np.ndarray) -> np.ndarray:
    """Eq. (4): the weight decided whichever the answer, ``min(F(+), F(−))``."""
    return np.minimum(gain_positive, gain_negative)


def expected_decided(p: np.ndarray, gain_positive: np.ndarray,
                     gain_negative: np.ndarray) -> np.ndarray:
    """EDP: the pairs an answer decides on average, ``p·F(+) + (1 − p)·F(−)``.

    Examples
    --------
    >>> expected_decided(np.array([0.9, 0.5]), np.array([3.0, 3.0]), np.array([1.0, 1.0]))
    array([2.8, 2. ])
    """
    p = np.asarray(p, dtype=np.float64)
    return p * gain_positive + (1.0 - p) * gain_negative


def path_free(closure: Closure, pool, proba, candidates: np.ndarray,
              order: np.ndarray | None = None, budget: int = PATH_WORK,
              values: np.ndarray | None = None) -> np.ndarray:
    """``Π_c (1 − q(a, c)·q(c, b))`` for each candidate row ``(a, b)`` of ``pool``.

    The chance that no two-step path ``a ≺ c ≺ b`` implies the pair, with ``q`` 1 on the
    closure's positive pairs, ``proba`` on the undecided pool pairs and 0 elsewhere, the
    paths taken as independent. An undecided candidate has no path of two decided positives,
    so every factor holds an undecided pool pair: the work follows the undecided pool pairs of
    ``a``'s row and ``b``'s column (plus a closure lookup each), never the closure's size. Past
    ``budget`` such entries the candidates last in ``order`` (default: as given) get 0.
    ``values`` are the closure's values of ``pool`` when the caller has them.

    Examples
    --------
    >>> c = Closure(range(3))
    >>> _ = c.add_label(0, 1, True)
    >>> pool = np.array([[0, 1], [1, 2], [0, 2]])
    >>> path_free(c, pool, np.array([1.0, 0.6, 0.9]), np.array([2])).round(2).tolist()
    [0.4]
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    candidates = np.asarray(candidates, dtype=np.int64)
    if not len(candidates):
        return np.zeros(0)
    n = closure.n
    if values is None:
        values = closure.values_by_index(pool[:, 0], pool[:, 1])
    a, b = pool[candidates, 0], pool[candidates, 1]
    # only the undecided pool pairs in a candidate's row or column are ever read
    in_row, in_col = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    in_row[a], in_col[b] = True, True
    read = np.flatnonzero((values < 0) & (in_row[pool[:, 0]] | in_col[pool[:, 1]]))
    u = sp.csr_matrix((np.asarray(proba, dtype=np.float64)[read],
                       (pool[read, 0], pool[read, 1])), shape=(n, n))
    ut = u.T.tocsr()
    cost = np.diff(u.indptr)[a] + np.diff(ut.indptr)[b]
    order = np.arange(len(candidates)) if order is None else np.asarray(order)
    within = np.cumsum(cost[order]) <= budget
    within[0] = True
    take = np.sort(order[within])
    ta, tb = a[take], b[take]
    logs = np.zeros(len(take))
    # c with (a, c) undecided: q(c, b) is 1, p(c, b) or 0
    rows = u[ta]
    at = np.repeat(np.arange(len(take)), np.diff(rows.indptr))
    c, bb = rows.indices.astype(np.int64), tb[at]
    if len(c):
        q_cb = np.where(closure.values_by_index(c, bb) == 1, 1.0, np.asarray(u[c, bb]).ravel())
        np.add.at(logs, at, np.log1p(-np.minimum(rows.data * q_cb, 1.0 - 1e-12)))
    # c with (c, b) undecided and (a, c) decided: q(a, c) is 1 or 0 (the rest is counted above)
    cols = ut[tb]
    at = np.repeat(np.arange(len(take)), np.diff(cols.indptr))
    c, aa = cols.indices.astype(np.int64), ta[at]
    if len(c):
        q_ac = (closure.values_by_index(aa, c) == 1).astype(np.float64)
        np.add.at(logs, at, np.log1p(-np.minimum(cols.data * q_ac, 1.0 - 1e-12)))
    out = np.zeros(len(candidates))
    out[take] = np.exp(logs)
    return out


def path_free_of_contenders(closure, pool, proba, rows, p, gp, gn, values) -> np.ndarray:
    """:func:`path_free` of the candidates that can rank among the best :data:`PATH_EXACT`.

    EDP-F's score lies between its value with ``free = 0`` and with ``free = 1``; a candidate
    whose upper bound is below the ``PATH_EXACT``-th best lower bound cannot reach that rank,
    so it keeps ``free = 0`` (its lower bound) and its path chance is never computed. The
    first ``PATH_EXACT`` of the ranking are exact while at most :data:`PATH_MOST` candidates
    contend (always in the shared domains' pools); past that, the ``PATH_MOST`` with the
    highest upper bounds are scored exactly and the rest keep their lower bound.
    """
    upper = expected_decided(p, gp, gn)
    lower = expected_decided(p, PATH_FLOOR * gp, gn)
    keep = min(len(rows), PATH_EXACT)
    threshold = np.partition(lower, len(lower) - keep)[len(lower) - keep]
    contenders = np.flatnonzero(upper >= threshold)
    if len(contenders) > PATH_MOST:  # flat scores of a huge pool: the highest upper bounds
        contenders = contenders[np.argpartition(-upper[contenders], PATH_MOST)[:PATH_MOST]]
    free = np.zeros(len(rows))
    order = np.argsort(-upper[contenders], kind="stable")
    free[contenders] = path_free(closure, pool, proba, rows[contenders], order, values=values)
    return free
