"""``GET /projects/{pid}/quality``: how many of the map's pool pairs are likely wrong.

Counted over the pool's ordered pairs, as :mod:`reasoning.quality` explains:

* ``decided_wrong``: among the decided pool pairs, from each asserted label's probability of
  being wrong as the team's question choice reads it (the second opinions' P(wrong): the
  accuracies of the annotators behind it and the model's probability of its pair before
  anyone answered), recalibrated on the labels several people answered
  (:func:`label_quality`), and of the other pairs a wrong label carries the share its own
  overruled answers would have got wrong (:func:`reasoning.quality.derived_share`), in both
  policies: in ``strict`` too, where a pair one person
  answered is as right as that person's estimated accuracy (the prior's while nothing
  estimates it) and the model said; a label without a live answer (imported before answers
  were kept) counts as right;
* ``predicted_wrong``: among the undecided pool pairs, were the map ``predictions`` completes
  (a strict order, ``consistent=true``) taken, from the prediction model's calibrated
  probabilities (None before a model is trained).

The decided part is cached on the project's state (:class:`app.services.state.TeamCache`)
with the fingerprint of the answers it came from (which moves with every label too), and the
pool pairs each label carries with the labels and the order of their P(wrong); the predicted
part with the model it came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import numpy as np

from app.schemas import QualityRead
from app.services.asking import POLICY, answered
from app.services.predicted_map import completed_map
from app.services.queries import prediction_outputs
from app.services.team import (
    answers_fingerprint,
    counting,
    excluded_annotators,
    live_answers,
    votes,
)
from app.services.unit import ProjectView
from reasoning.consensus import consensus
from reasoning.consensus.asking import TeamView
from reasoning.quality import (
    WrongCount,
    carried_pairs,
    decided_wrong,
    derived_share,
    label_p,
    label_risk,
    overruled_firsts,
    predicted_wrong,
    rank_key,
)
from reasoning.strategies import ModelOutputs

__all__ = ["label_quality", "quality"]


def label_quality(view: ProjectView) -> WrongCount:
    """The expected wrong pairs among the decided pool pairs, with a 90% interval (module
    docstring), from what ``view`` reads of the project's answers: each label's P(wrong) as
    the team's question choice reads it (the accuracies of the annotators behind it,
    estimated from every answer that counts now, and the model's probability of its pair when
    ``next`` served it new), recalibrated on the project's re-asked labels
    (:func:`reasoning.quality.label_risk`)."""
    state = view.state
    if not state.closure.asserted:
        return WrongCount(0.0, 0, 0)
    rows = counting(live_answers(view.session, state.project_id),
                    excluded_annotators(view.session, state.project_id))
    answers, model = answered(view, rows)
    fresh = consensus(votes(rows), state.closure.concepts)  # accuracies as they are now
    team = TeamView(fresh, answers, state.pool.row_of, model)
    p_wrong, recalibration = label_risk(team, state.closure.asserted, POLICY)
    pool = [(a, b) for a, b in state.pool.concepts.tolist()]
    share = derived_share(state.closure, overruled_firsts(team, state.closure.asserted), pool,
                          state.values)
    return decided_wrong(state.closure, p_wrong, pool, state.values,
                         recalibration=recalibration, carried=_carried(view, p_wrong, pool),
                         share=share)


def _carried(view: ProjectView, p_wrong: dict[Any, float],
             pool: list[tuple[int, int]]) -> np.ndarray:
    """The decided pool pairs each label carries (:func:`reasoning.quality.carried_pairs`),
    kept on the state until a label or a pool pair changes or the labels' P(wrong) change
    order: one more answer refits the accuracies, which moves every P(wrong) a little and
    seldom their order, and finding every decided pair's bottleneck label is most of the
    count's cost."""
    state = view.state
    p = label_p(state.closure, p_wrong)
    mark = (state.label_events, len(state.pool), rank_key(p))
    kept = state.team.carried
    if kept is not None and kept[0] == mark:
        return cast(np.ndarray, kept[1])
    carried = carried_pairs(state.closure, p, pool, state.values)
    state.team = replace(state.team, carried=(mark, carried))
    return carried


def _decided(view: ProjectView) -> WrongCount:
    state = view.state
    mark = answers_fingerprint(view.session, state.project_id)
    cached = state.team.quality
    if cached is not None and cached[0] == mark:
        return cached[1]
    count = label_quality(view)
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
        "decided_wrong": _decided(view).as_dict(),
        "predicted_wrong": None if predicted is None else predicted.as_dict(),
        "decided": len(state.values) - undecided,
        "undecided": undecided,
        "model": info,
    })
