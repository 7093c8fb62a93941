"""One-coin Dawid–Skene by expectation–maximisation, vectorised over an answers table.

The answers are three aligned arrays (the item, the annotator and the value of each answer);
every step is a :func:`numpy.bincount` over them, so an iteration costs O(answers) in numpy
and no Python loop runs per answer. Items whose truth is known (a reviewer's resolution, or a
value the order forces) enter as *evidence*: they keep that value in the E-step, and the
annotators who answered them are scored against it in the M-step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ACCURACY_RANGE", "PSEUDO_COUNT", "Fit", "fit_one_coin", "log_odds"]

PSEUDO_COUNT = 2.0
"""Answers' worth of the prior accuracy added to each annotator's counts (a Beta prior), so
that an annotator with three answers is not estimated perfect or useless."""

ACCURACY_RANGE = (0.5 + 1e-3, 0.999)
"""The accuracies a weight is computed from: no annotator counts against their own answers
(below one half) and none is taken as infallible."""

_ITERATIONS = 100
_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Fit:
    """The result of :func:`fit_one_coin`.

    ``posterior[i]`` is P(item ``i`` positive); ``accuracy[j]`` the estimated P(annotator
    ``j`` answers correctly); ``weight[j]`` the log-odds one answer of ``j`` adds; ``llr[i]``
    the answers' summed log-likelihood ratio for positive.

    No class prior enters the posterior: the pairs a team answers are chosen by a strategy,
    not drawn at random, so their share of positives says little about the next one; a pair's
    most likely value is the weighted majority of its answers (the model's probability enters
    where second opinions are chosen, :func:`reasoning.consensus.p_wrong`).
    """

    posterior: np.ndarray
    accuracy: np.ndarray
    weight: np.ndarray
    llr: np.ndarray


def log_odds(p: np.ndarray | float) -> np.ndarray:
    """``log(p / (1 - p))`` elementwise."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def _weights(accuracy: np.ndarray) -> np.ndarray:
    return log_odds(np.clip(accuracy, *ACCURACY_RANGE))


def _accuracies(agree: np.ndarray, counts: np.ndarray, weighted: bool,
                prior: float) -> np.ndarray:
    """The M-step: expected agreements over informative answers, with the Beta prior."""
    if weighted:
        return (agree + prior * PSEUDO_COUNT) / (counts + PSEUDO_COUNT)
    return np.full(len(agree), (agree.sum() + prior * PSEUDO_COUNT)
                   / (counts.sum() + PSEUDO_COUNT))


def fit_one_coin(item: np.ndarray, annotator: np.ndarray, positive: np.ndarray, *,
                 n_items: int, n_annotators: int, evidence: np.ndarray | None = None,
                 scored: np.ndarray | None = None, weighted: bool = True,
                 prior: float = 0.9) -> Fit:
    """Fit one accuracy per annotator and a posterior per item.

    Parameters
    ----------
    item, annotator : int arrays of shape (m,)
        The item and the annotator of each answer.
    positive : bool array of shape (m,)
        The value of each answer.
    n_items, n_annotators : int
    evidence : float array of shape (n_items,), optional
        A known truth per item (1.0 positive, 0.0 negative), NaN where unknown: the item's
        posterior, and what its annotators are scored against.
    scored : float array of shape (n_items,), optional
        A value per item (NaN where none) that its annotators are scored against in the
        M-step, while the item's own posterior still comes from its answers.
    weighted : bool
        False fits one accuracy shared by every annotator (every answer weighs alike).
    prior : float
        The prior accuracy (worth :data:`PSEUDO_COUNT` answers) and the starting point.

    Returns
    -------
    Fit

    Notes
    -----
    An item answered once, with no evidence and no score, says nothing of its annotator (its
    posterior is that very answer): it stays out of the M-step.
    """
    sign = np.where(positive, 1.0, -1.0)
    known = np.zeros(n_items, dtype=bool) if evidence is None else ~np.isnan(evidence)
    truth = np.zeros(n_items) if evidence is None else np.nan_to_num(evidence)
    marked = np.zeros(n_items, dtype=bool) if scored is None else ~np.isnan(scored)
    mark = np.zeros(n_items) if scored is None else np.nan_to_num(scored)
    per_item = np.bincount(item, minlength=n_items)
    informative = ((per_item >= 2) | known | marked)[item]  # per answer
    counts = np.bincount(annotator, weights=informative.astype(float), minlength=n_annotators)
    accuracy = np.full(n_annotators, float(prior))
    posterior = np.full(n_items, 0.5)
    for _ in range(_ITERATIONS):
        weight = _weights(accuracy)
        llr = np.bincount(item, weights=sign * weight[annotator], minlength=n_items)
        fresh = 1.0 / (1.0 + np.exp(-llr))
        fresh[known] = truth[known]
        target = np.where(marked, mark, fresh)
        right = np.where(positive, target[item], 1.0 - target[item])
        agree = np.bincount(annotator, weights=right * informative, minlength=n_annotators)
        new = _accuracies(agree, counts, weighted, prior)
        change = max(np.abs(new - accuracy).max(initial=0.0),
                     np.abs(fresh - posterior).max(initial=0.0))
        accuracy, posterior = new, fresh
        if change < _TOLERANCE:
            break
    weight = _weights(accuracy)
    llr = np.bincount(item, weights=sign * weight[annotator], minlength=n_items)
    return Fit(posterior, accuracy, weight, llr)
