"""The in-memory reasoning state of each project: a cache of the database, kept in step.

The database is the source of truth. Each process keeps, per project, the closure of the live
asserted labels (concepts keyed by their database ids), the pool with its features, and the
models trained on them, stamped with the project's ``version``. Every request reads the
project row and brings the cache up to that version before answering: it loads the concepts and
pool pairs added since, and applies the labels asserted since its version; only after a
retraction (``retraction_version`` newer than the cache) is the closure rebuilt from scratch.
So several processes on one database answer alike.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.errors import ServiceError
from models import AssertedLabel, Concept, PoolPair, Project
from reasoning.closure import Closure, Label

__all__ = [
    "FEATURE_DTYPE",
    "MODEL_FEATURE_BOUND",
    "LiveLabel",
    "ProjectState",
    "StateRegistry",
    "catch_up",
    "decode_features",
    "encode_features",
    "warm_up",
]

FEATURE_DTYPE = np.dtype("<f8")

MODEL_FEATURE_BOUND = 1e30
"""Features are clipped to this magnitude before any classifier sees them.

Any finite float is accepted and stored as sent, but scikit-learn's trees work in float32
(largest about 3.4e38) and the scaler squares the values (1e200 squared overflows): beyond the
bound a model would fail on them. No real feature comes near it.
"""


def encode_features(values: np.ndarray | list[float]) -> bytes:
    """Features as stored: little-endian float64 bytes."""
    return np.asarray(values, dtype=FEATURE_DTYPE).tobytes()


def decode_features(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=FEATURE_DTYPE)


@dataclass(frozen=True)
class LiveLabel:
    """A live asserted label as the cache knows it."""

    id: int
    positive: bool
    annotator: str | None
    created_at: datetime


class ProjectState:
    """The cached reasoning state of one project (see the module docstring).

    ``version`` is -1 while the state is empty or was invalidated: the next catch-up rebuilds.
    Use it only while holding ``lock``.
    """

    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        self.lock = threading.RLock()
        self.training_lock = threading.Lock()
        self.closure_generation = 0
        self.invalidate()

    @property
    def closure(self) -> Closure:
        """The closure of the live asserted labels (grows in place as labels arrive)."""
        return self._closure

    @closure.setter
    def closure(self, closure: Closure) -> None:
        # A replaced closure (rebuild, retraction, bulk import) is another training set.
        self._closure = closure
        self.closure_generation += 1

    def training_key(self) -> tuple[int, int, int, int]:
        """Changes exactly when what a model is trained on may have changed.

        The decided pool pairs and their values are fixed by the closure (replaced, or grown
        in place: its size), the asserted labels (a label on an inferred pair decides nothing
        new but joins the asserted training set) and the pool. Concepts, names and settings are
        not in it: a new concept does not retrain a model.
        """
        return (self.closure_generation, len(self._closure), len(self.labels), self.n_pool)

    def invalidate(self) -> None:
        """Forget everything; the next :func:`catch_up` rebuilds from the database."""
        self.version = -1
        self.created_at: datetime | None = None
        self.feature_length: int | None = None
        self.closure = Closure()
        self.name_of: dict[int, str] = {}
        self.id_of: dict[str, int] = {}
        self.max_concept_id = 0
        self.pair_ids: list[int] = []
        self.pair_concepts: list[tuple[int, int]] = []
        self.pair_features: list[np.ndarray] = []
        self.pool_row: dict[tuple[int, int], int] = {}
        self.max_pair_id = 0
        self.labels: dict[tuple[int, int], LiveLabel] = {}
        self.pair_of_label: dict[int, tuple[int, int]] = {}
        # Trained models, keyed by what they were trained on (:meth:`training_key`).
        self.models: dict[str, tuple[tuple[int, ...], Any, dict[str, Any] | None]] = {}
        self.predictions: tuple[tuple[int, ...], Any, Any] | None = None  # (key, _, result)
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._values: tuple[Closure, tuple[int, int], np.ndarray] | None = None

    # ------------------------------------------------------------------ pool arrays
    @property
    def n_pool(self) -> int:
        return len(self.pair_ids)

    def pool_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pool, X)``: the pool as closure indices ``(m, 2)`` and its features ``(m, f)``.

        ``X`` is what the classifiers see: clipped to :data:`MODEL_FEATURE_BOUND`.
        """
        if self._arrays is None or len(self._arrays[0]) != self.n_pool:
            index = self.closure.index
            pool = np.array([(index(a), index(b)) for a, b in self.pair_concepts],
                            dtype=np.int64).reshape(-1, 2)
            width = self.feature_length or 0
            X = (np.clip(np.vstack(self.pair_features), -MODEL_FEATURE_BOUND,
                         MODEL_FEATURE_BOUND) if self.pair_features
                 else np.zeros((0, width), dtype=np.float64))
            self._arrays = (pool, X)
        return self._arrays

    def pool_values(self) -> np.ndarray:
        """Value of every pool pair: 1 positive, 0 negative, -1 undecided (do not mutate).

        Cached while the decided set and the pool stay the same: the closure object (held, so
        never another one at the same address), its size and the pool size identify them (a
        label only grows the closure; a retraction or a rebuild replaces the object).
        """
        key = (len(self.closure), self.n_pool)
        cached = self._values
        if cached is not None and cached[0] is self.closure and cached[1] == key:
            return cached[2]
        pool, _ = self.pool_arrays()
        values = (self.closure.values(pool[:, 0], pool[:, 1]) if len(pool)
                  else np.zeros(0, dtype=np.int8))
        values.setflags(write=False)
        self._values = (self.closure, key, values)
        return values

    def pool_asserted(self) -> np.ndarray:
        """Whether each pool pair carries a live asserted label."""
        labels = self.labels
        return np.fromiter((pair in labels for pair in self.pair_concepts), dtype=bool,
                           count=self.n_pool)

    # ------------------------------------------------------------------ loading
    def add_concept(self, concept_id: int, name: str) -> None:
        self.closure.add_concept(concept_id)
        self.name_of[concept_id] = name
        self.id_of[name] = concept_id
        self.max_concept_id = max(self.max_concept_id, concept_id)

    def add_pair(self, pair_id: int, a_id: int, b_id: int, features: np.ndarray) -> None:
        self.pool_row[(a_id, b_id)] = len(self.pair_ids)
        self.pair_ids.append(pair_id)
        self.pair_concepts.append((a_id, b_id))
        self.pair_features.append(features)
        self.max_pair_id = max(self.max_pair_id, pair_id)
        self._arrays = None

    def remember_label(self, label: AssertedLabel) -> None:
        pair = (label.a_id, label.b_id)
        self.labels[pair] = LiveLabel(label.id, label.positive, label.annotator, label.created_at)
        self.pair_of_label[label.id] = pair

    def forget_label(self, label_id: int) -> None:
        pair = self.pair_of_label.pop(label_id, None)
        if pair is not None:
            self.labels.pop(pair, None)


def _load_concepts(session: Session, state: ProjectState) -> None:
    rows = session.execute(
        select(Concept.id, Concept.name)
        .where(Concept.project_id == state.project_id, Concept.id > state.max_concept_id)
        .order_by(Concept.id)
    )
    for concept_id, name in rows:
        state.add_concept(concept_id, name)


def _load_pairs(session: Session, state: ProjectState) -> None:
    rows = session.execute(
        select(PoolPair.id, PoolPair.a_id, PoolPair.b_id, PoolPair.features)
        .where(PoolPair.project_id == state.project_id, PoolPair.id > state.max_pair_id)
        .order_by(PoolPair.id)
    )
    for pair_id, a_id, b_id, blob in rows:
        state.add_pair(pair_id, a_id, b_id, decode_features(blob))


def _live_labels(session: Session, project_id: int, after_version: int | None = None,
                 up_to_version: int | None = None) -> list[AssertedLabel]:
    query = select(AssertedLabel).where(AssertedLabel.project_id == project_id,
                                        AssertedLabel.retracted_at.is_(None))
    if after_version is not None:
        query = query.where(AssertedLabel.version > after_version)
    if up_to_version is not None:
        query = query.where(AssertedLabel.version <= up_to_version)
    return list(session.scalars(query.order_by(AssertedLabel.id)))


def _rebuild(session: Session, state: ProjectState, project: Project) -> None:
    state.invalidate()
    state.created_at = project.created_at
    state.feature_length = project.feature_length
    _load_concepts(session, state)
    _load_pairs(session, state)
    labels = _live_labels(session, state.project_id, up_to_version=project.version)
    state.closure = Closure.from_labels(
        [Label(lab.a_id, lab.b_id, lab.positive) for lab in labels], state.closure.concepts
    )
    for label in labels:
        state.remember_label(label)


def catch_up(session: Session, state: ProjectState, project: Project) -> ProjectState:
    """Bring ``state`` up to ``project.version`` (call while holding ``state.lock``).

    ``project`` is the project row as read in the current transaction (locked for a write).
    """
    if state.version == project.version and state.created_at == project.created_at:
        return state
    stale = (state.version < 0 or state.version > project.version
             or state.created_at != project.created_at
             or project.retraction_version > state.version)
    if stale:
        _rebuild(session, state, project)
    else:
        state.feature_length = project.feature_length
        _load_concepts(session, state)
        _load_pairs(session, state)
        for label in _live_labels(session, state.project_id, after_version=state.version,
                                  up_to_version=project.version):
            state.closure.add_label(label.a_id, label.b_id, label.positive)
            state.remember_label(label)
    state.version = project.version
    return state


class StateRegistry:
    """The cached states of every project this process has served."""

    def __init__(self) -> None:
        self._states: dict[int, ProjectState] = {}
        self._lock = threading.Lock()

    def get(self, project_id: int) -> ProjectState:
        with self._lock:
            state = self._states.get(project_id)
            if state is None:
                state = self._states[project_id] = ProjectState(project_id)
            return state

    def cached(self, project_id: int) -> ProjectState | None:
        """The project's state if this process has one (built or not), else None."""
        with self._lock:
            return self._states.get(project_id)

    def drop(self, project_id: int) -> None:
        with self._lock:
            self._states.pop(project_id, None)

    @contextmanager
    def locked(self, project_id: int) -> Iterator[ProjectState]:
        """The project's state, held exclusively; invalidated if the body fails.

        A failure after the closure was changed (e.g. the commit failed) must not leave the
        cache ahead of the database, so any unexpected exception drops the cached state. A
        :class:`~app.errors.ServiceError` (a refused request) is raised before any change.
        """
        state = self.get(project_id)
        with state.lock:
            try:
                yield state
            except ServiceError:
                raise  # refused before anything changed (services raise them up front)
            except BaseException:
                state.invalidate()
                raise


def warm_up(sessions: sessionmaker[Session], registry: StateRegistry) -> tuple[int, int]:
    """Build the cached state of every project from the database (at start-up).

    Each project is read in its own short read-only transaction, so warming never holds one
    long snapshot or any write lock, and processes that start together do not wait on each
    other. A project changed meanwhile (by another process) is caught up by its next request
    as usual; one deleted meanwhile is skipped.

    Returns
    -------
    projects, labels : int
        How many projects were built and how many live asserted labels they hold.
    """
    with sessions() as session:
        project_ids = list(session.scalars(select(Project.id).order_by(Project.id)))
    built = labels = 0
    for project_id in project_ids:
        with sessions() as session, registry.locked(project_id) as state:
            project = session.get(Project, project_id)
            if project is None:
                registry.drop(project_id)
                continue
            catch_up(session, state, project)
            built += 1
            labels += len(state.labels)
    return built, labels
