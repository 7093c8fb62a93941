"""Which question a team member gets next in a ``consensus`` project (``GET .../next``).

Besides new pairs (the strategy's choice), ``next`` asks, in this order:

1. ``disagreement``: a link of an open disagreement that this annotator has not answered (the
   disputed pair, or for a pair whose answers gave way, a label of the proof that overrules
   them), the least settled first;
2. ``second-opinion``: the asserted pair whose value of information, P(wrong) × pairs at stake,
   is greatest, when it reaches :data:`SECOND_OPINION_VALUE`. P(wrong) comes from the
   accuracies of the annotators who answered it (the last consensus fit) and the model's
   probability (:func:`reasoning.consensus.p_wrong`, Bayes over the answers); the stake is the
   pairs the label decided (its stored closure effect);
3. a *check question* with probability :data:`CHECK_RATE` (one in twenty; seeded per project,
   annotator and label count): a pool pair decided positive only through two or more steps
   (:func:`reasoning.consensus.check_candidates`). Its reason says ``new``; which pair was
   served to whom is kept (:class:`models.CheckQuestion`) so that the answer is marked.

Never a pair the annotator already answered (anonymous answers count as one annotator).
:func:`team_question` builds the inputs and calls the one choosing function; the simulation's
policy object takes the same inputs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from sqlalchemy import func, select

from app.services.labels.consensus import core_answers, last_fit, live_answers
from app.services.unit import ProjectWork
from models import ClosureEffect, Disagreement
from reasoning.closure import Closure
from reasoning.consensus import Answer, Consensus, check_candidates

__all__ = ["CHECK_RATE", "SECOND_OPINION_VALUE", "TeamPick", "team_question"]

CHECK_RATE = 0.05
"""The share of questions that are check questions (one in twenty)."""

SECOND_OPINION_VALUE = 0.5
"""The least value of information, P(wrong) × pairs at stake, worth a second opinion."""

Pair = tuple[Hashable, Hashable]


@dataclass(frozen=True)
class TeamPick:
    """The pair to ask (concept ids), why, and whether it is a check question."""

    a: int
    b: int
    reason: str
    check: bool = False


@dataclass
class _TeamView:
    """What the team answered, as the choosing function reads it."""

    result: Consensus
    closure: Closure
    answers: Mapping[Pair, list[Answer]]
    pool: Collection[Pair]
    disputed: list[Pair]
    proba: Mapping[Pair, float] = field(default_factory=dict)
    stake: Mapping[Pair, int] = field(default_factory=dict)

    def answered(self, pair: Pair, annotator: str | None) -> bool:
        return any(ans.annotator == annotator and not ans.reviewer
                   for ans in self.answers.get(pair, ()))


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def _p_wrong(view: _TeamView, pair: Pair, value: bool) -> float:
    """P(the asserted value of ``pair`` is wrong): Bayes over its answers and the model."""
    odds = _logit(view.proba.get(pair, 0.5)) * (1 if value else -1)
    for ans in view.answers.get(pair, ()):
        if ans.reviewer:
            return 0.0
        acc = min(max(view.result.accuracy.get(ans.annotator, 0.9), 0.5), 0.995)
        odds += _logit(acc) * (1 if ans.positive == value else -1)
    return 1.0 / (1.0 + math.exp(min(odds, 700.0)))


def _disagreement(view: _TeamView, annotator: str | None) -> Pair | None:
    best: tuple[float, int] | None = None
    chosen = None
    for pair in view.disputed:
        links = [pair]
        if pair not in view.result.labels:  # it gave way: the proof's labels overrule it
            proof = view.closure.proof(*pair)
            links += [(lab.a, lab.b) for lab in proof.labels] if proof is not None else []
        for link in links:
            if view.answered(link, annotator):
                continue
            key = (abs(view.result.confidence.get(link, 0.5) - 0.5), -view.stake.get(link, 1))
            if best is None or key < best:
                best, chosen = key, link
    return chosen


def _second_opinion(view: _TeamView, annotator: str | None) -> Pair | None:
    best, chosen = SECOND_OPINION_VALUE, None
    disputed = set(view.disputed)
    for pair, value in view.closure.asserted.items():
        if pair in disputed or view.answered(pair, annotator):
            continue
        score = _p_wrong(view, pair, value) * view.stake.get(pair, 1)
        if score >= best:
            best, chosen = score, pair
    return chosen


def _check(view: _TeamView, annotator: str | None, draw: float) -> Pair | None:
    candidates = [p for p in check_candidates(view.closure, view.answers)
                  if p in view.pool and not view.answered(p, annotator)]
    if not candidates:
        return None
    return candidates[min(int(draw * len(candidates)), len(candidates) - 1)]


def _ids(pair: Pair) -> tuple[int, int]:
    """A pair of the service's keys (concept ids)."""
    return cast(tuple[int, int], pair)


def _choose(view: _TeamView, annotator: str | None, *, draw: float,
            new_pair: Callable[[], Pair | None] = lambda: None) -> TeamPick | None:
    """The next question of ``annotator`` (module docstring), or None: a new pair."""
    found = _disagreement(view, annotator)
    if found is not None:
        return TeamPick(*_ids(found), "disagreement")
    found = _second_opinion(view, annotator)
    if found is not None:
        return TeamPick(*_ids(found), "second-opinion")
    if draw < CHECK_RATE:
        found = _check(view, annotator, draw / CHECK_RATE)
        if found is not None:
            return TeamPick(*_ids(found), "new", check=True)
    return None


def _stake(work: ProjectWork) -> dict[Pair, int]:
    """Per asserted pair, the pairs its label decided (its stored closure effect)."""
    state = work.state
    counts = dict(work.session.execute(
        select(ClosureEffect.label_id, func.sum(ClosureEffect.count))
        .where(ClosureEffect.project_id == state.project_id)
        .group_by(ClosureEffect.label_id)).all())
    return {pair: int(counts.get(live.id) or 1) for pair, live in state.labels.items()}


def team_question(work: ProjectWork, annotator: str | None, proba: np.ndarray | None
                  ) -> tuple[TeamPick | None, set[tuple[int, int]]]:
    """The team's question for ``annotator`` (a disagreement link, a second opinion or a
    check; None: the strategy's new pair), and the pairs ``annotator`` answered (never asked
    again). ``proba``: the model's P(positive) per pool row."""
    state = work.state
    rows = live_answers(work.session, state.project_id)
    answers: dict[Pair, list[Answer]] = {}
    for ans in core_answers(rows):
        answers.setdefault((ans.a, ans.b), []).append(ans)
    disputed: list[Pair] = [(a, b) for a, b in work.session.execute(
        select(Disagreement.a_id, Disagreement.b_id).where(
            Disagreement.project_id == state.project_id, Disagreement.closed_at.is_(None))
        .order_by(Disagreement.id))]
    pool = state.pool.row_of
    model: dict[Pair, float] = {}
    if proba is not None:
        model = {pair: float(proba[row]) for pair, row in pool.items() if pair in answers}
    view = _TeamView(last_fit(state, rows), state.closure, answers, pool, disputed, model,
                     _stake(work))
    draw = random.Random(f"{state.project_id}:{annotator}:{state.label_events}").random()
    mine = {(r.a_id, r.b_id) for r in rows if r.annotator == annotator and not r.reviewer}
    return _choose(view, annotator, draw=draw), mine
