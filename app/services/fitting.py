"""What the training worker process runs: fit a model and compute its outputs on the pool.

The worker (:mod:`app.services.training` starts it) is forked by multiprocessing's forkserver,
which preloads this module: so this module imports only what fitting needs (NumPy,
scikit-learn, the models of :mod:`reasoning`, and :mod:`app.services.workers`), never the
service (FastAPI, SQLAlchemy, pydantic, the rest of :mod:`app`). The forkserver and the worker
then hold a few tens of megabytes less each, and what crosses the process boundary (a
:class:`ModelKey`, arrays, :class:`reasoning.strategies.ModelOutputs`) unpickles there
without importing the service either.

The trainer thread fits the fast strategy models with the same functions (:func:`fit`,
:func:`inputs`, :func:`outputs`), so both places train alike.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import cross_val_predict

from app.services.workers import exit_now, watch_parent
from reasoning.classifiers import FOREST_TREES, make_probabilistic, positive_proba
from reasoning.strategies import (
    FAMILIES,
    ModelFamily,
    ModelOutputs,
    fit_model,
    model_inputs,
    model_outputs,
    proba_outputs,
)

__all__ = [
    "PREDICTION_MODELS",
    "RANDOM_STATE",
    "ModelKey",
    "fit",
    "fit_outputs",
    "inputs",
    "outputs",
    "warm_up_worker",
    "worker_start",
]

CALIBRATION_FOLDS = 3  # held-out folds of a logistic regression's calibration

RANDOM_STATE = 0  # models are deterministic given the labels: answers repeat across processes


def _calibrated(model: Any, held_out: np.ndarray, y: np.ndarray) -> Any:
    """``model`` with ``calibrator_``: an isotonic map from its probabilities to how often
    they come true, fitted on probabilities of rows the model did not train on (a quality
    estimate, ``GET quality``, needs them to mean what they say)."""
    keep = ~np.isnan(held_out)
    model.calibrator_ = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
        held_out[keep], np.asarray(y, dtype=float)[keep]) if keep.any() else None
    return model


def _fit_logistic_regression(X, y, random_state, estimator):
    model = make_probabilistic(random_state).fit(X, y)
    folds = min(CALIBRATION_FOLDS, int(np.bincount(np.asarray(y, dtype=int)).min()))
    if folds < 2:
        return _calibrated(model, np.full(len(y), np.nan), y)
    held_out = cross_val_predict(make_probabilistic(random_state), X, y, cv=folds,
                                 method="predict_proba")[:, 1]
    return _calibrated(model, held_out, y)


def _fit_random_forest(X, y, random_state, estimator):
    forest = RandomForestClassifier(n_estimators=FOREST_TREES, random_state=random_state,
                                    n_jobs=1, oob_score=True)
    with warnings.catch_warnings():  # a row no tree left out has no out-of-bag vote: NaN
        warnings.simplefilter("ignore", UserWarning)
        forest.fit(X, y)
    return _calibrated(forest, forest.oob_decision_function_[:, 1], y)


def _calibrated_outputs(model, X) -> ModelOutputs:
    """``p(positive)`` of every row and, when the model has a calibrator, its calibrated
    probability."""
    outputs = proba_outputs(model, X)
    calibrator = getattr(model, "calibrator_", None)
    if calibrator is None or outputs.proba is None or not len(X):
        return outputs
    return replace(outputs, calibrated=calibrator.predict(outputs.proba))


PREDICTION_MODELS: tuple[ModelFamily, ...] = (
    ModelFamily("random_forest", "random_forest", _fit_random_forest, _calibrated_outputs,
                trains_in_worker=True),
    ModelFamily("logistic_regression", "logistic_regression", _fit_logistic_regression,
                _calibrated_outputs, trains_in_worker=True),
)
"""The models a project may predict its map with (``prediction_model``), as model families:
on the features alone, trained in the worker process."""

_REGISTRIES: dict[str, dict[str, ModelFamily]] = {
    "strategy": {family.name: family for family in FAMILIES},
    "prediction": {family.name: family for family in PREDICTION_MODELS},
}


@dataclass(frozen=True)
class ModelKey:
    """Which model: a strategy's (``kind``: its family) or the prediction model (its ``kind``)."""

    purpose: str  # "strategy" or "prediction"
    kind: str
    closure_labels: bool

    @property
    def family(self) -> ModelFamily:
        """The model family of ``kind`` among the strategies' or the prediction models'."""
        return _REGISTRIES[self.purpose][self.kind]

    @property
    def trains_here(self) -> bool:
        """Fast models train in the trainer thread; forests and prediction models in the
        worker process."""
        return not self.family.trains_in_worker

    @property
    def rank(self) -> int:
        """Training order: fast strategy models before the forests."""
        return 0 if self.trains_here else 1

    @property
    def name(self) -> str:
        """The model's name in answers."""
        name = self.family.model
        assert name is not None, "a family without a model has no key"
        return name


def outputs(key: ModelKey, estimator: Any, X: np.ndarray) -> ModelOutputs:
    """What the fitted ``estimator`` of ``key`` says about the rows ``X``."""
    result = model_outputs(key.family, estimator, X)
    assert result is not None
    return result


def fit(key: ModelKey, X: np.ndarray, y: np.ndarray) -> Any:
    """The model of ``key`` fitted on ``(X, y)``; None when it cannot be fitted."""
    return fit_model(key.family, X, y, random_state=RANDOM_STATE)


def inputs(key: ModelKey, X: np.ndarray, concepts: np.ndarray | None,
           values: np.ndarray) -> np.ndarray:
    """What the model of ``key`` sees: ``X``, or for a family that reads the pool (the
    snapshot holds its ``concepts``) what the family builds from it
    (:func:`reasoning.strategies.model_inputs`)."""
    if concepts is None:
        return X
    return model_inputs(key.family, concepts, X, values)


def fit_outputs(key: ModelKey, X: np.ndarray, concepts: np.ndarray | None,
                values: np.ndarray, mask: np.ndarray) -> ModelOutputs | None:
    """Build the inputs, fit and compute the pool's outputs: what the worker process runs
    (None: not fitted). The inputs are built here, so that only the pool's own features
    travel to the worker."""
    seen = inputs(key, X, concepts, values)
    estimator = fit(key, seen[mask], values[mask] == 1)
    return None if estimator is None else outputs(key, estimator, seen)


def worker_start(nice: int) -> None:
    """The worker's initializer."""
    # The worker ends with the process that started it (nothing else would end it: it holds
    # both ends of its own job queue), and the forkserver and resource tracker follow it.
    watch_parent(exit_now)
    try:  # nice ``nice``, not ``nice`` more than the forkserver (19 when a niced thread began it)
        os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
    except (AttributeError, OSError):  # not Unix, or not allowed: run at the inherited priority
        pass
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def warm_up_worker() -> int:
    """A forest of two trees on four rows: what a first training imports and sets up, done."""
    X = np.array([[0.0], [1.0], [0.0], [1.0]])
    forest = RandomForestClassifier(n_estimators=2, random_state=RANDOM_STATE, n_jobs=1)
    return len(positive_proba(forest.fit(X, np.array([0, 1, 0, 1])), X))
