"""The nine query strategies of Liang et al. (2018), Table 3, those beyond it, and batches.

A strategy is a small *score* function over the candidate pool pairs plus a separate
*selection* step (the best ``k`` with a seeded random tie-break), in the manner of modAL:

======== ============ ====================== ========================================
family   no reasoning ``-R``: closure labels ``-R+``: closure also scores the question
======== ============ ====================== ========================================
random   ``Random``   ``Random-R``           ``CNT``
LC       ``LC``       ``LC-R``               ``LC-R+``
QBC      ``QBC``      ``QBC-R``              ``QBC-R+``
======== ============ ====================== ========================================

* ``Random``: every candidate scores the same; the tie-break picks uniformly.
* ``LC`` (least confident): ``1 - max(p, 1 - p)`` with ``p`` the probability of *positive*.
* ``QBC`` (query by committee): the number of members that disagree with the majority.
* ``-R+`` (Eq. 4–6): ``min(F(a, b, +), F(a, b, −))``, the weight that either answer is sure to
  decide among the undecided pool pairs (:func:`reasoning.gains.candidate_gains`), with the
  weights of ``shared/design/closure.md``: CNT 1/1, LC-R+ ``1 - p``/``p``, QBC-R+ the number of
  members voting negative/positive.

Beyond the paper (:data:`NEW_STRATEGIES`):

* ``EDP`` (expected decided pairs): ``p·F(+) + (1 − p)·F(−)`` with ``F`` the *count* of the
  undecided pool pairs each answer would newly decide and ``p`` the LC model's probability of
  positive for the candidate. The paper's ``-R+`` scores what is decided whichever the
  answer (the minimum); EDP scores what is decided on average, the greedy step towards a
  complete map for the fewest questions (``sporal simulate --mode coverage``).
* ``EDP-Q``: the same expectation with ``p`` the share of the QBC committee voting positive.
* ``EDP-C``: the same expectation with the LC model's ``p`` made order-respecting first
  (:func:`reasoning.consistent.soft_probabilities`: the max-min transitive closure with the
  decided pairs, asymmetry, blended 50/50 with the raw ``p``).
* ``EDP-F``: ``p·(γ + (1 − γ)·free)·F(+) + (1 − p)·F(−)`` with ``p`` from extra trees
  (:data:`FOREST_STRATEGY_TREES`) trained on the pair's features, its reverse pair's and its
  concepts' decided shares (:func:`reasoning.model_features.forest_features`), and ``free``
  the chance that no two-step path implies the pair (:func:`path_free`): a positive pair that
  a path implies is decided for free once the path is known, so asking it first wastes the
  question. ``γ`` is :data:`PATH_FLOOR`.

:data:`DEFAULT_STRATEGY` (``default`` in :func:`parse_strategy`) is the best of them in the
coverage measure.

With ``k > 1`` the batch holds no pair that either answer to another pair of the batch would
decide (:func:`entangled`): such a question would be wasted once the other is answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.ensemble import ExtraTreesClassifier

from reasoning.classifiers import (
    COMMITTEE_SIZE,
    Committee,
    committee_votes,
    make_probabilistic,
    positive_proba,
)
from reasoning.closure import Closure
from reasoning.gains import candidate_gains
from reasoning.model_features import forest_features

__all__ = [
    "ALL_STRATEGIES",
    "DEFAULT_STRATEGY",
    "FOREST_STRATEGY_TREES",
    "MIN_TRAIN_ROWS",
    "NEW_STRATEGIES",
    "ModelOutputs",
    "STRATEGY_NAMES",
    "Scores",
    "Selection",
    "disagreement",
    "entangled",
    "expected_decided",
    "family",
    "fit_model",
    "least_confidence",
    "model_inputs",
    "model_outputs",
    "needs_model",
    "PATH_EXACT",
    "PATH_FLOOR",
    "PATH_MOST",
    "PATH_WORK",
    "parse_strategy",
    "path_free",
    "rank",
    "score_candidates",
    "scores_by_gain",
    "select",
    "select_batch",
    "uses_closure",
]

STRATEGY_NAMES = ("Random", "LC", "QBC", "Random-R", "LC-R", "QBC-R", "CNT", "LC-R+", "QBC-R+")
"""The strategies in the order of the paper's Table 3."""

NEW_STRATEGIES: tuple[str, ...] = ("EDP", "EDP-Q", "EDP-C", "EDP-F")
"""Strategies beyond the paper (see the module docstring)."""

DEFAULT_STRATEGY = "EDP-F"
"""What ``default`` stands for: the fewest questions to a complete map that we measured."""

ALL_STRATEGIES = STRATEGY_NAMES + NEW_STRATEGIES
"""Every strategy: the paper's nine, then the new ones (``--strategies all``)."""

MIN_TRAIN_ROWS = 2
"""Fewer labeled rows than this and no model is fitted (the strategy falls back to p = 0.5)."""

FOREST_STRATEGY_TREES = 50
"""Trees of the ``EDP-F`` model (extremely randomized trees: fast to fit, smooth ``p``)."""

PATH_FLOOR = 0.3
"""``γ`` of ``EDP-F``: the share of a positive answer's gain kept however likely a path is."""

PATH_EXACT = 512
"""EDP-F scores the best this many candidates exactly (above any batch's ``k``); the others
keep the score of their least possible path chance (see :func:`_path_free_of_contenders`)."""

PATH_MOST = 4096
"""The most candidates whose path chance one EDP-F scoring computes."""

PATH_WORK = 4_000_000
"""Bound on the entries :func:`path_free` reads per call; past it, the lowest-scored
candidates take the floor (see :func:`path_free`)."""

_FAMILY = {"Random": "random", "Random-R": "random", "CNT": "random",
           "LC": "lc", "LC-R": "lc", "LC-R+": "lc",
           "QBC": "qbc", "QBC-R": "qbc", "QBC-R+": "qbc",
           "EDP": "lc", "EDP-Q": "qbc", "EDP-C": "lc", "EDP-F": "forest"}
_GAINS = frozenset({"CNT", "LC-R+", "QBC-R+", "EDP", "EDP-Q", "EDP-C", "EDP-F"})
_EXPECTED = frozenset({"EDP", "EDP-Q", "EDP-C", "EDP-F"})  # counts, scored by their expectation
_PLAIN = frozenset({"Random", "LC", "QBC"})
_BY_KEY = {name.lower(): name for name in ALL_STRATEGIES}

@dataclass(frozen=True)
class Selection:
    """The chosen pool rows, best first, with their scores.

    ``gain_positive``/``gain_negative`` are the weights each answer would newly decide
    (``-R+`` strategies and CNT only, else None).
    """

    rows: np.ndarray
    scores: np.ndarray
    gain_positive: np.ndarray | None = None
    gain_negative: np.ndarray | None = None


@dataclass(frozen=True)
class Scores:
    """The score of every candidate pool row (``rows``), before selection."""

    rows: np.ndarray
    scores: np.ndarray
    gain_positive: np.ndarray | None = None
    gain_negative: np.ndarray | None = None


# ---------------------------------------------------------------------------- names
def parse_strategy(text: str) -> str:
    """The canonical name of a strategy, read leniently.

    Case does not matter; a trailing ``plus`` may stand for ``+``, and a trailing
    space stands for a ``+`` that a query string decoded into a space. ``default`` stands
    for :data:`DEFAULT_STRATEGY`, whose own name is returned.

    Examples
    --------
    >>> parse_strategy("lc-r+"), parse_strategy("QBC-Rplus"), parse_strategy("LC-R ")
    ('LC-R+', 'QBC-R+', 'LC-R+')
    >>> parse_strategy("default")
    'EDP-F'
    """
    raw = str(text)
    if raw.strip().lower() == "default":
        return DEFAULT_STRATEGY
    key = re.sub(r"\s*plus$", "+", raw.strip().lower().replace("_", "-"))
    spellings = [key + "+", key] if raw.endswith(" ") else [key]
    for spelling in spellings:
        if spelling in _BY_KEY:
            return _BY_KEY[spelling]
    raise ValueError(f"unknown strategy {text!r}; valid: {', '.join(ALL_STRATEGIES)}, "
                     f"or default ({DEFAULT_STRATEGY})")


def family(strategy: str) -> str:
    """``"random"``, ``"lc"``, ``"qbc"`` or ``"forest"``: which model (if any) scores."""
    return _FAMILY[parse_strategy(strategy)]


def uses_closure(strategy: str) -> bool:
    """True when every pair the closure decides joins the labeled set (``-R``, ``-R+``, CNT)."""
    return parse_strategy(strategy) not in _PLAIN


def needs_model(strategy: str) -> bool:
    """False for the strategies that never look at a classifier (Random, Random-R, CNT)."""
    return family(strategy) != "random"


# ---------------------------------------------------------------------------- models
def fit_model(strategy: str, X, y, *, random_state: int | None = None, estimator=None):
    """Fit the strategy's model on labeled rows, or return None when it cannot be fitted.

    Parameters
    ----------
    strategy : str
        A strategy name; LC family → probabilistic classifier, QBC family → committee,
        forest family → extra trees (on :func:`model_inputs`).
    X : array of shape (m, f)
    y : array of shape (m,)
        True (1) for positive rows.
    random_state : int, optional
    estimator : classifier, optional
        Replaces the default: the probabilistic classifier of the LC family (needs
        ``predict_proba``), or the base classifier of the QBC committee.

    Returns
    -------
    A fitted estimator, or None for the random family, with fewer than
    :data:`MIN_TRAIN_ROWS` rows, or with a single class in ``y`` (callers then use p = 0.5).
    """
    kind = family(strategy)
    y = np.asarray(y).astype(np.int64)
    if kind == "random" or len(y) < MIN_TRAIN_ROWS or len(np.unique(y)) < 2:
        return None
    X = np.asarray(X, dtype=np.float64)
    if kind == "forest":
        model = (ExtraTreesClassifier(n_estimators=FOREST_STRATEGY_TREES, n_jobs=1,
                                      random_state=random_state)
                 if estimator is None else clone(estimator))
    elif kind == "lc":
        if estimator is None:
            model = make_probabilistic(random_state)
        else:
            model = clone(estimator)
    else:
        model = Committee(estimator, n_members=COMMITTEE_SIZE, random_state=random_state)
    return model.fit(X, y)


def model_inputs(strategy: str, pool, X, values) -> np.ndarray:
    """The rows the strategy's model is fitted on and scores: ``X``, or for the forest family
    :func:`reasoning.model_features.forest_features` (``values``: the pool's decided values,
    -1 undecided)."""
    if family(strategy) != "forest":
        return np.asarray(X, dtype=np.float64)
    return forest_features(pool, X, values)


# ---------------------------------------------------------------------------- scores
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
        values = closure.values(pool[:, 0], pool[:, 1])
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
        q_cb = np.where(closure.values(c, bb) == 1, 1.0, np.asarray(u[c, bb]).ravel())
        np.add.at(logs, at, np.log1p(-np.minimum(rows.data * q_cb, 1.0 - 1e-12)))
    # c with (c, b) undecided and (a, c) decided: q(a, c) is 1 or 0 (the rest is counted above)
    cols = ut[tb]
    at = np.repeat(np.arange(len(take)), np.diff(cols.indptr))
    c, aa = cols.indices.astype(np.int64), ta[at]
    if len(c):
        q_ac = (closure.values(aa, c) == 1).astype(np.float64)
        np.add.at(logs, at, np.log1p(-np.minimum(cols.data * q_ac, 1.0 - 1e-12)))
    out = np.zeros(len(candidates))
    out[take] = np.exp(logs)
    return out


def _path_free_of_contenders(closure, pool, proba, rows, p, gp, gn, values) -> np.ndarray:
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


@dataclass(frozen=True)
class ModelOutputs:
    """What a fitted model says about every pool row, computed once per model.

    ``proba`` is ``p(positive)`` per row (LC family), ``votes`` each committee member's vote
    for positive, shape ``(members, m)`` (QBC family).
    """

    proba: np.ndarray | None = None
    votes: np.ndarray | None = None

    def __len__(self) -> int:
        if self.proba is not None:
            return len(self.proba)
        return 0 if self.votes is None else self.votes.shape[1]


def model_outputs(strategy: str, model, X) -> ModelOutputs | None:
    """The outputs of ``strategy``'s fitted ``model`` on the rows ``X`` (None: no model).

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> model = fit_model("LC", X, np.array([0, 0, 1, 1]), random_state=0)
    >>> outputs = model_outputs("LC", model, X)
    >>> bool(outputs.proba[0] < 0.5 < outputs.proba[3])
    True
    """
    if model is None:
        return None
    kind = family(strategy)
    if kind in ("lc", "forest"):
        return ModelOutputs(proba=positive_proba(model, X))
    if kind == "qbc":
        return ModelOutputs(votes=committee_votes(model, X))
    return None


def _gain_weights(strategy: str, outputs: ModelOutputs | None,
                  m: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights of each pool pair becoming positive / negative (closure.md's table)."""
    kind = family(strategy)
    if strategy in _EXPECTED:
        return np.ones(m), np.ones(m)
    if kind == "lc" and outputs is not None and outputs.proba is not None:
        p = outputs.proba
        return 1.0 - p, p
    if kind == "qbc" and outputs is not None and outputs.votes is not None:
        votes = outputs.votes
        positive = votes.sum(axis=0).astype(np.float64)
        return len(votes) - positive, positive
    # CNT, or no model yet: every pair counts the same
    return np.ones(m), np.ones(m)


def _positive_share(outputs: ModelOutputs | None, rows: np.ndarray) -> np.ndarray:
    """``p(positive)`` of the rows: the LC model's, or the share of committee votes (else 0.5)."""
    if outputs is not None and outputs.proba is not None:
        return outputs.proba[rows]
    if outputs is not None and outputs.votes is not None:
        return outputs.votes[:, rows].mean(axis=0)
    return np.full(len(rows), 0.5)


def score_candidates(strategy: str, *, closure: Closure | None, pool, X, candidates,
                     model=None, outputs: ModelOutputs | None = None) -> Scores:
    """The score of every candidate pool row under ``strategy`` (larger is better).

    Parameters
    ----------
    strategy : str
    closure : Closure or None
        Needed by the ``-R+`` strategies and CNT; the pool's indices refer to its concepts.
    pool : array of shape (m, 2)
        Pool pairs as concept indices.
    X : array of shape (m, f)
        Features of the pool pairs (for the model).
    candidates : bool array of shape (m,)
        The pool rows that may be asked. The strategies that use the closure also drop the
        rows it has decided.
    model : fitted estimator, optional
        From :func:`fit_model`; None means p = 0.5 (no committee disagreement).
    outputs : ModelOutputs, optional
        The model's outputs on every row of ``pool``, when already known
        (:func:`model_outputs`); they replace ``model``.

    Notes
    -----
    The gains weigh the undecided rows of ``pool`` only, so a caller that keeps test pairs
    out of ``pool`` keeps them out of the score.
    """
    strategy = parse_strategy(strategy)
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    X = np.asarray(X, dtype=np.float64)
    mask = np.asarray(candidates, dtype=bool).copy()
    values = None
    if closure is not None and uses_closure(strategy):
        values = closure.values(pool[:, 0], pool[:, 1])
        mask &= values < 0  # never ask what the closure knows
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return Scores(rows, np.zeros(0))
    if outputs is None:
        if family(strategy) == "forest" and model is not None:
            X = model_inputs(strategy, pool, X, values if values is not None
                             else np.full(len(pool), -1, dtype=np.int8))
        outputs = model_outputs(strategy, model, X)
    if strategy in _GAINS:
        if closure is None:
            raise ValueError(f"{strategy} needs the closure")
        wp, wn = _gain_weights(strategy, outputs, len(pool))
        gp, gn = candidate_gains(closure, pool[rows], pool, wp, wn)
        if strategy in _EXPECTED:
            if strategy == "EDP-C" and outputs is not None and outputs.proba is not None:
                from reasoning.consistent import soft_probabilities

                outputs = ModelOutputs(proba=soft_probabilities(closure, pool, outputs.proba))
            proba = None
            if strategy == "EDP-F" and outputs is not None and outputs.proba is not None:
                # a row registered after the model was trained may have no p yet (NaN)
                proba = np.nan_to_num(outputs.proba, nan=0.5)
                outputs = ModelOutputs(proba=proba)
            p = _positive_share(outputs, rows)
            if proba is not None:
                free = _path_free_of_contenders(closure, pool, proba, rows, p, gp, gn, values)
                weight = PATH_FLOOR + (1.0 - PATH_FLOOR) * free
                return Scores(rows, expected_decided(p, weight * gp, gn), gp, gn)
            return Scores(rows, expected_decided(p, gp, gn), gp, gn)
        return Scores(rows, scores_by_gain(gp, gn), gp, gn)
    kind = family(strategy)
    if kind == "lc":
        p = (np.full(len(rows), 0.5) if outputs is None or outputs.proba is None
             else outputs.proba[rows])
        return Scores(rows, least_confidence(p))
    if kind == "qbc":
        score = (np.zeros(len(rows)) if outputs is None or outputs.votes is None
                 else disagreement(outputs.votes[:, rows]).astype(float))
        return Scores(rows, score)
    return Scores(rows, np.zeros(len(rows)))


# ---------------------------------------------------------------------------- selection
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


def select(strategy: str, *, closure: Closure | None, pool, X, candidates, model=None,
           outputs: ModelOutputs | None = None, k: int = 1, random_state=None) -> Selection:
    """Choose up to ``k`` pool rows to ask, best first.

    Scores every candidate (:func:`score_candidates`), then keeps the best ones with a seeded
    random tie-break (:func:`rank`); with ``k > 1`` no chosen row is decided by either answer
    to another chosen row (:func:`select_batch`).

    Examples
    --------
    >>> c = Closure(range(3))
    >>> pool = np.array([[0, 1], [1, 2], [0, 2]])
    >>> s = select("CNT", closure=c, pool=pool, X=np.zeros((3, 1)),
    ...            candidates=np.ones(3, dtype=bool), k=2, random_state=0)
    >>> len(s.rows)
    2
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 2)
    scored = score_candidates(strategy, closure=closure, pool=pool, X=X,
                              candidates=candidates, model=model, outputs=outputs)
    picked = select_batch(closure, pool[scored.rows], scored.scores, k, random_state)
    gp = None if scored.gain_positive is None else scored.gain_positive[picked]
    gn = None if scored.gain_negative is None else scored.gain_negative[picked]
    return Selection(scored.rows[picked], scored.scores[picked], gp, gn)
