"""Which question a team member gets next in a ``consensus`` project (``GET .../next``).

The choice is :class:`reasoning.consensus.asking.AskPolicy`, the same object the simulation
runs (``sporal simulate --policy consensus``): a link of an open disagreement, then a second
opinion where its value of information (P(wrong) × pairs at stake) reaches the policy's
threshold, then now and then a *check question* (a pool pair decided positive only through
two or more steps, at ``CHECK_RATE``, one in twenty, until the annotator passed more checks
than they failed; its reason says ``new``), else the strategy's new pair. Never a pair the
annotator already answered (anonymous answers count as one annotator).

:func:`team_question` builds the policy's view from the service's state: the accuracies and
dispute of the last full consensus event (:func:`app.services.team.last_fit`), over the
answers that count (an excluded annotator's left out, and an excluded annotator gets no team
question), the pairs a lead re-asked (:func:`app.services.team.reasked_pairs`),
the labels and closure as asserted now (answers on the fast path since then included), the
open disagreements as the pairs in dispute, the model's probabilities and, as the stake of a
label, the pairs its stored closure effect decided. Which pair was served to whom as a check
is kept (:class:`models.CheckQuestion`) so that the answer is marked.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import NamedTuple, cast

import numpy as np
from sqlalchemy import func, select

from app.services.team import (
    counting,
    excluded_annotators,
    last_fit,
    live_answers,
    reasked_pairs,
    votes,
)
from app.services.unit import ProjectWork
from models import ClosureEffect, Disagreement
from reasoning.consensus import Vote
from reasoning.consensus.asking import CHECK_RATE, AskPolicy, TeamView

__all__ = ["CHECK_RATE", "TeamPick", "TeamQuestion", "team_question"]

Pair = tuple[Hashable, Hashable]
POLICY = AskPolicy()


@dataclass(frozen=True)
class TeamPick:
    """The pair to ask (concept ids), why, and whether it is a check question."""

    a: int
    b: int
    reason: str
    check: bool = False


class TeamQuestion(NamedTuple):
    """The team's question for an annotator (None: the strategy's new pair) and the pairs
    that annotator answered (never asked again)."""

    pick: TeamPick | None
    answered: set[tuple[int, int]]


def _stake(work: ProjectWork) -> dict[Pair, int]:
    """Per asserted pair, the pool pairs at stake: the pairs its label decided (its stored
    closure effect) times the pool's share of all ordered pairs, the expected number of pool
    pairs among them (the simulation counts the pool pairs an answer decided)."""
    state = work.state
    n = len(state.closure.concepts)
    share = len(state.pool.row_of) / (n * (n - 1)) if n > 1 else 0.0
    counts = dict(work.session.execute(
        select(ClosureEffect.label_id, func.sum(ClosureEffect.count))
        .where(ClosureEffect.project_id == state.project_id)
        .group_by(ClosureEffect.label_id)).all())
    return {pair: max(1, round(int(counts.get(live.id) or 1) * share))
            for pair, live in state.labels.items()}


def team_question(work: ProjectWork, annotator: str | None, proba: np.ndarray | None
                  ) -> TeamQuestion:
    """The team's question for ``annotator`` (a disagreement link, a second opinion or a
    check; None: the strategy's new pair), and the pairs ``annotator`` answered (never asked
    again). ``proba``: the model's P(positive) per pool row."""
    state = work.state
    live = live_answers(work.session, state.project_id)
    excluded = excluded_annotators(work.session, state.project_id)
    mine = {(r.a_id, r.b_id) for r in live if r.annotator == annotator and not r.reviewer}
    if annotator is not None and annotator in excluded:
        return TeamQuestion(None, mine)  # their answers do not count: no team question
    rows = counting(live, excluded)
    answers: dict[Pair, list[Vote]] = {}
    for ans in votes(rows):
        answers.setdefault((ans.a, ans.b), []).append(ans)
    disputed: list[Pair] = [(a, b) for a, b in work.session.execute(
        select(Disagreement.a_id, Disagreement.b_id).where(
            Disagreement.project_id == state.project_id, Disagreement.closed_at.is_(None))
        .order_by(Disagreement.id))]
    pool = state.pool.row_of
    model: dict[Pair, float] = {}
    if proba is not None:
        model = {pair: float(proba[row]) for pair, row in pool.items() if pair in answers}
    result = replace(last_fit(state, rows), labels=dict(state.closure.asserted),
                     closure=state.closure,
                     contested={pair: answers.get(pair, []) for pair in disputed})
    view = TeamView(result, answers, pool, model, _stake(work),
                    reask=reasked_pairs(work.session, state.project_id, rows))
    draw = random.Random(f"{state.project_id}:{annotator}:{state.label_events}").random()
    choice = POLICY.choose(view, annotator, draw=draw)
    if choice is None:
        return TeamQuestion(None, mine)
    a, b = cast(tuple[int, int], (choice.a, choice.b))
    return TeamQuestion(TeamPick(a, b, choice.reason, choice.check), mine)
