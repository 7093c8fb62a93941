"""How right a map is: the expected number of wrong pairs among the decided pool pairs and
among the predicted rest, each with a 90% interval.

**Decided pairs.** Each asserted label is wrong with a probability ``p`` (its answers'
accuracies and the model's probability of its pair when asked, :func:`label_risk`). A pair the
closure decides is wrong when the label its confidence comes from is wrong (its own label when
asserted, else the bottleneck of its strongest proof,
:func:`reasoning.consensus.confidence.derived_confidence`). A wrong label's own pair is wrong,
and of the other pairs it carries a share ``φ``: a pair that follows from a wrong label
through right ones is often right all the same, as ``a < c`` may hold though ``a < b`` does
not; ``φ`` depends on the order's shape and is measured on the project's own overruled answers
(:func:`derived_share`). The count of wrong decided pairs is ``Σ X_ℓ (o_ℓ + B_ℓ)`` over the
labels ``ℓ``, ``o_ℓ`` 1 when its own pair is a pool pair, ``X_ℓ ~ Bernoulli(P_ℓ)`` and
``B_ℓ ~ Binomial(s_ℓ - o_ℓ, φ)`` for the ``s_ℓ`` pool pairs it carries, independent given
``P_ℓ`` and ``φ``; its distribution is computed exactly (a convolution per label, truncated far
in the tail), mixed over ``φ``'s Beta distribution, which every label shares. The ``P_ℓ`` are
the ``p_ℓ`` recalibrated (:class:`Recalibration`) on the project's own second opinions: the
team re-asks where an answer looks wrong, which biases the accuracies it estimates low and
leaves single the answers the model agreed with, so the stated ``p`` of the labels left single
overstates their errors (``docs/results/teams/quality.md``). The
recalibration's uncertainty is shared by every label: the count is mixed over it, which widens
the interval as errors that move together do.

**Predicted pairs.** An undecided pool pair taken at a label (the predicted map's; by default
positive when ``p ≥ 0.5``) is wrong with probability ``1 - p`` or ``p``, independently given a
shift ``δ ~ N(0, SHIFT_SD²)`` of every pair's log-odds of being wrong: the model learnt from the
decided pairs, which the closure and the question choice picked, not from pairs like the
undecided rest, so its probabilities there may be off as a whole. The count is a
Poisson-binomial (taken as the binomial of its mean and variance) mixed over ``δ``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import fftconvolve
from scipy.special import gammaln

from reasoning.closure import Closure, bit_positions
from reasoning.consensus.asking import AskPolicy, TeamView
from reasoning.consensus.confidence import derived_confidence
from reasoning.consensus.core import Vote

__all__ = [
    "CALIBRATE_BELOW",
    "SHARE_PRIOR",
    "SHARE_WEIGHT",
    "LEVEL",
    "PIVOT",
    "PRIOR_SD",
    "Recalibration",
    "SHIFT_SD",
    "WrongCount",
    "carried_pairs",
    "decided_wrong",
    "derived_share",
    "label_p",
    "label_risk",
    "overruled_firsts",
    "predicted_wrong",
    "rank_key",
    "weighted_wrong",
]

LEVEL = 0.90
"""The probability each interval holds."""

PIVOT = float(np.log(0.1 / 0.9))
"""The log-odds about which :class:`Recalibration` turns (a single answer's, roughly)."""

CALIBRATE_BELOW = 0.5
"""The labels several people answered that :func:`label_risk` fits on: those whose first
answer alone was wrong with a probability below this, as the labels left with one answer
are (the team asks again wherever P(wrong) × stake reaches 0.3: an answer left single is below
0.3 unless nobody was left to ask)."""

PRIOR_SD = (1.0, 0.5)
"""The prior standard deviations of :class:`Recalibration`'s shift and slope (both centred
on 0: no correction until the project's answers say otherwise)."""

SHIFT_SD = 0.8
"""The standard deviation of the shift of the predicted pairs' log-odds of being wrong
(:func:`predicted_wrong`): how far the model's probabilities on the undecided pairs may sit
from the truth as a whole (measured: ``docs/results/teams/quality.md``)."""

SHARE_PRIOR = (1.0, 1.0)
"""The Beta prior of the share of the pairs a wrong label carries beyond its own pair that are
wrong with it (:func:`derived_share`): uniform, until the project's overruled answers say."""

SHARE_WEIGHT = 0.25
"""What one overruled answer counts for in :func:`derived_share`: a quarter of an observation.
The answers a team overrules are those it re-asked (where P(wrong) × stake was high), not a
random draw of the wrong labels left, and the spread varies over a project's regions: counted
as whole observations the share is too sure of itself (on simulated teams the true count fell
in the 90% interval in 69–94% of checkpoints by domain; at a quarter, 81–100%:
``docs/results/teams/quality.md``)."""

_SHARE_EDGES = np.array([0.0, 0.01, 0.03, 0.07, 0.15, 0.35, 0.65, 0.85, 0.93, 0.97, 0.99, 1.0])
# the quantiles that cut the share's Beta distribution into the slices the count is mixed over
_LOOP_WIDTH = 8  # kernels up to this width convolve by shifted copies, wider ones by windows
_TAIL = 12.0  # standard deviations kept beyond the mean (the rest is below 1e-30)
# the shift's sixteen equally likely slices, each at its middle quantile: the interval's ends
# are quantiles of the mixture, which a few Gauss–Hermite points place poorly
_SHIFTS = np.array([NormalDist().inv_cdf((k + 0.5) / 16) for k in range(16)])
_SHIFT_WEIGHTS = np.full(16, 1 / 16)
_NODES = np.sqrt(3.0) * np.array([(0.0, 0.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0)])
_WEIGHTS = np.array([1 / 3, 1 / 6, 1 / 6, 1 / 6, 1 / 6])


@dataclass(frozen=True)
class WrongCount:
    """The expected number of wrong pairs and a :data:`LEVEL` interval of it."""

    estimate: float
    low: int
    high: int

    def as_dict(self) -> dict[str, float]:
        return {"estimate": round(self.estimate, 3), "low": self.low, "high": self.high}


def _interval(pmf: np.ndarray, mean: float, level: float) -> WrongCount:
    cdf = np.cumsum(pmf)
    cdf /= cdf[-1]
    tail = (1.0 - level) / 2.0
    low = int(np.searchsorted(cdf, tail - 1e-12))
    high = int(np.searchsorted(cdf, 1.0 - tail - 1e-12))
    return WrongCount(float(mean), low, high)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-9, 1.0 - 1e-9)
    return np.log(p / (1.0 - p))


@dataclass(frozen=True)
class Recalibration:
    """A correction of the labels' P(wrong) learnt from the project's own answers, with its
    uncertainty: ``logit P = x + a + b (x - PIVOT)``, ``x = logit p`` (the answers' and the
    model's P(wrong)), ``(a, b) ~ N(mean, cov)`` (:meth:`fit`; the default changes nothing).
    """

    mean: tuple[float, float] = (0.0, 0.0)
    cov: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0))

    @classmethod
    def fit(cls, p_first: Sequence[float] | np.ndarray,
            overruled: Sequence[bool] | np.ndarray) -> Recalibration:
        """The posterior (Laplace) of ``(a, b)`` under the prior :data:`PRIOR_SD`, from the
        labels several people answered: per label, the P(wrong) of its first answer alone
        (``p_first``) and whether the label now says otherwise (``overruled``).

        Examples
        --------
        >>> Recalibration.fit([], []).mean
        (0.0, 0.0)
        >>> Recalibration.fit([0.1] * 200, [True] * 10 + [False] * 190).mean[0] < -0.5
        True
        """
        x = _logit(np.asarray(p_first, dtype=float))
        y = np.asarray(overruled, dtype=float)
        f = np.stack([np.ones_like(x), x - PIVOT], axis=1)
        precision = np.diag(1.0 / np.square(PRIOR_SD))
        theta = np.zeros(2)
        for _ in range(50):  # Newton on the log posterior (concave: converges in a few)
            q = 1.0 / (1.0 + np.exp(-(x + f @ theta)))
            hessian = (f.T * (q * (1.0 - q))) @ f + precision
            move = np.linalg.solve(hessian, f.T @ (y - q) - precision @ theta)
            theta += move
            if np.abs(move).max() < 1e-9:
                break
        q = 1.0 / (1.0 + np.exp(-(x + f @ theta)))
        cov = np.linalg.inv((f.T * (q * (1.0 - q))) @ f + precision)
        return cls((float(theta[0]), float(theta[1])),
                   ((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))))

    def spread(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The weights of five points of ``(a, b)`` (a third-degree rule for the normal: the
        mean, and one point either side, √3 standard deviations out, along each axis of its
        covariance) and, per point, the corrected probabilities of ``p``."""
        x = _logit(p)
        root = np.linalg.cholesky(np.asarray(self.cov) + 1e-12 * np.eye(2))
        theta = np.asarray(self.mean) + _NODES @ root.T
        eta = x[None, :] + theta[:, :1] + theta[:, 1:] * (x[None, :] - PIVOT)
        return _WEIGHTS, 1.0 / (1.0 + np.exp(-eta))


def weighted_wrong(p_wrong: Sequence[float] | np.ndarray, carried: Sequence[int] | np.ndarray,
                   level: float = LEVEL, recalibration: Recalibration | None = None,
                   own: Sequence[int] | np.ndarray | None = None,
                   share: tuple[float, float] | None = None) -> WrongCount:
    """The count ``Σ X_ℓ (o_ℓ + B_ℓ)``, ``X_ℓ ~ Bernoulli(p_ℓ)`` independent given the
    ``recalibration`` of the ``p_ℓ``, ``B_ℓ ~ Binomial(s_ℓ - o_ℓ, φ)`` given the share ``φ``
    of the pairs a wrong label carries beyond its own that are wrong with it (module
    docstring), mixed over the uncertainty of both.

    Parameters
    ----------
    p_wrong : array of float
        Per label, the probability that it is wrong.
    carried : array of int
        Per label, the pairs it carries (``s_ℓ``).
    level : float
        The interval's probability.
    recalibration : Recalibration, optional
        Corrects ``p_wrong`` (default: taken as it is).
    own : array of int, optional
        Per label, 1 when its own pair is among those it carries (``o_ℓ``; default: every
        pair it carries is its own, wrong with it).
    share : (float, float), optional
        The Beta distribution of ``φ`` (default: ``φ = 1``, every pair wrong with its label).

    Examples
    --------
    >>> weighted_wrong([0.5], [10])
    WrongCount(estimate=5.0, low=0, high=10)
    >>> weighted_wrong([0.0, 0.0], [3, 4])
    WrongCount(estimate=0.0, low=0, high=0)
    >>> weighted_wrong([1.0], [11], own=[1], share=(1e6, 1e6)).estimate  # half of ten more
    6.0
    """
    p = np.asarray(p_wrong, dtype=float)
    s = np.asarray(carried, dtype=np.int64)
    o = s.copy() if own is None else np.minimum(np.asarray(own, dtype=np.int64), s)
    keep = (p > 1e-12) & (s > 0)
    p, s, o = p[keep], s[keep], o[keep]
    if not len(p):
        return WrongCount(0.0, 0, 0)
    weights, probs = (np.ones(1), p[None, :]) if recalibration is None else \
        recalibration.spread(p)
    phis, phi_weights = (np.ones(1), np.ones(1)) if share is None else _beta_points(share)
    d = s - o
    size_mean = o[None, :] + phis[:, None] * d[None, :]  # [φ, label]: a wrong label's wrong pairs
    means = probs @ size_mean.T  # [recalibration point, φ]
    second = np.square(size_mean) + d[None, :] * (phis * (1.0 - phis))[:, None]
    variances = probs @ second.T - np.square(probs) @ np.square(size_mean).T
    sd = np.sqrt(np.maximum(variances, 0.0))
    size = int(min(s.sum(), np.ceil((means + _TAIL * sd).max() + s.max()))) + 1
    alone = d == 0  # a label carrying its own pair alone needs no φ: its rows once per point
    pmf = _compound(probs[:, alone], o[alone], d[alone], np.ones(1), size)
    spread = _compound(np.repeat(probs[:, ~alone], len(phis), axis=0), o[~alone], d[~alone],
                       np.tile(phis, len(probs)), size)
    mixed = fftconvolve(np.repeat(pmf, len(phis), axis=0), spread, axes=1)[:, :size]
    return _interval(np.kron(weights, phi_weights) @ np.maximum(mixed, 0.0),
                     float(weights @ means @ phi_weights), level)


def _beta_points(share: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Slices of the Beta distribution ``share``, each at its middle quantile, finer in the
    tails (which the interval's ends come from) than in the middle: the points and weights."""
    from scipy.stats import beta

    return beta(*share).ppf((_SHARE_EDGES[1:] + _SHARE_EDGES[:-1]) / 2), np.diff(_SHARE_EDGES)


def _compound(probs: np.ndarray, own: np.ndarray, derived: np.ndarray, phi: np.ndarray,
              size: int) -> np.ndarray:
    """Per row of ``probs`` (one probability per label) and of ``phi``, the distribution of
    ``Σ X_ℓ (o_ℓ + B_ℓ)`` on ``0 .. size - 1``: one convolution per label, every row at once
    (mass beyond the kept tail is dropped; :func:`_interval` renormalises)."""
    pmf = np.zeros((len(probs), size))
    pmf[:, 0] = 1.0
    kernels: dict[tuple[int, int], np.ndarray] = {}  # the labels share few (k, room)
    for q, o, k in zip(probs.T, own.tolist(), derived.tolist(), strict=True):
        right = 1.0 - q[:, None]
        if k == 0:  # the label's own pair alone: a shift
            if o >= size:
                pmf *= right
                continue
            moved = q[:, None] * pmf[:, :size - o]
            pmf *= right
            pmf[:, o:] += moved
            continue
        if o >= size:
            pmf *= right
            continue
        if (k, size - o) not in kernels:
            kernels[k, size - o] = _kernel(phi, k, size - o)
        kernel = q[:, None] * kernels[k, size - o]  # [row, j]: j more wrong pairs
        width = kernel.shape[1]
        if width <= _LOOP_WIDTH:  # a few shifted copies
            moved = kernel[:, :1] * pmf[:, :size - o]
            for j in range(1, width):
                moved[:, j:] += kernel[:, j:j + 1] * pmf[:, :size - o - j]
        else:  # one product over sliding windows: [row, m, i] is pmf at m - width + 1 + i
            padded = np.concatenate([np.zeros((len(pmf), width - 1)), pmf[:, :size - o]], axis=1)
            moved = np.einsum("rmi,ri->rm", sliding_window_view(padded, width, axis=1),
                              kernel[:, ::-1])
        pmf *= right
        pmf[:, o:] += moved
    return pmf


def _kernel(phi: np.ndarray, k: int, room: int) -> np.ndarray:
    """Per row, the Binomial(k, φ) distribution on ``0 .. min(k, room - 1)``, cut where every
    row's remaining mass is below 1e-15 (``k`` at least 1: a label carrying no other pair is
    a shift, :func:`_compound`)."""
    j = np.arange(min(k, max(room - 1, 0)) + 1, dtype=float)
    p = np.clip(phi, 1e-12, 1.0 - 1e-12)[:, None]
    log_pmf = (gammaln(k + 1.0) - gammaln(j + 1.0) - gammaln(k - j + 1.0)
               + j * np.log(p) + (k - j) * np.log1p(-p))
    pmf = np.exp(log_pmf)
    tail = 1.0 - np.cumsum(pmf, axis=1)
    cut = int(np.argmax((tail < 1e-15).all(axis=0))) + 1 if (tail < 1e-15).all(axis=0).any() \
        else pmf.shape[1]
    return pmf[:, :cut]


def predicted_wrong(proba: Sequence[float] | np.ndarray,
                    labels: Sequence[bool] | np.ndarray | None = None,
                    level: float = LEVEL, shift_sd: float = SHIFT_SD) -> WrongCount:
    """The wrong pairs among pairs taken at ``labels`` (default: the side of 0.5 of each
    pair's ``proba``, the model's probability of positive), mixed over a shift of every
    pair's log-odds of being wrong by ``δ ~ N(0, shift_sd²)`` (module docstring).

    Examples
    --------
    >>> predicted_wrong([0.9, 0.1, 0.5, 0.5], shift_sd=0.0).estimate
    1.2
    >>> predicted_wrong([])
    WrongCount(estimate=0.0, low=0, high=0)
    """
    p = np.asarray(proba, dtype=float)
    side = p >= 0.5 if labels is None else np.asarray(labels, dtype=bool)
    known = ~np.isnan(p)
    q = np.where(side, 1.0 - p, p)[known]
    if not len(q) or q.sum() <= 0.0:
        return WrongCount(float(q.sum()), 0, 0)
    x = _logit(q)
    probs = 1.0 / (1.0 + np.exp(-(x[None, :] + shift_sd * _SHIFTS[:, None])))
    probs[:, q <= 0.0] = 0.0
    probs[:, q >= 1.0] = 1.0
    means = probs.sum(axis=1)
    variances = (probs * (1.0 - probs)).sum(axis=1)
    pmf = _SHIFT_WEIGHTS @ _binomial(means, variances, len(q))
    return _interval(pmf, float(_SHIFT_WEIGHTS @ means), level)


def _binomial(means: np.ndarray, variances: np.ndarray, n: int) -> np.ndarray:
    """Per row, the binomial distribution on ``0 .. n`` of the given mean and variance (a
    Poisson-binomial count's, which it matches closely: the predicted pairs are many and the
    mixture over the shift is far wider than either), in closed form."""
    p = np.clip(1.0 - variances / np.maximum(means, 1e-300), 1e-12, 1.0)[:, None]
    trials = np.minimum(means[:, None] / p, n)
    m = np.arange(n + 1, dtype=float)[None, :]
    inside = m <= trials
    log_pmf = (gammaln(trials + 1.0) - gammaln(m + 1.0) - gammaln(np.maximum(trials - m, 0.0) + 1.0)
               + m * np.log(p) + np.maximum(trials - m, 0.0) * np.log1p(-np.minimum(p, 1 - 1e-16)))
    pmf = np.where(inside, np.exp(log_pmf), 0.0)
    return pmf / pmf.sum(axis=1, keepdims=True)


def decided_wrong(closure: Closure, p_wrong: Mapping[Any, float],
                  pool: Sequence[tuple[Any, Any]], values: np.ndarray,
                  level: float = LEVEL, recalibration: Recalibration | None = None,
                  carried: np.ndarray | None = None,
                  share: tuple[float, float] | None = None) -> WrongCount:
    """The wrong pairs expected among the decided pairs of ``pool`` (module docstring).

    Parameters
    ----------
    closure : Closure
        The closure of the asserted labels.
    p_wrong : mapping
        Per asserted pair (as ``closure.asserted`` has it), the probability that its label is
        wrong (a missing one counts as 0).
    pool : sequence of pairs
        The pool's pairs.
    values : int array
        Per pool pair, its value in ``closure``: 1, 0, or -1 when undecided.
    level : float
        The interval's probability.
    recalibration : Recalibration, optional
        Corrects ``p_wrong`` (:func:`label_risk`).
    carried : int array, optional
        :func:`carried_pairs` of the same arguments, computed before (it depends only on the
        labels, the pool and the order of ``p_wrong``: :func:`rank_key`).
    share : (float, float), optional
        The Beta distribution of the share of the other pairs a wrong label carries that are
        wrong with it (:func:`derived_share`; default: all of them).

    Examples
    --------
    >>> c = Closure("abc")
    >>> _ = c.add_label("a", "b", True), c.add_label("b", "c", True)
    >>> pool = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "a")]
    >>> count = decided_wrong(c, {("a", "b"): 0.1, ("b", "c"): 0.2}, pool, np.array([1, 1, 1, 0]))
    >>> round(count.estimate, 6), count.low, count.high  # (b, c) carries three pairs
    (0.7, 0, 3)
    >>> count = decided_wrong(c, {("a", "b"): 0.1, ("b", "c"): 0.2}, pool, np.array([1, 1, 1, 0]),
    ...                       share=(1.0, 9.0))  # a tenth of the others wrong with their label
    >>> round(count.estimate, 2), count.low, count.high
    (0.34, 0, 2)
    """
    if not closure.asserted:
        return WrongCount(0.0, 0, 0)
    p = label_p(closure, p_wrong)
    if carried is None:
        carried = carried_pairs(closure, p, pool, values)
    in_pool = set(pool)
    own = np.fromiter((pair in in_pool for pair in closure.asserted), dtype=np.int64,
                      count=len(closure.asserted))
    return weighted_wrong(p, carried, level, recalibration, own=own, share=share)


def label_p(closure: Closure, p_wrong: Mapping[Any, float]) -> np.ndarray:
    """Per asserted label of ``closure`` (in its order), its P(wrong) in ``p_wrong`` (0 when
    missing)."""
    return np.array([float(p_wrong.get(pair, 0.0)) for pair in closure.asserted])


def rank_key(p: np.ndarray) -> bytes:
    """The order of ``p`` with its ties (a dense rank): all that the pairs each label
    carries depend on of the labels' P(wrong) (a strongest proof is a max-min path, which
    only compares confidences)."""
    return np.unique(np.asarray(p, dtype=np.float64), return_inverse=True)[1].tobytes()


def carried_pairs(closure: Closure, p: np.ndarray, pool: Sequence[tuple[Any, Any]],
                  values: np.ndarray) -> np.ndarray:
    """Per asserted label of ``closure``, the decided pool pairs whose confidence it is the
    bottleneck of (its own pair, or the weakest label of their strongest proof) when each
    label is wrong with probability ``p`` (:func:`label_p`)."""
    labels = closure.asserted
    derived = derived_confidence(closure, dict(zip(labels, (1.0 - p).tolist(), strict=True)),
                                 sources=True)
    values = np.asarray(values)
    decided = np.flatnonzero(values >= 0)
    sources = derived.sources([pool[row] for row in decided.tolist()], values[decided])
    return np.bincount(sources[sources >= 0], minlength=len(labels))


def label_risk(view: TeamView, labels: Mapping[Any, bool], policy: AskPolicy
               ) -> tuple[dict[Any, float], Recalibration]:
    """Per asserted label (``labels``), the probability that it is wrong as ``policy`` reads
    it (:meth:`~reasoning.consensus.asking.AskPolicy.p_wrong`: the accuracies of the answers
    behind it and the model's probability of its pair when asked; 0 for a label no answer
    stands behind), and the :class:`Recalibration` of those probabilities fitted on the labels
    several people answered: the P(wrong) of the first answer alone, against whether the label
    overruled it; only where the model's probability of the pair when asked is known (what
    the team chose the second opinion by: without it, as for imported answers, the fit would
    read the selection as the annotators' error).

    The team asks a second opinion where that P(wrong) times the pairs at stake is high, so
    these labels were chosen by what the first answer's P(wrong) already says, not by whether
    it was wrong: the fit applies to the labels left with one answer, and corrects the biases
    the selection puts in the annotators' estimated accuracies and the model's probabilities.
    """
    suspects = policy.suspects(view)
    first: dict[Any, list[Vote]] = {}
    p_wrong: dict[Any, float] = {}
    overruled = []
    heads = _first_answers(view, labels)
    for pair, value in labels.items():
        p_wrong[pair] = policy.p_wrong(view, pair, value, suspects) \
            if view.answers.get(pair) else 0.0
        if pair in heads and pair in view.proba:
            first[pair] = [heads[pair]]
            overruled.append(heads[pair].positive != value)
    alone = TeamView(view.result, first, view.pool, view.proba)
    p_first = np.array([policy.p_wrong(alone, pair, head[0].positive, suspects)
                        for pair, head in first.items()])
    like = p_first < CALIBRATE_BELOW
    return p_wrong, Recalibration.fit(p_first[like], np.asarray(overruled, dtype=bool)[like])


def overruled_firsts(view: TeamView, labels: Mapping[Any, bool]) -> dict[Any, bool]:
    """The labels several people answered whose first answer the label now overrules, each
    with that first answer's value: the project's own wrong answers, found by its team."""
    return {pair: head.positive for pair, head in _first_answers(view, labels).items()
            if head.positive != labels[pair]}


def _first_answers(view: TeamView, labels: Mapping[Any, bool]) -> dict[Any, Vote]:
    """The first answer of each label several people answered."""
    return {pair: min(answers, key=lambda ans: ans.order) for pair in labels
            if len(answers := view.answers.get(pair, ())) > 1}


def derived_share(closure: Closure, firsts: Mapping[Any, bool],
                  pool: Sequence[tuple[Any, Any]], values: np.ndarray) -> tuple[float, float]:
    """The Beta distribution of the share of the pairs a wrong label carries beyond its own that
    are wrong with it, from the project's own wrong answers (:func:`overruled_firsts`).

    Had an overruled first answer stood, it would have decided pool pairs through the other
    labels: ``a < b`` every ``(x, y)`` with ``x ≤ a`` and ``b ≤ y`` (and their mirrors
    negative), ``a ≮ b`` every ``(x, y)`` with ``a ≤ x`` and ``y ≤ b``. The map decides many of
    those pairs today without it: where it agrees the wrong answer would not have made the
    pair wrong (``a < c`` holds though ``a < b`` does not, when ``b < c``), where it disagrees
    it would. How often that is depends on the order's shape (a dense, nearly total order
    spreads a wrong label's error far; a sparse prerequisite map seldom), so it is measured
    on each project: the share over those pairs, one overruled answer counting for
    :data:`SHARE_WEIGHT` of an observation (the pairs of one answer go together), on
    :data:`SHARE_PRIOR`.

    Examples
    --------
    >>> c = Closure("abcd")
    >>> for x, y, v in [("a", "b", False), ("b", "c", True), ("a", "c", True), ("a", "d", True)]:
    ...     _ = c.add_label(x, y, v)
    >>> pool = [(x, y) for x in "abcd" for y in "abcd" if x != y]
    >>> values = c.values_by_index(*np.array([[c.index(x), c.index(y)] for x, y in pool]).T)
    >>> derived_share(c, {("a", "b"): True}, pool, values)  # a < c stands: nothing went wrong
    (1.0, 1.25)
    """
    alpha, beta = SHARE_PRIOR
    if not firsts:
        return alpha, beta
    down, up, _, _ = closure.reach()  # bitset rows: down[k] above k, up[k] below it

    def around(bits: int, k: int) -> np.ndarray:
        """A bitset row's members and ``k`` itself, as a boolean vector over the concepts."""
        members = np.zeros(closure.n, dtype=bool)
        members[bit_positions(bits)] = True
        members[k] = True
        return members

    index = {c: k for k, c in enumerate(closure.concepts)}
    px = np.fromiter((index[p[0]] for p in pool), dtype=np.int64, count=len(pool))
    py = np.fromiter((index[p[1]] for p in pool), dtype=np.int64, count=len(pool))
    values = np.asarray(values)
    for (a, b), claimed in firsts.items():
        i, j = index[a], index[b]
        own = (px == i) & (py == j)
        below_a, above_b = around(up[i], i), around(down[j], j)
        if claimed:  # a < b: (x, y) below a and above b positive, their mirrors negative
            said_yes = below_a[px] & above_b[py] & ~own
            said_no = below_a[py] & above_b[px]
        else:  # a ≮ b: (x, y) above a and below b, not through the label a < b the map holds
            above_a, below_b = around(down[i], i), around(up[j], j)
            said_yes = np.zeros(len(pool), dtype=bool)
            said_no = above_a[px] & ~above_b[px] & below_b[py] & ~below_a[py] & ~own
        decided = (said_yes | said_no) & (values >= 0)
        if not decided.any():
            continue
        wrong = (said_yes & (values == 0)) | (said_no & (values == 1))
        share = float(wrong[decided].mean())
        alpha, beta = alpha + SHARE_WEIGHT * share, beta + SHARE_WEIGHT * (1.0 - share)
    return alpha, beta
