"""Asserting one label: what ``strict`` does with every label and ``consensus`` with an
answer on a pair nobody answered that the closure does not contradict (the fast path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import BudgetExceeded, InvalidItems, UnknownConcepts
from app.schemas import (
    MAX_DECIDED_LISTED,
    DecidedPair,
    LabelCreated,
    LabelIn,
    NewlyDecided,
    label_value,
)
from app.services.labels.proofs import pair_problem
from app.services.labels.store import cause_in_store, release, write_effects
from app.services.state import LiveLabel, ProjectState
from app.services.unit import ProjectWork
from models import AssertedLabel, Project, utcnow
from reasoning.closure import Closure, Update

__all__ = ["Planned", "created", "decided_list", "resolve_bulk", "store_label", "within_budget"]


@dataclass(frozen=True)
class Planned:
    """A label applied to the cached closure, to be stored."""

    a_id: int
    b_id: int
    update: Update
    was_decided: bool


def decided_list(state: ProjectState, update: Update) -> list[DecidedPair]:
    """The first :data:`MAX_DECIDED_LISTED` pairs ``update`` decided (an answer stays small)."""
    name: dict[Any, str] = state.name_of
    listed = [DecidedPair(a=name[a], b=name[b], label=label_value(True))
              for a, b in update.pairs(True, MAX_DECIDED_LISTED)]
    return listed + [DecidedPair(a=name[a], b=name[b], label=label_value(False))
                     for a, b in update.pairs(False, MAX_DECIDED_LISTED - len(listed))]


def created(state: ProjectState, a: str, b: str, positive: bool, live: LiveLabel,
             update: Update | None, answer_id: int | None = None,
             annotator: str | None = None) -> LabelCreated:
    n_positive = update.n_positive if update is not None else 0
    n_negative = update.n_negative if update is not None else 0
    total = n_positive + n_negative
    rest = (f"/projects/{state.project_id}/labels?caused_by={live.id}&source=inferred"
            if total > MAX_DECIDED_LISTED else None)
    return LabelCreated(
        id=live.id, answer_id=answer_id, a=a, b=b, label=label_value(positive),
        annotator=live.annotator if answer_id is None else annotator,
        created_at=live.created_at,
        newly_decided=NewlyDecided(positive=n_positive, negative=n_negative),
        decided=decided_list(state, update) if update is not None else [],
        decided_total=total, decided_rest=rest,
    )


def within_budget(work: ProjectWork, closure: Closure, a_id: int, b_id: int, positive: bool,
                  what: str) -> None:
    """Refuse, before the work, a label that would grow the closure past the budget."""
    limit = work.limits.decided_pairs
    if len(closure) >= limit - len(closure.concepts) ** 2:  # else no label can reach it
        would_reach = len(closure) + closure.growth(a_id, b_id, positive)
        if would_reach > limit:
            raise BudgetExceeded("decided_pairs", limit, would_reach, what)




def store_label(work: ProjectWork, project: Project, body: LabelIn,
                plan: Planned) -> LiveLabel:
    """Store the label and the lines it decided; the label as the state now holds it."""
    state, session = work.state, work.session
    project.version += 1
    label = AssertedLabel(project_id=project.id, a_id=plan.a_id, b_id=plan.b_id,
                          positive=body.positive, annotator=body.annotator, created_at=utcnow(),
                          version=project.version)
    session.add(label)
    session.flush()
    # decided before: the label whose effect holds the pair stays its cause
    label.caused_by = cause_in_store(session, state.closure, project.id, plan.a_id,
                                     plan.b_id, body.positive) if plan.was_decided else label.id
    write_effects(session, project.id, [(label.id, plan.update)], state.closure.concepts)
    release(session, state, [(plan.a_id, plan.b_id)])
    state.remember_label(label)
    return state.labels[(plan.a_id, plan.b_id)]


def resolve_bulk(state: ProjectState, labels: list[LabelIn]) -> list[tuple[int, int]]:
    """The concept ids of every label's pair; every offending item listed in a 422."""
    unknown: list[str] = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(labels):
        problem = pair_problem(state.id_of, item.a, item.b)
        if problem is not None:
            unknown.extend(problem.unknown)
            errors.append({"index": index, "a": item.a, "b": item.b, "reason": problem.reason})
    if unknown:
        raise UnknownConcepts(unknown, errors)
    if errors:
        raise InvalidItems(errors, "labels")
    return [(state.id_of[item.a], state.id_of[item.b]) for item in labels]
