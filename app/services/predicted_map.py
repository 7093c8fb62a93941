"""``GET .../predictions?consistent=true``: the concept map completed into a strict order.

The completion itself is pure (:func:`reasoning.consistent.consistent_map`); this module only
pages its rows into the prediction answer.
"""

from __future__ import annotations

import numpy as np

from app.schemas import ModelInfo, PredictionItem, PredictionPage, label_value
from app.services.training import prediction_key
from app.services.unit import ProjectView
from reasoning.consistent import SOURCES, ConsistentMap, consistent_map

__all__ = ["completed_map", "consistent_page"]


def completed_map(view: ProjectView, proba: np.ndarray) -> ConsistentMap:
    """The pool completed into a strict order from the prediction model's ``proba``: once
    per model and decided set, not per request (or page), kept with the model."""
    state = view.state
    return view.trainer.completed_map(
        state, prediction_key(view.project.prediction_model), proba,
        lambda: consistent_map(state.closure, state.pool_index(), proba))


def consistent_page(view: ProjectView, proba: np.ndarray, info: ModelInfo | None, *,
                    limit: int, offset: int, min_probability: float | None) -> PredictionPage:
    """Every pool pair with its label in the completed map, its probability and its source.

    ``proba`` is the project's prediction model's (:func:`app.services.queries.prediction_of`).
    Decided pairs keep their label (probability 1 or 0, source asserted or inferred); the
    others take the completion's label and a probability on its side of 0.5 (source predicted,
    or forced where consistency overrode the pair's own prediction).
    """
    state = view.state
    completed = completed_map(view, proba)
    keep = np.ones(len(proba), dtype=bool)
    if min_probability is not None:
        keep = completed.probability >= min_probability
    rows = np.flatnonzero(keep)
    names = state.name_of
    items = []
    for row in rows[offset:offset + limit].tolist():
        a_id, b_id = state.pool.concepts[row].tolist()
        items.append(PredictionItem(
            a=names[a_id], b=names[b_id], label=label_value(bool(completed.label[row])),
            source=SOURCES[int(completed.source[row])],  # type: ignore[arg-type]
            probability=float(completed.probability[row])))
    return PredictionPage(items=items, total=int(len(rows)), model=info)
