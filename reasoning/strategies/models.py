"""The models that strategies score with, by *model family*.

A strategy names the family of its model (:attr:`reasoning.strategies.Strategy.family`);
fitting, the inputs and the outputs go by that family alone, so the trainer of the service
and the simulation fit a strategy's model without knowing which strategy asked for it:

========== =========================================================== =====================
family     model                                                       outputs
========== =========================================================== =====================
``random`` none                                                        none
``lc``     a probabilistic classifier (:func:`~reasoning.classifiers.  ``proba``
           make_probabilistic`)
``qbc``    a committee (:class:`~reasoning.classifiers.Committee`)       ``votes``
``forest`` extremely randomized trees on                               ``proba``
           :func:`~reasoning.model_features.forest_features`
========== =========================================================== =====================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import ExtraTreesClassifier

from reasoning.classifiers import (
    COMMITTEE_SIZE,
    Committee,
    committee_votes,
    make_probabilistic,
    positive_proba,
)
from reasoning.model_features import forest_features

__all__ = [
    "FAMILIES",
    "FOREST_STRATEGY_TREES",
    "MIN_TRAIN_ROWS",
    "Family",
    "ModelOutputs",
    "fit_model",
    "model_inputs",
    "model_outputs",
]

Family = Literal["random", "lc", "qbc", "forest"]
"""A model family: ``random`` fits no model."""

FAMILIES: tuple[Family, ...] = ("random", "lc", "qbc", "forest")

MIN_TRAIN_ROWS = 2
"""Fewer labeled rows than this and no model is fitted (the strategy falls back to p = 0.5)."""

FOREST_STRATEGY_TREES = 50
"""Trees of the ``forest`` family (extremely randomized trees: fast to fit, smooth ``p``)."""


@dataclass(frozen=True)
class ModelOutputs:
    """What a fitted model says about every pool row, computed once per model.

    ``proba`` is ``p(positive)`` per row (``lc`` and ``forest`` families), ``votes`` each
    committee member's vote for positive, shape ``(members, m)`` (``qbc`` family).
    """

    proba: np.ndarray | None = None
    votes: np.ndarray | None = None

    def __len__(self) -> int:
        if self.proba is not None:
            return len(self.proba)
        return 0 if self.votes is None else self.votes.shape[1]


def fit_model(family: str, X, y, *, random_state: int | None = None, estimator=None):
    """Fit a model of ``family`` on labeled rows, or return None when it cannot be fitted.

    Parameters
    ----------
    family : {"random", "lc", "qbc", "forest"}
        ``lc`` → probabilistic classifier, ``qbc`` → committee, ``forest`` → extra trees
        (on :func:`model_inputs`).
    X : array of shape (m, f)
    y : array of shape (m,)
        True (1) for positive rows.
    random_state : int, optional
    estimator : classifier, optional
        Replaces the default: the probabilistic classifier of the ``lc`` family (needs
        ``predict_proba``), the base classifier of the ``qbc`` committee, or the ``forest``.

    Returns
    -------
    A fitted estimator, or None for the ``random`` family, with fewer than
    :data:`MIN_TRAIN_ROWS` rows, or with a single class in ``y`` (callers then use p = 0.5).
    """
    y = np.asarray(y).astype(np.int64)
    if family == "random" or len(y) < MIN_TRAIN_ROWS or len(np.unique(y)) < 2:
        return None
    X = np.asarray(X, dtype=np.float64)
    if family == "forest":
        model = (ExtraTreesClassifier(n_estimators=FOREST_STRATEGY_TREES, n_jobs=1,
                                      random_state=random_state)
                 if estimator is None else clone(estimator))
    elif family == "lc":
        model = make_probabilistic(random_state) if estimator is None else clone(estimator)
    else:
        model = Committee(estimator, n_members=COMMITTEE_SIZE, random_state=random_state)
    return model.fit(X, y)


def model_inputs(family: str, pool, X, values) -> np.ndarray:
    """The rows a model of ``family`` is fitted on and scores: ``X``, or for the ``forest``
    family :func:`reasoning.model_features.forest_features` (``values``: the pool's decided
    values, -1 undecided)."""
    if family != "forest":
        return np.asarray(X, dtype=np.float64)
    return forest_features(pool, X, values)


def model_outputs(family: str, model, X) -> ModelOutputs | None:
    """The outputs of a fitted ``model`` of ``family`` on the rows ``X`` (None: no model).

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> model = fit_model("lc", X, np.array([0, 0, 1, 1]), random_state=0)
    >>> outputs = model_outputs("lc", model, X)
    >>> bool(outputs.proba[0] < 0.5 < outputs.proba[3])
    True
    """
    if model is None:
        return None
    if family in ("lc", "forest"):
        return ModelOutputs(proba=positive_proba(model, X))
    if family == "qbc":
        return ModelOutputs(votes=committee_votes(model, X))
    return None
