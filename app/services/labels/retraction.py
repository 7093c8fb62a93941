"""Retracting a label: the core replays the remaining labels, the stored lines follow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import LabelNotFound
from app.schemas import LabelRetracted, label_value
from app.services.annotators import retract_label_answers
from app.services.labels.store import Rewrite, prepare_rewrite, replay_live, rewrite
from app.services.labels.withdrawing import withdraw_label
from app.services.state import ProjectState
from app.services.unit import ProjectWork
from models import AssertedLabel, Project, utcnow
from reasoning.closure import Closure

__all__ = ["retract_label"]


@dataclass(frozen=True)
class _Plan:
    label_id: int
    pair: tuple[int, int]
    positive: bool
    closure: Closure
    stored: Rewrite
    values: Any


def _plan(state: ProjectState, label_id: int) -> _Plan:
    pair = state.pair_of_label.get(label_id)
    if pair is None:
        raise LabelNotFound(label_id)
    # The live labels in the order they were asserted (ids): causes follow that order.
    closure, labels, updates = replay_live(state, without=label_id)
    return _Plan(label_id, pair, state.labels[pair].positive, closure,
                 prepare_rewrite(closure, labels, updates, since=label_id),
                 state.values_under(closure))


def retract_label(work: ProjectWork, label_id: int) -> LabelRetracted:
    """Retract a live label; the closure is recomputed from the remaining labels.

    Returns the retracted label and how many pairs became undecided. In ``consensus`` every
    answer behind the label is retracted instead, and the consensus computed again
    (:func:`app.services.labels.withdrawing.withdraw_label`).
    """
    if work.project.policy == "consensus":
        return withdraw_label(work, label_id)

    def store(work: ProjectWork, project: Project, plan: _Plan) -> LabelRetracted:
        session, state = work.session, work.state
        label = session.get(AssertedLabel, label_id)
        if label is None or label.project_id != project.id or label.retracted_at is not None:
            raise LabelNotFound(label_id, "this label was already retracted")
        before = len(state.closure)
        project.version += 1
        project.retraction_version = project.version
        label.retracted_at = utcnow()
        label.retracted_version = project.version
        label.caused_by = None
        retract_label_answers(session, [label_id])
        rewrite(session, project.id, plan.stored)
        state.replace_closure(plan.closure, plan.values)
        state.forget_label(label_id)
        name = state.name_of
        return LabelRetracted(id=label_id, a=name[plan.pair[0]], b=name[plan.pair[1]],
                              label=label_value(plan.positive), retracted_at=label.retracted_at,
                              undecided=before - len(plan.closure))

    def compute(work: ProjectWork) -> _Plan:
        state = work.state
        if label_id not in state.pair_of_label:
            label = work.session.get(AssertedLabel, label_id)
            if label is not None and label.project_id == state.project_id:
                raise LabelNotFound(label_id, "this label was already retracted")
            raise LabelNotFound(label_id)
        return _plan(state, label_id)

    return work.write(compute, store)
