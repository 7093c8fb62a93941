"""``GET /projects/{pid}/quality``: how many of the map's pool pairs are likely wrong.

Counted over the pool's ordered pairs, as :mod:`reasoning.quality` explains:

* ``decided_wrong``: among the decided pool pairs, from each asserted label's confidence: the
  posterior of its value given the live answers on its pair (the consensus of every live
  answer, in both policies: in ``strict`` too, where a pair one person answered is as right
  as that person's estimated accuracy, or the prior accuracy while nothing estimates it), 1.0
  for a label without a live answer (imported before answers were kept), as
  ``docs/teams.md`` defines a label's confidence;
* ``predicted_wrong``: among the undecided pool pairs, were the map ``predictions`` completes
  (a strict order, ``consistent=true``) taken, from the prediction model's calibrated
  probabilities (None before a model is trained).

The decided part is cached on the project's state (:class:`app.services.state.TeamCache`)
with the fingerprint of the answers it came from (which moves with every label too); the
predicted part with the model it came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from sqlalchemy.orm import Session

from app.schemas import QualityRead
from app.services.labels.confidence import label_confidences
from app.services.predicted_map import completed_map
from app.services.queries import prediction_outputs
from app.services.state import ProjectState
from app.services.team import answers_fingerprint, live_answers
from app.services.unit import ProjectView
from reasoning.quality import WrongCount, decided_wrong, predicted_wrong
from reasoning.strategies import ModelOutputs

__all__ = ["label_quality", "quality"]


def label_quality(session: Session, state: ProjectState) -> WrongCount:
    """The expected wrong pairs among the decided pool pairs, with a 90% interval (module
    docstring), from what ``session`` reads of the project's answers."""
    closure = state.closure
    labels = cast(dict[tuple[int, int], bool], closure.asserted)  # keyed by concept ids
    if not labels:
        return WrongCount(0.0, 0, 0)
    # "consensus": every answered label at its posterior (strict's trust is not an estimate)
    confidence = label_confidences(labels, live_answers(session, state.project_id),
                                   "consensus", cast(list[int], closure.concepts))
    pool = [(a, b) for a, b in state.pool.concepts.tolist()]
    return decided_wrong(closure, confidence, pool, state.values)


def _decided(session: Session, state: ProjectState) -> WrongCount:
    mark = answers_fingerprint(session, state.project_id)
    cached = state.team.quality
    if cached is not None and cached[0] == mark:
        return cached[1]
    count = label_quality(session, state)
    state.team = replace(state.team, quality=(mark, count))
    return count


def _predicted(view: ProjectView, outputs: ModelOutputs | None) -> WrongCount | None:
    """The wrong pairs expected among the undecided pool pairs of the predicted map (the
    strict order ``predictions`` completes) from the model's calibrated probabilities."""
    if outputs is None or outputs.proba is None or outputs.calibrated is None:
        return None
    state = view.state
    mark = (id(outputs.calibrated), state.training_key())
    cached = state.team.predicted
    if cached is not None and cached[0] == mark:
        return cached[1]
    undecided = state.values < 0
    labels = completed_map(view, outputs.proba).label
    count = predicted_wrong(outputs.calibrated[undecided], labels[undecided])
    state.team = replace(state.team, predicted=(mark, count))
    return count


def quality(view: ProjectView, *, fresh: bool = False) -> QualityRead:
    """The project's quality (module docstring), as stored in ``view``'s transaction
    (``fresh``: with a prediction model trained on the current labels)."""
    state = view.state
    undecided = int((state.values < 0).sum())
    outputs, info = prediction_outputs(view, fresh=fresh)
    predicted = _predicted(view, outputs)
    return QualityRead.model_validate({
        "decided_wrong": _decided(view.session, state).as_dict(),
        "predicted_wrong": None if predicted is None else predicted.as_dict(),
        "decided": len(state.values) - undecided,
        "undecided": undecided,
        "model": info,
    })
