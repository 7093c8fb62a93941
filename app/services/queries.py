"""The next questions to ask (``GET .../next``) and the concept map (``GET .../predictions``).

Questions come from the strategies of :mod:`reasoning.strategies`, only ever among the
undecided pool pairs that no other annotator holds a lease on, scored with the newest model
the trainer has (:mod:`app.services.training`; no request trains one). With an annotator, the
returned pairs are reserved for a lease; a label on a pair, or the lease's end, releases it.
Every suggestion is logged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, aliased

from app.errors import UnknownStrategy
from app.schemas import (
    ModelInfo,
    NextQueries,
    PredictionItem,
    PredictionPage,
    Query,
    QueryReason,
    SuggestionItem,
    label_value,
)
from app.services.asking import TeamPick, remember_asked
from app.services.labels.policy import policy_of
from app.services.training import TrainedModel, prediction_key, strategy_key
from app.services.unit import ProjectView, ProjectWork
from models import CheckQuestion, Concept, PoolPair, Reservation, Suggestion, utcnow
from reasoning.strategies import ModelOutputs, Scores, Strategy, get_strategy
from reasoning.strategies import select as select_rows

__all__ = ["list_suggestions", "next_queries", "parse", "prediction_of", "prediction_outputs",
           "predictions"]


def parse(text: str) -> Strategy:
    """The strategy ``text`` names; :class:`UnknownStrategy` (422) otherwise."""
    try:
        return get_strategy(text)
    except ValueError as exc:
        raise UnknownStrategy(str(exc)) from None


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _model_info(view: ProjectView, model: TrainedModel | None) -> ModelInfo | None:
    info = model.info(view.state) if model is not None else None
    return ModelInfo.model_validate(info) if info is not None else None


def _leased_elsewhere(session: Session, view: ProjectView, annotator: str | None,
                      now: datetime) -> set[int]:
    """Pool pair ids leased, now, to annotators other than ``annotator``."""
    query = select(Reservation.pair_id).where(Reservation.project_id == view.state.project_id,
                                              Reservation.expires_at > now)
    if annotator is not None:
        query = query.where(Reservation.annotator != annotator)
    return set(session.scalars(query))


@dataclass(frozen=True)
class _Team:
    """The team's question (consensus): its pick and its pool pair id (None: not a pool
    pair, asked but neither logged nor leased)."""

    pick: TeamPick
    pair_id: int | None


@dataclass(frozen=True)
class _Choice:
    selection: Scores | None
    pair_ids: list[int]  # the team's pool pair first, then the strategy's
    undecided: int
    model: TrainedModel | None
    team: _Team | None = None
    asked: tuple[float | None, ...] = ()  # the model's P(positive) of the strategy's pairs


def _team(work: ProjectWork, annotator: str | None, outputs: Any, leased: set[int],
          undecided: np.ndarray) -> tuple[_Team | None, np.ndarray]:
    """In consensus, the team's question (:mod:`app.services.asking`) and the candidate new
    pairs: undecided, not leased to others, never one ``annotator`` answered. In strict, no
    team question, and every undecided pair not leased to others."""
    state = work.state
    candidates = undecided.copy()
    if leased:
        candidates &= ~np.isin(state.pool.ids, np.fromiter(leased, dtype=np.int64))
    proba = outputs.proba if outputs is not None else None
    question = policy_of(work.project).team_question(work, annotator, proba)
    if question is None:
        return None, candidates
    pick, mine = question
    row_of = state.pool.row_of
    for pair in mine:
        row = row_of.get(pair)
        if row is not None:
            candidates[row] = False
    if pick is None:
        return None, candidates
    row = row_of.get((pick.a, pick.b))
    pair_id = int(state.pool.ids[row]) if row is not None else None
    if pair_id is not None and pair_id in leased:
        return None, candidates
    if row is not None:
        candidates[row] = False
    return _Team(pick, pair_id), candidates


def next_queries(work: ProjectWork, strategy: Strategy, k: int, annotator: str | None,
                 lease_seconds: float, *, fresh: bool = False) -> NextQueries:
    """Up to ``k`` questions, best first, by ``strategy``; reserve them for ``annotator``.

    The questions are chosen on the cached state (no database lock held); the write
    transaction then checks that no other annotator leased them meanwhile (else they are
    chosen again), logs them and reserves them.
    """
    key = strategy_key(strategy)
    if key is not None:
        work.model(key, fresh=fresh)  # ask the trainer (and with fresh, wait) before choosing

    def compute(work: ProjectWork) -> _Choice:
        state = work.state
        model = work.trainer.want(state, key) if key is not None else None
        undecided = state.values < 0
        leased = _leased_elsewhere(work.session, work, annotator, utcnow())
        outputs = work.trainer.pool_outputs(state, model) if model is not None else None
        team, candidates = _team(work, annotator, outputs, leased, undecided)
        wanted = k - (team is not None)
        team_ids = [] if team is None or team.pair_id is None else [team.pair_id]
        if wanted <= 0 or not candidates.any():
            return _Choice(None, team_ids, int(undecided.sum()), model, team)
        chosen = select_rows(strategy, closure=state.closure, pool=state.pool_index(),
                             X=state.pool.X, candidates=candidates,
                             model=None, outputs=outputs, k=wanted,
                             random_state=state.label_events)
        asked = remember_asked(work, chosen.rows,
                               outputs.proba if outputs is not None else None)
        return _Choice(chosen, team_ids + [int(state.pool.ids[r]) for r in chosen.rows.tolist()],
                       int(undecided.sum()), model, team, tuple(asked))

    def store(work: ProjectWork, project: Any, choice: _Choice) -> NextQueries:
        return _reserve(work, choice, strategy.name, annotator, lease_seconds)

    return work.write(compute, store, holds=_not_leased_elsewhere(annotator))


def _not_leased_elsewhere(annotator: str | None) -> Callable[[ProjectWork, _Choice], bool]:
    """Whether no other annotator leased a chosen pair meanwhile (else they are chosen again)."""

    def holds(work: ProjectWork, choice: _Choice) -> bool:
        leased = _leased_elsewhere(work.session, work, annotator, utcnow())
        return not set(choice.pair_ids) & leased

    return holds


def _reserve(work: ProjectWork, choice: _Choice, strategy: str, annotator: str | None,
             lease_seconds: float) -> NextQueries:
    """Log the chosen questions and lease them to ``annotator`` (in the write transaction)."""
    session, state = work.session, work.state
    now = utcnow()
    pid = state.project_id
    session.execute(delete(Reservation).where(Reservation.project_id == pid,
                                              Reservation.expires_at <= now))
    if annotator is not None:  # a new request replaces the annotator's earlier leases
        session.execute(delete(Reservation).where(Reservation.project_id == pid,
                                                  Reservation.annotator == annotator))
    queries = _queries(work, choice)
    reserved_until = None
    logged = queries[1:] if choice.team is not None and choice.team.pair_id is None else queries
    if choice.team is not None and choice.team.pick.check:
        session.add(CheckQuestion(project_id=pid, a_id=choice.team.pick.a,
                                  b_id=choice.team.pick.b, annotator=annotator, created_at=now))
    if choice.pair_ids:
        asked = [None] * (len(choice.pair_ids) - len(choice.asked)) + list(choice.asked)
        session.execute(insert(Suggestion), [
            {"project_id": pid, "pair_id": pair_id, "strategy": strategy,
             "score": q.score, "gain_positive": q.gain_if_positive,
             "gain_negative": q.gain_if_negative, "annotator": annotator,
             "version": state.version, "created_at": now, "p_positive": p}
            for pair_id, q, p in zip(choice.pair_ids, logged, asked, strict=True)])
        if annotator is not None:
            reserved_until = now + timedelta(seconds=lease_seconds)
            session.execute(insert(Reservation), [
                {"project_id": pid, "pair_id": pair_id, "annotator": annotator,
                 "created_at": now, "expires_at": reserved_until}
                for pair_id in choice.pair_ids])
    return NextQueries(queries=queries, undecided=choice.undecided, strategy=strategy,
                       model=_model_info(work, choice.model), annotator=annotator,
                       reserved_until=reserved_until)


def _queries(view: ProjectView, choice: _Choice) -> list[Query]:
    chosen = choice.selection
    state, name = view.state, view.state.name_of
    queries = []
    if choice.team is not None:
        pick = choice.team.pick
        queries.append(Query(a=name[pick.a], b=name[pick.b], score=None, gain_if_positive=None,
                             gain_if_negative=None,
                             reason=cast(QueryReason, pick.reason)))
    if chosen is None:
        return queries
    for position, row in enumerate(chosen.rows.tolist()):
        a_id, b_id = state.pool.concepts[row].tolist()
        gp = None if chosen.gain_positive is None else chosen.gain_positive[position]
        gn = None if chosen.gain_negative is None else chosen.gain_negative[position]
        queries.append(Query(a=name[a_id], b=name[b_id], score=_finite(chosen.scores[position]),
                             gain_if_positive=_finite(gp), gain_if_negative=_finite(gn)))
    return queries


def prediction_outputs(view: ProjectView, *, fresh: bool = False
                       ) -> tuple[ModelOutputs | None, ModelInfo | None]:
    """The prediction model's outputs on every pool pair (None: no model yet)."""
    model = view.model(prediction_key(view.project.prediction_model), fresh=fresh)
    outputs = view.trainer.pool_outputs(view.state, model) if model is not None else None
    return outputs, _model_info(view, model)


def prediction_of(view: ProjectView, *, fresh: bool = False
                  ) -> tuple[np.ndarray | None, ModelInfo | None]:
    """The prediction model's ``p(positive)`` of every pool pair (None: no model yet)."""
    outputs, info = prediction_outputs(view, fresh=fresh)
    return (outputs.proba if outputs is not None else None), info


def predictions(view: ProjectView, *, limit: int, offset: int, min_probability: float | None,
                fresh: bool = False, consistent: bool = False) -> PredictionPage:
    """Every pool pair: its label when decided, else the prediction model's probability.

    With ``consistent`` (and a model), the undecided pairs are completed into a strict order
    (:mod:`app.services.predicted_map`).
    """
    proba, info = prediction_of(view, fresh=fresh)
    if consistent and proba is not None:
        from app.services.predicted_map import consistent_page

        return consistent_page(view, proba, info, limit=limit, offset=offset,
                               min_probability=min_probability)
    state = view.state
    values = state.values
    probability = np.where(values == 1, 1.0, np.where(values == 0, 0.0, np.nan))
    if proba is not None:
        undecided = values < 0
        probability[undecided] = proba[undecided]
    keep = np.ones(len(values), dtype=bool)
    if min_probability is not None:
        keep = ~np.isnan(probability) & (probability >= min_probability)
    rows = np.flatnonzero(keep)
    names, labels = state.name_of, state.labels
    items = []
    for row in rows[offset:offset + limit].tolist():
        a_id, b_id = state.pool.concepts[row].tolist()
        value = int(values[row])
        p = probability[row]
        items.append(PredictionItem(
            a=names[a_id], b=names[b_id],
            label=label_value(value == 1) if value >= 0 else None,
            source=("predicted" if value < 0 else
                    "asserted" if (a_id, b_id) in labels else "inferred"),
            probability=None if np.isnan(p) else float(p)))
    return PredictionPage(items=items, total=int(len(rows)), model=info)


def list_suggestions(session: Session, project_id: int, *, annotator: str | None, limit: int,
                     offset: int) -> tuple[list[SuggestionItem], int]:
    """The logged questions of a project, newest first (optionally one annotator's)."""
    where = [Suggestion.project_id == project_id]
    if annotator is not None:
        where.append(Suggestion.annotator == annotator)
    total = session.scalar(select(func.count()).select_from(Suggestion).where(*where)) or 0
    a, b = aliased(Concept), aliased(Concept)
    rows = session.execute(
        select(Suggestion, a.name, b.name)
        .join(PoolPair, PoolPair.id == Suggestion.pair_id)
        .join(a, a.id == PoolPair.a_id).join(b, b.id == PoolPair.b_id)
        .where(*where).order_by(Suggestion.id.desc()).limit(limit).offset(offset)
    ).all()
    items = [SuggestionItem(id=s.id, a=a_name, b=b_name, strategy=s.strategy, score=s.score,
                            gain_if_positive=s.gain_positive, gain_if_negative=s.gain_negative,
                            annotator=s.annotator, version=s.version, created_at=s.created_at)
             for s, a_name, b_name in rows]
    return items, total
