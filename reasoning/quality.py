"""How right a map is: the expected number of wrong pairs among the decided pool pairs and
among the predicted rest, each with a 90% interval.

**Decided pairs.** Each asserted label is right with its confidence ``c`` (the posterior of
its value given its pair's answers, :mod:`reasoning.consensus`), independently of the others.
A pair the closure decides is wrong when the label its confidence comes from is wrong (its
own label when asserted, else the bottleneck of its strongest proof,
:func:`reasoning.consensus.confidence.derived_confidence`): so one wrong label makes every
pair it carries wrong at once. The count of wrong decided pairs is then ``Σ X_ℓ s_ℓ`` over the
labels ``ℓ``, ``X_ℓ ~ Bernoulli(1 - c_ℓ)`` and ``s_ℓ`` the pool pairs it carries; its
distribution is computed exactly (a convolution per label, truncated far in the tail).

**Predicted pairs.** An undecided pool pair taken at a label (the predicted map's; by default
positive when ``p ≥ 0.5``) is wrong with probability ``1 - p`` or ``p`` if the model's
probabilities are calibrated, independently: a Poisson-binomial count, computed on
probabilities binned to :data:`BIN` (the estimate itself is the exact sum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reasoning.closure import Closure
from reasoning.consensus.confidence import derived_confidence

__all__ = ["BIN", "LEVEL", "WrongCount", "decided_wrong", "predicted_wrong", "weighted_wrong"]

LEVEL = 0.90
"""The probability each interval holds."""

BIN = 0.002
"""The width of the probability bins of the predicted pairs' count."""

_TAIL = 12.0  # standard deviations kept beyond the mean (the rest is below 1e-30)


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


def _cap(mean: float, variance: float, largest: int, total: int) -> int:
    return int(min(total, np.ceil(mean + _TAIL * np.sqrt(variance) + largest))) + 1


def weighted_wrong(p_wrong: Sequence[float] | np.ndarray, carried: Sequence[int] | np.ndarray,
                   level: float = LEVEL) -> WrongCount:
    """The count ``Σ X_ℓ s_ℓ``, ``X_ℓ ~ Bernoulli(p_ℓ)`` independent (module docstring).

    Parameters
    ----------
    p_wrong : array of float
        Per label, the probability that it is wrong.
    carried : array of int
        Per label, the pairs it carries (``s_ℓ``).
    level : float
        The interval's probability.

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
    mean = float(np.dot(p, s))
    if not len(p):
        return WrongCount(0.0, 0, 0)
    variance = float(np.dot(p * (1.0 - p), s.astype(float) ** 2))
    size = _cap(mean, variance, int(s.max()), int(s.sum()))
    pmf = np.zeros(size)
    pmf[0] = 1.0
    for q, k in zip(p.tolist(), s.tolist(), strict=True):
        if k >= size:  # this label wrong lies beyond the kept tail: only its mass moves
            pmf *= 1.0 - q
            continue
        shifted = np.zeros(size)
        shifted[k:] = pmf[:size - k]
        pmf = (1.0 - q) * pmf + q * shifted
    return _interval(pmf, mean, level)


def predicted_wrong(proba: Sequence[float] | np.ndarray,
                    labels: Sequence[bool] | np.ndarray | None = None,
                    level: float = LEVEL) -> WrongCount:
    """The wrong pairs among pairs taken at ``labels`` (default: the side of 0.5 of each
    pair's ``proba``, its calibrated probability of positive; module docstring).

    Examples
    --------
    >>> predicted_wrong([0.9, 0.1, 0.5, 0.5]).estimate
    1.2
    >>> predicted_wrong([])
    WrongCount(estimate=0.0, low=0, high=0)
    """
    p = np.asarray(proba, dtype=float)
    side = p >= 0.5 if labels is None else np.asarray(labels, dtype=bool)
    known = ~np.isnan(p)
    q = np.where(side, 1.0 - p, p)[known]
    mean = float(q.sum())
    if not len(q) or mean <= 0.0:
        return WrongCount(mean, 0, 0)
    variance = float((q * (1.0 - q)).sum())
    size = _cap(mean, variance, 1, len(q))
    bins = np.round(q / BIN).astype(np.int64)
    counts = np.bincount(bins)
    # the product of the bins' binomial characteristic functions, back through one FFT
    n_points = 1 << int(np.ceil(np.log2(size + 1)))
    wave = np.exp(-2j * np.pi * np.arange(n_points) / n_points)
    log_phi = np.zeros(n_points, dtype=complex)
    for b in np.flatnonzero(counts).tolist():
        if b:
            r = min(b * BIN, 0.5)
            log_phi += counts[b] * np.log(1.0 - r + r * wave)
    pmf = np.clip(np.fft.ifft(np.exp(log_phi)).real[:size], 0.0, None)
    return _interval(pmf, mean, level)


def decided_wrong(closure: Closure, confidence: Mapping[Any, float],
                  pool: Sequence[tuple[Any, Any]], values: np.ndarray,
                  level: float = LEVEL) -> WrongCount:
    """The wrong pairs expected among the decided pairs of ``pool`` (module docstring).

    Parameters
    ----------
    closure : Closure
        The closure of the asserted labels.
    confidence : mapping
        Per asserted pair (as ``closure.asserted`` has it), the probability that its label is
        right (a missing one counts as 1).
    pool : sequence of pairs
        The pool's pairs.
    values : int array
        Per pool pair, its value in ``closure``: 1, 0, or -1 when undecided.
    level : float
        The interval's probability.

    Examples
    --------
    >>> c = Closure("abc")
    >>> _ = c.add_label("a", "b", True), c.add_label("b", "c", True)
    >>> pool = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "a")]
    >>> count = decided_wrong(c, {("a", "b"): 0.9, ("b", "c"): 0.8}, pool, np.array([1, 1, 1, 0]))
    >>> round(count.estimate, 6), count.low, count.high  # (b, c) carries three pairs
    (0.7, 0, 3)
    """
    labels = closure.asserted
    if not labels:
        return WrongCount(0.0, 0, 0)
    derived = derived_confidence(closure, confidence, sources=True)
    values = np.asarray(values)
    decided = np.flatnonzero(values >= 0)
    sources = derived.sources([pool[row] for row in decided.tolist()], values[decided])
    carried = np.bincount(sources[sources >= 0], minlength=len(labels))
    p_wrong = np.array([1.0 - float(confidence.get(pair, 1.0)) for pair in labels])
    return weighted_wrong(p_wrong, carried, level)
