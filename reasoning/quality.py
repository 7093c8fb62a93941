"""How right a map is: the expected number of wrong pairs among the decided pool pairs and
among the predicted rest, each with a 90% interval.

**Decided pairs.** Each asserted label is wrong with a probability ``p`` (its answers'
accuracies and the model's probability of its pair when asked, :func:`label_risk`). A pair the
closure decides is wrong when the label its confidence comes from is wrong (its own label when
asserted, else the bottleneck of its strongest proof,
:func:`reasoning.consensus.confidence.derived_confidence`): so one wrong label makes every pair
it carries wrong at once. The count of wrong decided pairs is ``Σ X_ℓ s_ℓ`` over the labels
``ℓ``, ``s_ℓ`` the pool pairs it carries and ``X_ℓ ~ Bernoulli(P_ℓ)``, independent given
``P_ℓ``; its distribution is computed exactly (a convolution per label, truncated far in the
tail). The ``P_ℓ`` are the ``p_ℓ`` recalibrated (:class:`Recalibration`) on the project's own
second opinions: the team re-asks where an answer looks wrong, which biases the accuracies it
estimates low and leaves single the answers the model agreed with, so the stated ``p`` of the
labels left single overstates their errors (``docs/results/teams/quality.md``). The
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
from scipy.special import gammaln

from reasoning.closure import Closure
from reasoning.consensus.asking import AskPolicy, TeamView
from reasoning.consensus.confidence import derived_confidence
from reasoning.consensus.core import Vote

__all__ = [
    "CALIBRATE_BELOW",
    "LEVEL",
    "PIVOT",
    "PRIOR_SD",
    "Recalibration",
    "SHIFT_SD",
    "WrongCount",
    "carried_pairs",
    "decided_wrong",
    "label_p",
    "label_risk",
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

SHIFT_SD = 0.7
"""The standard deviation of the shift of the predicted pairs' log-odds of being wrong
(:func:`predicted_wrong`): how far the model's probabilities on the undecided pairs may sit
from the truth as a whole (measured: ``docs/results/teams/quality.md``)."""

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
                   level: float = LEVEL, recalibration: Recalibration | None = None
                   ) -> WrongCount:
    """The count ``Σ X_ℓ s_ℓ``, ``X_ℓ ~ Bernoulli(p_ℓ)`` independent given the
    ``recalibration`` of the ``p_ℓ`` (module docstring), mixed over its uncertainty.

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

    Examples
    --------
    >>> weighted_wrong([0.5], [10])
    WrongCount(estimate=5.0, low=0, high=10)
    >>> weighted_wrong([0.0, 0.0], [3, 4])
    WrongCount(estimate=0.0, low=0, high=0)
    """
    p = np.asarray(p_wrong, dtype=float)
    s = np.asarray(carried, dtype=np.int64)
    keep = (p > 1e-12) & (s > 0)
    p, s = p[keep], s[keep]
    if not len(p):
        return WrongCount(0.0, 0, 0)
    weights, probs = (np.ones(1), p[None, :]) if recalibration is None else \
        recalibration.spread(p)
    means = probs @ s
    sd = np.sqrt((probs * (1.0 - probs)) @ (s.astype(float) ** 2))
    size = int(min(s.sum(), np.ceil((means + _TAIL * sd).max() + s.max()))) + 1
    return _interval(weights @ _compound(probs, s, size), float(weights @ means), level)


def _compound(probs: np.ndarray, s: np.ndarray, size: int) -> np.ndarray:
    """Per row of ``probs`` (one probability per label), the distribution of
    ``Σ X_ℓ s_ℓ`` on ``0 .. size - 1``: one convolution per label, every row at once (a label
    whose stake reaches ``size`` lies beyond the kept tail: only its mass moves)."""
    pmf = np.zeros((len(probs), size))
    pmf[:, 0] = 1.0
    for q, k in zip(probs.T, s.tolist(), strict=True):
        right = 1.0 - q[:, None]
        if k >= size:
            pmf *= right
            continue
        moved = q[:, None] * pmf[:, :size - k]
        pmf *= right
        pmf[:, k:] += moved
    return pmf


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
                  carried: np.ndarray | None = None) -> WrongCount:
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

    Examples
    --------
    >>> c = Closure("abc")
    >>> _ = c.add_label("a", "b", True), c.add_label("b", "c", True)
    >>> pool = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "a")]
    >>> count = decided_wrong(c, {("a", "b"): 0.1, ("b", "c"): 0.2}, pool, np.array([1, 1, 1, 0]))
    >>> round(count.estimate, 6), count.low, count.high  # (b, c) carries three pairs
    (0.7, 0, 3)
    """
    if not closure.asserted:
        return WrongCount(0.0, 0, 0)
    p = label_p(closure, p_wrong)
    if carried is None:
        carried = carried_pairs(closure, p, pool, values)
    return weighted_wrong(p, carried, level, recalibration)


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
    for pair, value in labels.items():
        answers = view.answers.get(pair, [])
        p_wrong[pair] = policy.p_wrong(view, pair, value, suspects) if answers else 0.0
        if len(answers) > 1 and pair in view.proba:
            head = min(answers, key=lambda ans: ans.order)
            first[pair] = [head]
            overruled.append(head.positive != value)
    alone = TeamView(view.result, first, view.pool, view.proba)
    p_first = np.array([policy.p_wrong(alone, pair, head[0].positive, suspects)
                        for pair, head in first.items()])
    like = p_first < CALIBRATE_BELOW
    return p_wrong, Recalibration.fit(p_first[like], np.asarray(overruled, dtype=bool)[like])
