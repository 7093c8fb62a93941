"""The models that strategies score with, by *model family*.

A strategy names the family of its model (:attr:`reasoning.strategies.Strategy.family`);
fitting, the inputs and the outputs go by that family alone, so the trainer of the service
and the simulation fit a strategy's model without knowing which strategy asked for it.
A family is a frozen :class:`ModelFamily` object in the registry :data:`FAMILIES`, read by
name with :func:`get_family`:

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

Adding a family
---------------
Write its fit function (and its inputs, when it sees more than the features) at module level
and register one :class:`ModelFamily` in :data:`FAMILIES`: its name, the model's name in
answers, the fit and output functions, and whether the service trains it in its worker
process. A strategy then names it; the service's trainer and the simulation need no change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    "ModelFamily",
    "ModelOutputs",
    "fit_model",
    "get_family",
    "model_inputs",
    "model_outputs",
    "proba_outputs",
]

Family = str
"""The name of a model family of :data:`FAMILIES` (what a strategy names)."""

MIN_TRAIN_ROWS = 2
"""Fewer labeled rows than this and no model is fitted (the strategy falls back to p = 0.5)."""

FOREST_STRATEGY_TREES = 50
"""Trees of the ``forest`` family (extremely randomized trees: fast to fit, smooth ``p``)."""


@dataclass(frozen=True)
class ModelOutputs:
    """What a fitted model says about every pool row, computed once per model.

    ``proba`` is ``p(positive)`` per row (``lc`` and ``forest`` families), ``votes`` each
    committee member's vote for positive, shape ``(members, m)`` (``qbc`` family);
    ``calibrated`` the prediction models' ``proba`` mapped to how often it came true on rows
    held out of training.
    """

    proba: np.ndarray | None = None
    votes: np.ndarray | None = None
    calibrated: np.ndarray | None = None

    def __len__(self) -> int:
        if self.proba is not None:
            return len(self.proba)
        return 0 if self.votes is None else self.votes.shape[1]


FitFunction = Callable[[np.ndarray, np.ndarray, int | None, Any], Any]
"""Fits a new model on ``(X, y, random_state, estimator)``; ``estimator`` replaces the
default one when given (None: the family's own)."""

InputFunction = Callable[[Any, Any, Any], np.ndarray]
"""The rows a model sees, from ``(pool, X, values)``."""

OutputFunction = Callable[[Any, np.ndarray], ModelOutputs]
"""What a fitted model says about the rows ``X`` (none: empty outputs)."""


@dataclass(frozen=True)
class ModelFamily:
    """A family of models: how one is fitted, what it sees and what it says.

    Attributes
    ----------
    name : str
        What strategies (:attr:`reasoning.strategies.Strategy.family`) and model keys call it.
    model : str or None
        The model's name in answers; None for a family that fits no model.
    fit : FitFunction or None
        Fits a model on labeled rows (only called with both classes and at least
        :data:`MIN_TRAIN_ROWS` rows: :func:`fit_model` checks); None: the family fits no
        model (``random``).
    outputs : OutputFunction or None
        A fitted model's :class:`ModelOutputs` on the rows it is given (also on none).
    inputs : InputFunction or None
        The rows the model is fitted on and scores, from the pool (concept indices), the
        features and the pool's decided values; None: the features as they are.
    trains_in_worker : bool
        True for the slow models that the service trains in its worker process; the others
        train in its trainer thread.
    """

    name: str
    model: str | None
    fit: FitFunction | None
    outputs: OutputFunction | None
    inputs: InputFunction | None = None
    trains_in_worker: bool = False

    @property
    def needs_model(self) -> bool:
        """False for a family that fits no model (its strategies never look at one)."""
        return self.fit is not None

    @property
    def reads_pool(self) -> bool:
        """True when its inputs are built from the pool's pairs, not from the features alone."""
        return self.inputs is not None

    def __repr__(self) -> str:
        return f"ModelFamily({self.name!r})"


# ---------------------------------------------------------------------------- the families
def _fit_probabilistic(X, y, random_state, estimator):
    model = make_probabilistic(random_state) if estimator is None else clone(estimator)
    return model.fit(X, y)


def _fit_committee(X, y, random_state, estimator):
    return Committee(estimator, n_members=COMMITTEE_SIZE, random_state=random_state).fit(X, y)


def _fit_extra_trees(X, y, random_state, estimator):
    model = (ExtraTreesClassifier(n_estimators=FOREST_STRATEGY_TREES, n_jobs=1,
                                  random_state=random_state)
             if estimator is None else clone(estimator))
    return model.fit(X, y)


def proba_outputs(model, X) -> ModelOutputs:
    """``p(positive)`` of every row of ``X`` (none for no rows)."""
    return ModelOutputs(proba=positive_proba(model, X) if len(X) else np.zeros(0))


def _vote_outputs(model, X) -> ModelOutputs:
    if not len(X):
        return ModelOutputs(votes=np.zeros((0, 0), dtype=np.int64))
    return ModelOutputs(votes=committee_votes(model, X))


def _forest_inputs(pool, X, values) -> np.ndarray:
    return forest_features(pool, X, values)


FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily("random", None, None, None),
    ModelFamily("lc", "logistic_regression", _fit_probabilistic, proba_outputs),
    ModelFamily("qbc", "decision_tree_committee", _fit_committee, _vote_outputs),
    ModelFamily("forest", "extra_trees", _fit_extra_trees, proba_outputs,
                inputs=_forest_inputs, trains_in_worker=True),
)
"""Every model family a strategy may name."""

_BY_NAME = {f.name: f for f in FAMILIES}
assert len(_BY_NAME) == len(FAMILIES), "two families of one name"


def get_family(name: str | ModelFamily) -> ModelFamily:
    """The family called ``name`` (a family as is); ValueError for an unknown name.

    Examples
    --------
    >>> get_family("forest").trains_in_worker, get_family("random").needs_model
    (True, False)
    """
    if isinstance(name, ModelFamily):
        return name
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model family {name!r}; valid: "
                         f"{', '.join(_BY_NAME)}") from None


# ---------------------------------------------------------------------------- by family
def fit_model(family: str | ModelFamily, X, y, *, random_state: int | None = None,
              estimator=None):
    """Fit a model of ``family`` on labeled rows, or return None when it cannot be fitted.

    Parameters
    ----------
    family : str or ModelFamily
        A family of :data:`FAMILIES` (``lc`` → probabilistic classifier, ``qbc`` →
        committee, ``forest`` → extra trees on :func:`model_inputs`), or any other family.
    X : array of shape (m, f)
    y : array of shape (m,)
        True (1) for positive rows.
    random_state : int, optional
    estimator : classifier, optional
        Replaces the default: the probabilistic classifier of the ``lc`` family (needs
        ``predict_proba``), the base classifier of the ``qbc`` committee, or the ``forest``.

    Returns
    -------
    A fitted estimator, or None for a family without a model (``random``), with fewer than
    :data:`MIN_TRAIN_ROWS` rows, or with a single class in ``y`` (callers then use p = 0.5).
    """
    fit = get_family(family).fit
    y = np.asarray(y).astype(np.int64)
    if fit is None or len(y) < MIN_TRAIN_ROWS or len(np.unique(y)) < 2:
        return None
    return fit(np.asarray(X, dtype=np.float64), y, random_state, estimator)


def model_inputs(family: str | ModelFamily, pool, X, values) -> np.ndarray:
    """The rows a model of ``family`` is fitted on and scores: ``X``, or what the family
    builds from the pool (``forest``: :func:`reasoning.model_features.forest_features`;
    ``values``: the pool's decided values, -1 undecided)."""
    inputs = get_family(family).inputs
    if inputs is None:
        return np.asarray(X, dtype=np.float64)
    return inputs(pool, X, values)


def model_outputs(family: str | ModelFamily, model, X) -> ModelOutputs | None:
    """The outputs of a fitted ``model`` of ``family`` on the rows ``X`` (None: no model).

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> model = fit_model("lc", X, np.array([0, 0, 1, 1]), random_state=0)
    >>> outputs = model_outputs("lc", model, X)
    >>> bool(outputs.proba[0] < 0.5 < outputs.proba[3])
    True
    """
    outputs = get_family(family).outputs
    if model is None or outputs is None:
        return None
    return outputs(model, X)
