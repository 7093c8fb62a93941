"""The pool: register candidate pairs with their features, list them."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session, aliased

from app.db import write_transaction
from app.errors import InvalidItems, UnknownConcepts
from app.schemas import PairIn, PairRead
from app.services.state import ProjectState, StateRegistry, catch_up, encode_features
from models import Concept, PoolPair

__all__ = ["add_pairs", "list_pairs"]


def _check(state: ProjectState, pairs: list[PairIn],
           feature_length: int) -> tuple[list[dict[str, Any]], list[str], list[int], int]:
    """Every offending item, the unknown names, the rows to insert and the unchanged count."""
    errors: list[dict[str, Any]] = []
    unknown: list[str] = []
    new_rows: list[int] = []
    unchanged = 0
    seen: dict[tuple[int, int], np.ndarray] = {}

    def fail(index: int, pair: PairIn, reason: str) -> None:
        errors.append({"index": index, "a": pair.a, "b": pair.b, "reason": reason})

    for index, pair in enumerate(pairs):
        missing = [name for name in (pair.a, pair.b) if name not in state.id_of]
        if missing:
            unknown.extend(missing)
            fail(index, pair, "unknown concept " + ", ".join(repr(m) for m in missing))
            continue
        key = (state.id_of[pair.a], state.id_of[pair.b])
        if key[0] == key[1]:
            fail(index, pair, "a pair needs two different concepts")
            continue
        if len(pair.features) != feature_length:
            fail(index, pair, f"{len(pair.features)} features, the project has {feature_length}")
            continue
        features = np.asarray(pair.features, dtype=np.float64)
        row = state.pool_row.get(key)
        known = state.pair_features[row] if row is not None else seen.get(key)
        if known is not None:
            if not np.array_equal(known, features):
                fail(index, pair, "already registered with other features")
            elif row is not None or key in seen:
                unchanged += 1
            continue
        seen[key] = features
        new_rows.append(index)
    return errors, unknown, new_rows, unchanged


def add_pairs(session: Session, registry: StateRegistry, project_id: int,
              pairs: list[PairIn]) -> tuple[int, int, int | None]:
    """Register pool pairs, all or nothing.

    Returns ``(created, unchanged, feature_length)``. Raises :class:`UnknownConcepts` or
    :class:`InvalidItems` naming every offending item; nothing is stored then.
    """
    with registry.locked(project_id) as state, \
            write_transaction(session, project_id) as project:
        assert project is not None
        catch_up(session, state, project)
        if not pairs:
            return 0, 0, project.feature_length
        feature_length = project.feature_length or len(pairs[0].features)
        errors, unknown, new_rows, unchanged = _check(state, pairs, feature_length)
        if unknown:
            raise UnknownConcepts(unknown, errors)
        if errors:
            raise InvalidItems(errors, "pairs")
        if new_rows:
            session.execute(insert(PoolPair), [
                {"project_id": project_id, "a_id": state.id_of[pairs[i].a],
                 "b_id": state.id_of[pairs[i].b], "features": encode_features(pairs[i].features)}
                for i in new_rows
            ])
            project.feature_length = feature_length
            project.version += 1
            session.flush()
            catch_up(session, state, project)
        return len(new_rows), unchanged, project.feature_length


def list_pairs(session: Session, state: ProjectState, limit: int,
               offset: int) -> tuple[list[PairRead], int]:
    """A page of the pool in registration order, with each pair's current status."""
    a, b = aliased(Concept), aliased(Concept)
    pid = state.project_id
    total = session.scalar(
        select(func.count()).select_from(PoolPair).where(PoolPair.project_id == pid)
    ) or 0
    rows = session.execute(
        select(PoolPair.a_id, PoolPair.b_id, PoolPair.id, a.name, b.name, PoolPair.features)
        .join(a, a.id == PoolPair.a_id).join(b, b.id == PoolPair.b_id)
        .where(PoolPair.project_id == pid).order_by(PoolPair.id).limit(limit).offset(offset)
    ).all()
    closure = state.closure
    items = []
    for a_id, b_id, pair_id, a_name, b_name, blob in rows:
        value = closure.status(a_id, b_id).value if a_id in state.name_of and \
            b_id in state.name_of else None
        status: Literal["positive", "negative", "undecided"] = (
            "undecided" if value is None else "positive" if value else "negative")
        items.append(PairRead(id=pair_id, a=a_name, b=b_name,
                              features=np.frombuffer(blob, dtype="<f8").tolist(), status=status))
    return items, total
