"""The next questions to ask (``GET .../next``) and the concept map (``GET .../predictions``).

Questions come from the strategies of :mod:`reasoning.strategies`, only ever among the
undecided pool pairs that no other annotator holds a lease on. With an annotator, the returned
pairs are reserved for a lease; a label on a pair, or the lease's end, releases it. Every
suggestion is logged.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, aliased

from app.db import write_transaction
from app.errors import UnknownStrategy
from app.services.learning import pool_predictions, strategy_model
from app.services.projects import get_project
from app.services.state import ProjectState, StateRegistry, catch_up
from models import Concept, PoolPair, Reservation, Suggestion, utcnow
from reasoning.strategies import parse_strategy
from reasoning.strategies import select as select_rows

__all__ = ["list_suggestions", "next_queries", "parse", "predictions"]


def parse(text: str) -> str:
    """The canonical strategy name; :class:`UnknownStrategy` (422) otherwise."""
    try:
        return parse_strategy(text)
    except ValueError as exc:
        raise UnknownStrategy(str(exc)) from None


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _reserved_rows(session: Session, state: ProjectState, annotator: str | None) -> np.ndarray:
    """Pool rows leased to someone else (expired leases and the caller's own are dropped)."""
    now = utcnow()
    pid = state.project_id
    session.execute(delete(Reservation).where(Reservation.project_id == pid,
                                              Reservation.expires_at <= now))
    if annotator is not None:  # a new request replaces the annotator's earlier leases
        session.execute(delete(Reservation).where(Reservation.project_id == pid,
                                                  Reservation.annotator == annotator))
    reserved = np.zeros(state.n_pool, dtype=bool)
    row_of = {pair_id: row for row, pair_id in enumerate(state.pair_ids)}
    for pair_id in session.scalars(select(Reservation.pair_id)
                                   .where(Reservation.project_id == pid)):
        row = row_of.get(pair_id)
        if row is not None:
            reserved[row] = True
    return reserved


def next_queries(session: Session, registry: StateRegistry, project_id: int, strategy: str,
                 k: int, annotator: str | None, lease_seconds: float) -> dict[str, Any]:
    """Up to ``k`` questions, best first, by ``strategy``; reserve them for ``annotator``."""
    strategy = parse(strategy)
    # Train (if the labels changed) outside the database write lock...
    with registry.locked(project_id) as state:
        catch_up(session, state, get_project(session, project_id))
        strategy_model(state, strategy)
    # ...then choose and reserve inside it. Labels that arrived in between are in the closure
    # (only undecided pairs are asked); the model may be one of them behind, and says so.
    with registry.locked(project_id) as state, \
            write_transaction(session, project_id) as project:
        assert project is not None
        catch_up(session, state, project)
        return _choose(session, state, strategy, k, annotator, lease_seconds)


def _choose(session: Session, state: ProjectState, strategy: str, k: int,
            annotator: str | None, lease_seconds: float) -> dict[str, Any]:
    model, info = strategy_model(state, strategy, allow_stale=True)
    values = state.pool_values()
    undecided = values < 0
    candidates = undecided & ~_reserved_rows(session, state, annotator)
    queries: list[dict[str, Any]] = []
    reserved_until = None
    if candidates.any():
        pool, X = state.pool_arrays()
        chosen = select_rows(strategy, closure=state.closure, pool=pool, X=X,
                             candidates=candidates, model=model, k=k,
                             random_state=state.version)
        now = utcnow()
        name = state.name_of
        log = []
        for position, row in enumerate(chosen.rows.tolist()):
            a_id, b_id = state.pair_concepts[row]
            gp = None if chosen.gain_positive is None else chosen.gain_positive[position]
            gn = None if chosen.gain_negative is None else chosen.gain_negative[position]
            query = {"a": name[a_id], "b": name[b_id],
                     "score": _finite(chosen.scores[position]),
                     "gain_if_positive": _finite(gp), "gain_if_negative": _finite(gn)}
            queries.append(query)
            log.append({"project_id": state.project_id, "pair_id": state.pair_ids[row],
                        "strategy": strategy, "score": query["score"],
                        "gain_positive": query["gain_if_positive"],
                        "gain_negative": query["gain_if_negative"], "annotator": annotator,
                        "version": state.version, "created_at": now})
        if log:
            session.execute(insert(Suggestion), log)
        if annotator is not None and log:
            reserved_until = now + timedelta(seconds=lease_seconds)
            session.execute(insert(Reservation), [
                {"project_id": state.project_id, "pair_id": entry["pair_id"],
                 "annotator": annotator, "created_at": now, "expires_at": reserved_until}
                for entry in log])
    return {"queries": queries, "undecided": int(undecided.sum()), "strategy": strategy,
            "model": info, "annotator": annotator, "reserved_until": reserved_until}


def predictions(session: Session, registry: StateRegistry, project_id: int, *, limit: int,
                offset: int, min_probability: float | None) -> dict[str, Any]:
    """Every pool pair: its label when decided, else the prediction model's probability."""
    with registry.locked(project_id) as state:
        project = get_project(session, project_id)
        catch_up(session, state, project)
        kind = project.prediction_model
    session.rollback()  # no transaction stays open while the forest trains
    result = pool_predictions(registry, state, kind)
    names, pairs, values = state.name_of, result.pairs, result.values
    probability = np.where(values == 1, 1.0, np.where(values == 0, 0.0, np.nan))
    if result.probabilities is not None:
        undecided = values < 0
        probability[undecided] = result.probabilities[:len(values)][undecided]
    keep = np.ones(len(values), dtype=bool)
    if min_probability is not None:
        keep = ~np.isnan(probability) & (probability >= min_probability)
    rows = np.flatnonzero(keep)
    page = rows[offset:offset + limit]
    items = []
    for row in page.tolist():
        a_id, b_id = pairs[row]
        value = int(values[row])
        if value >= 0:
            source = "asserted" if (a_id, b_id) in result.asserted else "inferred"
            label = "positive" if value == 1 else "negative"
        else:
            source, label = "predicted", None
        p = probability[row]
        items.append({"a": names[a_id], "b": names[b_id], "label": label, "source": source,
                      "probability": None if np.isnan(p) else float(p)})
    return {"items": items, "total": int(len(rows)), "model": result.info}


def list_suggestions(session: Session, project_id: int, *, annotator: str | None, limit: int,
                     offset: int) -> tuple[list[dict[str, Any]], int]:
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
    items = [{"id": s.id, "a": a_name, "b": b_name, "strategy": s.strategy, "score": s.score,
              "gain_if_positive": s.gain_positive, "gain_if_negative": s.gain_negative,
              "annotator": s.annotator, "version": s.version, "created_at": s.created_at}
             for s, a_name, b_name in rows]
    return items, total
