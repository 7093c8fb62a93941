"""Choosing the questions: score the candidates with a strategy, then keep the best ``k``.

:func:`score_candidates` prepares what a strategy's score function reads (a
:class:`~reasoning.strategies.catalogue.ScoringContext`) and calls it; :func:`select` keeps the
best ones with a seeded random tie-break (:func:`rank`); with ``k > 1`` the batch holds no pair
that either answer to another pair of the batch would decide (:func:`entangled`).
"""

from __future__ import annotations

import numpy as np

from reasoning.closure import Closure
from reasoning.strategies.catalogue import ScoringContext, Strategy
from reasoning.strategies.models import ModelOutputs, model_inputs, model_outputs
from reasoning.strategies.scores import Scores

__all__ = ["entangled", "rank", "score_candidates", "select", "select_batch"]


def score_candidates(strategy: Strategy, *, closure: Closure | None, pool, X, candidates,
                     model=None, outputs: ModelOutputs | None = None) -> Scores:
    """The score of every candidate pool row under ``strategy`` (larger is better).

    Parameters
    ----------
    strategy : Strategy
    closure : Closure or None
        Needed by the strategies that count what an answer decides; the pool's indices refer
        to its concepts.
    pool : array of shape (m, 2)
        Pool pairs as concept indices.
    X : array of shape (m, f)
        Features of the pool pairs (for the model).
    candidates : bool array of shape (m,)
        The pool rows that may be asked. The strategies that use the closure also drop the
        rows it has decided.
    model : fitted estimator, optional
        From :func:`~reasoning.strategies.models.fit_model` for ``strategy.family``; None
        means p = 0.5 (no committee disagreement).
    outputs : ModelOutputs, optional
        The model's outputs on every row of ``pool``, when already known
        (:func:`~reasoning.strategies.models.model_outputs`); they replace ``model``.

    Notes
    -----
    The gains weigh the undecided rows of ``pool`` only, so a caller that keeps test pairs
    out of ``pool`` keeps them out of the score.
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    mask = np.asarray(candidates, dtype=bool).copy()
    values = None
    if closure is not None and strategy.uses_closure:
        values = closure.values_by_index(pool[:, 0], pool[:, 1])
        mask &= values < 0  # never ask what the closure knows
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return Scores(rows, np.zeros(0))
    if outputs is None and model is not None:
        seen = values if values is not None else np.full(len(pool), -1, dtype=np.int8)
        inputs = model_inputs(strategy.family, pool, X, seen)
        outputs = model_outputs(strategy.family, model, inputs)
    return strategy.score(ScoringContext(closure, pool, rows, values, outputs))


def rank(scores: np.ndarray, random_state=None) -> np.ndarray:
    """Positions of ``scores`` best first, equal scores in a seeded random order.

    Examples
    --------
    >>> rank(np.array([0.1, 0.7, 0.3]), random_state=0).tolist()
    [1, 2, 0]
    """
    rng = np.random.default_rng(random_state)
    scores = np.asarray(scores, dtype=np.float64)
    shuffled = rng.permutation(len(scores))
    return shuffled[np.argsort(-scores[shuffled], kind="stable")]


def _reflexive(closure: Closure) -> tuple[np.ndarray, np.ndarray]:
    """``R = I + P`` and ``NI = I + N`` as dense boolean matrices."""
    positive, negative = closure.matrices()
    eye = np.eye(closure.n, dtype=bool)
    return positive | eye, negative | eye


def entangled(closure: Closure, pair, pairs, *, matrices=None) -> np.ndarray:
    """Which of ``pairs`` are decided by an answer to ``pair``, or decide it by theirs.

    With ``R = I + P`` and ``NI = I + N``: a positive ``(a, b)`` decides
    ``A*(a) × D*(b) ∪ D*(b) × NR*(a) ∪ NC*(b) × A*(a)``, a negative one ``D*(a) × A*(b)``
    (closure.md). One direction suffices: the relation is symmetric, because an answer
    ``α`` to A forcing B to ``β`` means ``A = α, B = ¬β`` is inconsistent, so the answer
    ``¬β`` to B forces A to ``¬α``.

    Parameters
    ----------
    closure : Closure
    pair : (a, b) concept indices
    pairs : array of shape (k, 2) concept indices
    matrices : (R, NI), optional
        Precomputed by the caller when it checks many pairs against the same closure.

    Returns
    -------
    bool array of shape (k,)
    """
    r, ni = _reflexive(closure) if matrices is None else matrices
    a, b = int(pair[0]), int(pair[1])
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    x, y = pairs[:, 0], pairs[:, 1]
    return _decided_by(r, ni, a, b, x, y)


def _decided_by(r, ni, a, b, x, y) -> np.ndarray:
    """Whether an answer to ``(a, b)`` decides ``(x, y)`` (elementwise over arrays)."""
    positive = (r[x, a] & r[b, y]) | (r[b, x] & ni[a, y]) | (ni[x, b] & r[y, a])
    negative = r[a, x] & r[y, b]
    return positive | negative


def select_batch(closure: Closure | None, pairs, scores, k: int, random_state=None) -> np.ndarray:
    """Positions of up to ``k`` best ``scores`` such that no two chosen pairs entangle.

    Greedy in rank order: a pair is skipped when an answer to an already chosen pair would
    decide it (and so, by symmetry, an answer to it would decide the chosen one). Without a
    closure only the ranking applies.
    """
    order = rank(scores, random_state)
    if k <= 1 or closure is None:
        return order[:max(k, 0)]
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    matrices = _reflexive(closure)
    blocked = np.zeros(len(order), dtype=bool)
    chosen: list[int] = []
    for position in order:
        if blocked[position]:
            continue
        chosen.append(int(position))
        if len(chosen) == k:
            break
        blocked |= entangled(closure, pairs[position], pairs, matrices=matrices)
    return np.array(chosen, dtype=np.int64)


def select(strategy: Strategy, *, closure: Closure | None, pool, X, candidates, model=None,
           outputs: ModelOutputs | None = None, k: int = 1, random_state=None) -> Scores:
    """Choose up to ``k`` pool rows to ask, best first, with their scores.

    Scores every candidate (:func:`score_candidates`), then keeps the best ones with a seeded
    random tie-break (:func:`rank`); with ``k > 1`` no chosen row is decided by either answer
    to another chosen row (:func:`select_batch`).

    Examples
    --------
    >>> from reasoning.strategies.catalogue import get_strategy
    >>> c = Closure(range(3))
    >>> pool = np.array([[0, 1], [1, 2], [0, 2]])
    >>> s = select(get_strategy("CNT"), closure=c, pool=pool, X=np.zeros((3, 1)),
    ...            candidates=np.ones(3, dtype=bool), k=2, random_state=0)
    >>> len(s.rows)
    2
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    scored = score_candidates(strategy, closure=closure, pool=pool, X=X,
                              candidates=candidates, model=model, outputs=outputs)
    return scored.take(select_batch(closure, pool[scored.rows], scored.scores, k, random_state))
