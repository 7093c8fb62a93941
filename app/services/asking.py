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
open disagreements as the pairs in dispute, the model's probability of each answered pair when
``next`` served it as new (logged with its suggestion, :func:`remember_asked`) and, as the
stake of a label, the pool pairs its stored closure effect decided (as the simulation counts them).
Which pair was served to whom as a check is kept (:class:`models.CheckQuestion`) so that the
answer is marked.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, cast

import numpy as np
from sqlalchemy import select

from app.services.bitsets import decode
from app.services.team import (
    LiveAnswer,
    counting,
    excluded_annotators,
    last_fit,
    live_answers,
    reasked_pairs,
    votes,
)
from app.services.unit import ProjectView, ProjectWork
from models import ClosureEffect, Disagreement, Suggestion
from reasoning.consensus import Vote
from reasoning.consensus.asking import (
    CHECK_RATE,
    AskPolicy,
    TeamView,
    now_stake,
    resting_or_stake,
)

__all__ = ["CHECK_RATE", "TeamPick", "TeamQuestion", "answered", "check_draw", "configure",
           "remember_asked", "team_question", "team_view"]

Pair = tuple[Hashable, Hashable]
POLICY = AskPolicy(stake=now_stake)
"""The team's question policy: a label's stake is the pool pairs that rest on it alone now
(the simulation's ``--policy consensus-now``; docs/results/teams/budget.md)."""


def configure(check_rate: float) -> None:
    """Set the service's policy from its settings (``SPORAL_CHECK_RATE``), once at start; the
    default rate leaves the policy as it is."""
    global POLICY
    if check_rate != CHECK_RATE:
        POLICY = replace(POLICY, check_rate=check_rate)


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


def _pool_lines(work: ProjectView) -> tuple[dict[int, int], dict[int, int]]:
    """Per concept id, the pool pairs out of it and into it: bitsets over the closure's
    concept indices (the ordinals of the stored closure effects)."""
    closure = work.state.closure
    out: dict[int, int] = {}
    into: dict[int, int] = {}
    for a, b in work.state.pool.row_of:
        out[a] = out.get(a, 0) | 1 << closure.index(b)
        into[b] = into.get(b, 0) | 1 << closure.index(a)
    return out, into


def _stake(work: ProjectView) -> dict[Pair, int]:
    """Per asserted pair, the pool pairs at stake: the pool pairs its label decided (those in
    the lines of its stored closure effect), at least 1, as the simulation counts them; kept
    on the state until a label or a pool pair changes (the effects change with the labels)."""
    state = work.state
    mark = (state.label_events, len(state.pool))
    kept = state.team.stake
    if kept is not None and kept[0] == mark:
        return kept[1]
    out, into = _pool_lines(work)
    counts: dict[int, int] = {}
    for label_id, by_row, line, bits in work.session.execute(
            select(ClosureEffect.label_id, ClosureEffect.by_row, ClosureEffect.line_id,
                   ClosureEffect.bits).where(ClosureEffect.project_id == state.project_id)):
        mask = (out if by_row else into).get(line, 0)
        if mask:
            counts[label_id] = counts.get(label_id, 0) + (decode(bits) & mask).bit_count()
    stake: dict[Pair, int] = {pair: max(1, counts.get(live.id, 0))
                              for pair, live in state.labels.items()}
    state.team = replace(state.team, stake=(mark, stake))
    return stake


def _resting(work: ProjectView, stake: dict[Pair, int]) -> dict[Pair, int]:
    """Per asserted pair, the pool pairs that rest on its label alone now
    (:func:`reasoning.consensus.asking.resting_or_stake`: ``stake`` on a map too large for
    it), kept on the state until a label or a pool pair changes."""
    state = work.state
    mark = (state.label_events, len(state.pool))
    kept = state.team.resting
    if kept is not None and kept[0] == mark:
        return kept[1]
    rest = resting_or_stake(state.closure, state.pool.row_of, lambda: stake)
    state.team = replace(state.team, resting=(mark, rest))
    return rest


def check_draw(project_id: int, annotator: str | None, label_events: int) -> float:
    """The uniform number in [0, 1) that decides whether ``annotator``'s next question is a
    check question (:meth:`AskPolicy.choose`): fixed by the project, the annotator and the
    labels so far, so that asking again gives the same question (a test replaying a
    simulated team puts the simulation's draws here)."""
    return random.Random(f"{project_id}:{annotator}:{label_events}").random()


def remember_asked(work: ProjectWork, rows: np.ndarray, proba: np.ndarray | None
                   ) -> list[float | None]:
    """The model's P(positive) of the pool ``rows`` served as new pairs now, before any answer
    on them, logged with their suggestions (:attr:`models.Suggestion.p_positive`, in the write
    that logs them: nothing more is written): the model term of their P(wrong) once answered
    (the simulation keeps the probability of the model that chose the pair; the model of the
    moment was trained on the answer and only echoes it). None for each without a model (or
    without a finite probability).
    What this process read of those pairs before is forgotten: a pair served new again (its
    label retracted) is read anew once answered."""
    asked = work.state.team.asked
    concepts = work.state.pool.concepts
    for row in rows.tolist():
        a, b = concepts[row].tolist()
        asked.pop((a, b), None)
    if proba is None:
        return [None] * len(rows)
    return [p if math.isfinite(p := float(proba[row])) else None for row in rows.tolist()]


_CHUNK = 500  # pool pair ids per look-up (within every database's parameter limit)


def _asked(view: ProjectView, pairs: Sequence[tuple[int, int]]
           ) -> dict[tuple[int, int], float | None]:
    """Per answered pair, the model's P(positive) when ``next`` last served it new (None:
    never served new with a model), read through the state's :attr:`TeamCache.asked` from
    the suggestions log: a pair's probability is logged before any answer on it, so that once
    it is answered what is stored is final and read once per state."""
    state = view.state
    asked = state.team.asked
    missing = [pair for pair in pairs if pair not in asked]
    if not missing:
        return asked
    row_of, ids = state.pool.row_of, state.pool.ids
    by_id = {int(ids[row]): pair for pair in missing if (row := row_of.get(pair)) is not None}
    found: dict[tuple[int, int], float | None] = dict.fromkeys(missing)
    keys = sorted(by_id)
    for start in range(0, len(keys), _CHUNK):
        for pair_id, p in view.session.execute(
                select(Suggestion.pair_id, Suggestion.p_positive)
                .where(Suggestion.pair_id.in_(keys[start:start + _CHUNK]),
                       Suggestion.p_positive.is_not(None))
                .order_by(Suggestion.id)):
            found[by_id[pair_id]] = p  # the last served wins
    asked.update(found)
    return asked


def answered(view: ProjectView, rows: Sequence[LiveAnswer]
             ) -> tuple[dict[Pair, list[Vote]], dict[Pair, float]]:
    """The answers that count (``rows``) per pair, and each answered pair's model probability
    when ``next`` last served it new (:func:`remember_asked`, as stored): what P(wrong)
    reads, the same in every process and after a restart."""
    answers: dict[Pair, list[Vote]] = {}
    for ans in votes(rows):
        answers.setdefault((ans.a, ans.b), []).append(ans)
    asked = cast(dict[Pair, float | None],
                 _asked(view, cast(list[tuple[int, int]], list(answers))))
    return answers, {pair: p for pair in answers if (p := asked[pair]) is not None}


def team_view(work: ProjectView, rows: Sequence[LiveAnswer]) -> TeamView:
    """The policy's view of the team from the answers that count (``rows``): the accuracies
    of the last full consensus event with the labels and closure as asserted now, the open
    disagreements, the model's probability of each answered pair when it was served new, the
    stakes and the re-asked pairs (module docstring)."""
    state = work.state
    answers, model = answered(work, rows)
    disputed: list[Pair] = [(a, b) for a, b in work.session.execute(
        select(Disagreement.a_id, Disagreement.b_id).where(
            Disagreement.project_id == state.project_id, Disagreement.closed_at.is_(None))
        .order_by(Disagreement.id))]
    result = replace(last_fit(state, rows), labels=dict(state.closure.asserted),
                     closure=state.closure,
                     contested={pair: answers.get(pair, []) for pair in disputed})
    stake = _stake(work)
    return TeamView(result, answers, state.pool.row_of, model, stake,
                    reask=reasked_pairs(work.session, state.project_id, rows),
                    rest=_resting(work, stake))


def team_question(work: ProjectWork, annotator: str | None, proba: np.ndarray | None
                  ) -> TeamQuestion:
    """The team's question for ``annotator`` (a disagreement link, a second opinion or a
    check; None: the strategy's new pair), and the pairs ``annotator`` answered (never asked
    again). ``proba``: the model's P(positive) per pool row, now (unused: the model term of
    P(wrong) is the probability a pair had when served new, :func:`remember_asked`)."""
    state = work.state
    live = live_answers(work.session, state.project_id)
    excluded = excluded_annotators(work.session, state.project_id)
    mine = {(r.a_id, r.b_id) for r in live if r.annotator == annotator and not r.reviewer}
    if annotator is not None and annotator in excluded:
        return TeamQuestion(None, mine)  # their answers do not count: no team question
    view = team_view(work, counting(live, excluded))
    draw = check_draw(state.project_id, annotator, state.label_events)
    choice = POLICY.choose(view, annotator, draw=draw)
    if choice is None:
        return TeamQuestion(None, mine)
    a, b = cast(tuple[int, int], (choice.a, choice.b))
    return TeamQuestion(TeamPick(a, b, choice.reason, choice.check), mine)
