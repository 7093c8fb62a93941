"""The pool: register candidate pairs with their features, list them, suggest them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import aliased

from app.errors import InvalidItems, UnknownConcepts
from app.schemas import PairIn, PairPage, PairRead, PairsCreated, label_value
from app.services.corpus import FEATURE_LENGTH, computed_features, statistics
from app.services.labels.proofs import pair_problem
from app.services.state import ProjectState, encode_features, load_rows
from app.services.unit import ProjectView, ProjectWork
from models import Concept, PoolPair, Project
from reasoning.pool import suggest_pairs

__all__ = ["add_pairs", "list_pairs", "suggest_pool"]


def _check(state: ProjectState, pairs: list[PairIn], feature_length: int,
           computed: bool) -> tuple[list[dict[str, Any]], list[str], list[int], int]:
    """Every offending item, the unknown names, the rows to insert and the unchanged count.

    In a ``computed`` project a pair comes without features; in the others with them.
    """
    errors: list[dict[str, Any]] = []
    unknown: list[str] = []
    new_rows: list[int] = []
    unchanged = 0
    seen: dict[tuple[int, int], np.ndarray] = {}

    def fail(index: int, pair: PairIn, reason: str) -> None:
        errors.append({"index": index, "a": pair.a, "b": pair.b, "reason": reason})

    for index, pair in enumerate(pairs):
        problem = pair_problem(state.id_of, pair.a, pair.b, "pair")
        if problem is not None:
            unknown.extend(problem.unknown)
            fail(index, pair, problem.reason)
            continue
        key = (state.id_of[pair.a], state.id_of[pair.b])
        if computed or pair.features is None:
            if not computed:
                fail(index, pair, "the project's pairs come with features (its features are "
                                  "not computed)")
            elif pair.features is not None:
                fail(index, pair, "the project's features are computed from texts and links: "
                                  "send the pair without features")
            elif key in state.pool.row_of or key in seen:
                unchanged += 1
            else:
                seen[key] = np.zeros(0)
                new_rows.append(index)
            continue
        if len(pair.features) != feature_length:
            fail(index, pair, f"{len(pair.features)} features, the project has {feature_length}")
            continue
        features = np.asarray(pair.features, dtype=np.float64)
        row = state.pool.row_of.get(key)
        known = state.pool.features[row] if row is not None else seen.get(key)
        if known is not None:
            if not np.array_equal(known, features):
                fail(index, pair, "already registered with other features")
            elif row is not None or key in seen:
                unchanged += 1
            continue
        seen[key] = features
        new_rows.append(index)
    return errors, unknown, new_rows, unchanged


@dataclass(frozen=True)
class _Plan:
    rows: list[int]
    unchanged: int
    feature_length: int | None
    computed: bool
    features: np.ndarray | None  # computed features of ``rows``


def add_pairs(work: ProjectWork, pairs: list[PairIn]) -> PairsCreated:
    """Register pool pairs, all or nothing.

    A project's first pairs sent without features make it a *computed* project: sporal
    computes every pair's features from the concept texts and links (app.services.corpus).

    Raises :class:`UnknownConcepts` or :class:`InvalidItems` naming every offending item;
    nothing is stored then.
    """

    def compute(work: ProjectWork) -> _Plan:
        project = work.project
        if not pairs:
            return _Plan([], 0, project.feature_length, project.features_computed, None)
        computed = project.features_computed or (
            project.feature_length is None and pairs[0].features is None)
        first = pairs[0].features
        feature_length = project.feature_length or (
            FEATURE_LENGTH if computed or first is None else len(first))
        errors, unknown, new_rows, unchanged = _check(work.state, pairs, feature_length,
                                                      computed)
        if unknown:
            raise UnknownConcepts(unknown, errors)
        if errors:
            raise InvalidItems(errors, "pairs")
        features = None
        if computed and new_rows:
            state = work.state
            features = computed_features(work.session, state, project, np.array(
                [(state.id_of[pairs[i].a], state.id_of[pairs[i].b]) for i in new_rows],
                dtype=np.int64))
        return _Plan(new_rows, unchanged, feature_length, computed, features)

    def store(work: ProjectWork, project: Project, plan: _Plan) -> PairsCreated:
        new_rows, unchanged, feature_length = plan.rows, plan.unchanged, plan.feature_length
        state, session = work.state, work.session
        if new_rows:
            session.execute(insert(PoolPair), [
                {"project_id": project.id, "a_id": state.id_of[pairs[i].a],
                 "b_id": state.id_of[pairs[i].b],
                 "features": encode_features(plan.features[k] if plan.features is not None
                                             else pairs[i].features or [])}
                for k, i in enumerate(new_rows)
            ])
            project.feature_length = feature_length
            project.features_computed = plan.computed
            project.version += 1
            session.flush()
            state.feature_length = feature_length
            load_rows(session, state)
        return PairsCreated(created=len(new_rows), unchanged=unchanged,
                            feature_length=project.feature_length)

    return work.write(compute, store)


def suggest_pool(work: ProjectWork, per_concept: int,
                 register: bool) -> tuple[list[tuple[str, str, float, int | None]], int]:
    """Pairs worth a place in the pool (:func:`reasoning.pool.suggest_pairs`), not in it yet.

    Returns ``(a, b, similarity, link distance or None)`` per pair, and how many were
    registered (with ``register``, through :func:`add_pairs`: the project's
    features must be computed, or its pool still empty).
    """
    state = work.state
    ids, stats = statistics(work.session, state, work.project)
    suggested = suggest_pairs(stats, per_concept)
    work.session.rollback()  # no read transaction held while the pairs are registered
    name = state.name_of
    items = []
    for (i, j), similarity, distance in zip(suggested.pairs.tolist(),
                                            suggested.similarity.tolist(),
                                            suggested.distance.tolist(), strict=True):
        a, b = ids[i], ids[j]
        if (a, b) not in state.pool.row_of:
            items.append((name[a], name[b], similarity, None if distance < 0 else distance))
    if not register or not items:
        return items, 0
    if not work.project.features_computed and len(state.pool):
        raise InvalidItems([{"reason": "register=true needs a project whose features are "
                                       "computed (its pool pairs come without features)"}],
                           "requests")
    created = add_pairs(work, [PairIn(a=a, b=b) for a, b, _, _ in items])
    return items, created.created


def list_pairs(view: ProjectView, limit: int, offset: int) -> PairPage:
    """A page of the pool in registration order, with each pair's current status."""
    a, b = aliased(Concept), aliased(Concept)
    session, state = view.session, view.state
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
            "undecided" if value is None else label_value(value))
        items.append(PairRead(id=pair_id, a=a_name, b=b_name,
                              features=np.frombuffer(blob, dtype="<f8").tolist(), status=status))
    return PairPage(items=items, total=total)
