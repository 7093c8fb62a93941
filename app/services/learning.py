"""The classifiers behind the questions and the predictions, retrained only when needed.

Each model is cached in the project's state with what it was trained on
(:meth:`~app.services.state.ProjectState.training_key`); a request retrains only when that
changed (the labels or the pool), not when a concept is added or the project renamed.

* The strategy's model (:func:`reasoning.strategies.fit_model`): trained on the decided pool
  pairs for strategies that use the closure (``-R``, ``-R+``, CNT), else on the asserted ones.
* The prediction model (a per-project setting, default the paper's 200-tree random forest):
  trained on every decided pool pair; gives ``p(positive)`` of the undecided ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from app.services.state import ProjectState, StateRegistry
from reasoning.classifiers import make_probabilistic, positive_proba
from reasoning.strategies import family, fit_model, needs_model, uses_closure

__all__ = [
    "FOREST_TREES",
    "PoolPredictions",
    "model_info",
    "pool_predictions",
    "strategy_model",
    "training_set",
]

FOREST_TREES = 200
RANDOM_STATE = 0  # models are deterministic given the labels: answers repeat across processes


def training_set(state: ProjectState, closure_labels: bool) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the labeled pool pairs.

    ``closure_labels``: every decided pool pair (asserted or inferred) is a training row;
    otherwise only the pool pairs with an asserted label.
    """
    _, X = state.pool_arrays()
    values = state.pool_values()
    mask = values >= 0
    if not closure_labels:
        mask &= state.pool_asserted()
    return X[mask], values[mask] == 1


def model_info(name: str, y: np.ndarray, version: int) -> dict[str, Any]:
    positive = int(np.count_nonzero(y))
    return {"name": name, "trained_on": int(len(y)), "positive": positive,
            "negative": int(len(y)) - positive, "version": version}


def strategy_model(state: ProjectState, strategy: str, *,
                   allow_stale: bool = False) -> tuple[Any, dict[str, Any] | None]:
    """The strategy's fitted model and its description, or ``(None, None)`` (p = 0.5).

    Call while holding ``state.lock``; retrains only when the labels or the pool changed. With
    ``allow_stale`` a model trained on older labels is used as it is (its ``version`` says
    when it was trained): under a stream of labels, retraining inside the write lock would
    serialize it.
    """
    if not needs_model(strategy):
        return None, None
    closure_labels = uses_closure(strategy)
    key = f"strategy:{family(strategy)}:{'closure' if closure_labels else 'asserted'}"
    cached = state.models.get(key)
    trained_on = state.training_key()
    if cached is not None and (cached[0] == trained_on or allow_stale):
        return cached[1], cached[2]
    X, y = training_set(state, closure_labels)
    model = fit_model(strategy, X, y, random_state=RANDOM_STATE)
    name = "logistic_regression" if family(strategy) == "lc" else "decision_tree_committee"
    info = model_info(name, y, state.version) if model is not None else None
    state.models[key] = (trained_on, model, info)
    return model, info


def _fit_prediction_model(kind: str, X: np.ndarray, y: np.ndarray) -> Any:
    if len(y) < 2 or len(np.unique(y)) < 2:
        return None
    if kind == "logistic_regression":
        return make_probabilistic(RANDOM_STATE).fit(X, y.astype(np.int64))
    forest = RandomForestClassifier(n_estimators=FOREST_TREES, random_state=RANDOM_STATE,
                                    n_jobs=1)
    return forest.fit(X, y.astype(np.int64))


@dataclass(frozen=True)
class PoolPredictions:
    """The pool at one version: values (1/0/-1) and ``p(positive)`` (None: no model)."""

    version: int
    kind: str
    pairs: list[tuple[int, int]]
    asserted: frozenset[tuple[int, int]]
    values: np.ndarray
    probabilities: np.ndarray | None
    info: dict[str, Any] | None


def pool_predictions(registry: StateRegistry, state: ProjectState,
                     kind: str) -> PoolPredictions:
    """The prediction model's view of the pool at the state's current version.

    The caller has caught the state up (and released its lock); training, which can take a
    second for the forest, runs outside ``state.lock`` so that labels keep flowing.
    """
    with state.lock:
        trained_on = state.training_key()
        cached = state.predictions
        if cached is not None and cached[0] == trained_on and cached[2] is not None \
                and cached[2].kind == kind:
            return cached[2]
        version = state.version
        pairs = list(state.pair_concepts)
        asserted = frozenset(p for p in pairs if p in state.labels)
        values = state.pool_values()
        _, X_pool = state.pool_arrays()
        mask = values >= 0
        X_train, y_train = X_pool[mask], values[mask] == 1
    with state.training_lock:
        with state.lock:
            cached = state.predictions
            if cached is not None and cached[0] == trained_on and cached[2] is not None \
                    and cached[2].kind == kind:
                return cached[2]
        model = _fit_prediction_model(kind, X_train, y_train)
        probabilities = positive_proba(model, X_pool) if model is not None and len(X_pool) \
            else None
        info = model_info(kind, y_train, version) if model is not None else None
        result = PoolPredictions(version, kind, pairs, asserted, values, probabilities, info)
        with state.lock:
            if state.training_key() == trained_on:
                state.predictions = (trained_on, None, result)
    return result
