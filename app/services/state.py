"""The in-memory reasoning state of each project: a cache of the database, kept in step.

The database is the source of truth. Each process keeps, per project, the closure of the live
asserted labels (concepts keyed by their database ids), an immutable snapshot of the pool and
the decided value of every pool pair, stamped with the project's ``version`` (the models
trained on them belong to the trainer, :mod:`app.services.training`). Every request brings the
cache up to the project row's version before answering (:func:`catch_up`): it loads the
concepts and pool pairs added since, and applies the labels asserted since its version; only
after a retraction (``retraction_version`` newer than the cache) is the closure rebuilt from
scratch. So several processes on one database answer alike.

Lock discipline
---------------
* ``state.lock`` (a plain lock, so that the request that took it may release it from another
  thread of the pool) is held by one request at a time, from its catch-up to its answer
  (:mod:`app.services.unit`), and briefly by the trainer to take a training snapshot. Nothing
  slow runs under it: no model is trained there, and no database write lock is held while the
  closure or the gains are computed.
* Every change of the cache goes through a method of :class:`ProjectState` that counts it
  (``mutations``): a request that fails after changing the cache invalidates it, so the cache
  is never ahead of the database (enforced by :mod:`app.services.unit`, not by convention).
* What readers outside the lock may hold (the pool snapshot, the values array, a trained
  model) is immutable: a change replaces it instead of editing it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from models import AssertedLabel, Concept, PoolPair, Project
from reasoning.closure import Closure, Label, Update

__all__ = [
    "FEATURE_DTYPE",
    "MODEL_FEATURE_BOUND",
    "LiveLabel",
    "Pool",
    "ProjectState",
    "StateRegistry",
    "TeamCache",
    "TrainingKey",
    "catch_up",
    "decode_features",
    "encode_features",
    "live_labels",
    "load_rows",
    "warm_up",
]

FEATURE_DTYPE = np.dtype("<f8")

MODEL_FEATURE_BOUND = 1e30
"""Features are clipped to this magnitude before any classifier sees them.

Any finite float is accepted and stored as sent, but scikit-learn's trees work in float32
(largest about 3.4e38) and the scaler squares the values (1e200 squared overflows): beyond the
bound a model would fail on them. No real feature comes near it.
"""

MAX_CACHED_STATES = 256
"""Projects whose reasoning state a process keeps; the least recently used one goes first."""


def encode_features(values: np.ndarray | list[float]) -> bytes:
    """Features as stored: little-endian float64 bytes."""
    return np.asarray(values, dtype=FEATURE_DTYPE).tobytes()


def decode_features(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=FEATURE_DTYPE)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class LiveLabel:
    """A live asserted label as the cache knows it."""

    id: int
    positive: bool
    annotator: str | None
    created_at: datetime


@dataclass(frozen=True)
class Pool:
    """The pool at one moment: immutable, shared, replaced (never edited) when pairs arrive.

    Row ``r`` is the ``r``-th registered pair: ``ids[r]`` its database id, ``concepts[r]`` its
    concept ids, ``features[r]`` its features as stored and ``X[r]`` as the classifiers see
    them (clipped to :data:`MODEL_FEATURE_BOUND`).
    """

    ids: np.ndarray = field(default_factory=lambda: _frozen(np.zeros(0, dtype=np.int64)))
    concepts: np.ndarray = field(
        default_factory=lambda: _frozen(np.zeros((0, 2), dtype=np.int64)))
    features: np.ndarray = field(default_factory=lambda: _frozen(np.zeros((0, 0))))
    X: np.ndarray = field(default_factory=lambda: _frozen(np.zeros((0, 0))))
    row_of: dict[tuple[int, int], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def extended(self, rows: list[tuple[int, int, int, np.ndarray]]) -> Pool:
        """A new pool with ``rows`` of ``(pair_id, a_id, b_id, features)`` appended."""
        if not rows:
            return self
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        concepts = np.array([(r[1], r[2]) for r in rows], dtype=np.int64).reshape(-1, 2)
        features = np.vstack([r[3] for r in rows])
        if len(self):
            features = np.vstack([self.features, features])
        row_of = dict(self.row_of)
        for offset, (_, a_id, b_id, _) in enumerate(rows):
            row_of[(a_id, b_id)] = len(self) + offset
        return Pool(
            ids=_frozen(np.concatenate([self.ids, ids])),
            concepts=_frozen(np.vstack([self.concepts, concepts])),
            features=_frozen(features),
            X=_frozen(np.clip(features, -MODEL_FEATURE_BOUND, MODEL_FEATURE_BOUND)),
            row_of=row_of,
        )


class TrainingKey(NamedTuple):
    """What a model is trained on; changes exactly when that may have changed.

    The decided pool pairs and their values are fixed by the closure (replaced: ``generation``,
    or grown in place: ``decided``), the asserted labels (a label on an inferred pair decides
    nothing new but joins the asserted training set) and the pool. Concepts, names and settings
    are not in it: a new concept does not retrain a model.
    """

    generation: int
    decided: int
    asserted: int
    pool: int


@dataclass(frozen=True)
class TeamCache:
    """What a team's answers were last computed into, kept with the state it describes.

    ``fit``: the consensus (:class:`reasoning.consensus.Consensus`) of the project's last
    full-path event, whose reliabilities ``next`` weighs answers by until the next one; it is
    set only once that event committed (:meth:`app.services.unit.ProjectWork.stage_team`).
    ``agreement``: the agreement view with the fingerprint of the answers it was computed from.
    ``asked``: per answered pair, the model's P(positive) when ``next`` last served it as a
    new pair, before any answer on it (None: never with a model), read through from the
    suggestions log where it is stored (the model term of P(wrong): a model trained on the
    answer only echoes it; :func:`app.services.asking.answered`). ``quality`` and
    ``predicted``: the wrong pairs expected among the decided pool pairs (with the answers'
    fingerprint) and among the predicted ones (with the model's outputs and the training key)
    (:mod:`app.services.quality`); ``carried``: the decided pool pairs each label carries, with
    the label events, the pool size and the order of the labels' P(wrong) it was found at.
    ``stake``: the pool pairs each label's stored effect decided, with the label events and
    pool size it was read at (:mod:`app.services.asking`); ``resting``: the pool pairs that rest
    on each label alone now, with the same key. ``as_of``: the project version of
    the full fit ``fit`` comes from (``projects.consensus_as_of`` when it was stored or
    read); ``stored``: the project row's ``consensus_as_of`` and ``consensus_accuracy`` (the
    accuracies of the last full fit, JSON) as last caught up (:meth:`caught_up`), from which
    :func:`app.services.team.last_fit` rebuilds a fit that is missing or older. All go with
    the state: :meth:`ProjectState.invalidate` and the registry's drop forget them.
    """

    fit: Any = None
    as_of: int | None = None
    stored: tuple[int | None, str | None] = (None, None)
    agreement: tuple[tuple[int, ...], Any] | None = None
    asked: dict[tuple[int, int], float | None] = field(default_factory=dict)
    quality: tuple[tuple[int, ...], Any] | None = None
    predicted: tuple[Any, Any] | None = None
    stake: tuple[tuple[int, int], Any] | None = None
    resting: tuple[tuple[int, int], Any] | None = None
    carried: tuple[tuple[int, int, bytes], Any] | None = None

    def caught_up(self, project: Project) -> TeamCache:
        """This cache with the last full fit's version and accuracies of ``project``'s row."""
        stored = (project.consensus_as_of, project.consensus_accuracy)
        return self if stored == self.stored else replace(self, stored=stored)


class ProjectState:
    """The cached reasoning state of one project (see the module docstring).

    ``version`` is -1 while the state is empty or was invalidated: the next catch-up rebuilds.
    """

    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        self.lock = threading.Lock()
        self.generation = 0
        self.mutations = 0
        self.invalidate()

    def invalidate(self) -> None:
        """Forget everything; the next :func:`catch_up` rebuilds.

        The trainer's models of the project stay: they are the newest that exist (their
        ``labels_behind`` says how far behind), and the trainer replaces them.
        """
        self.version = -1
        self.created_at: datetime | None = None
        self.feature_length: int | None = None
        self.name_of: dict[int, str] = {}
        self.id_of: dict[str, int] = {}
        self.max_concept_id = 0
        self.pool = Pool()
        self.labels: dict[tuple[int, int], LiveLabel] = {}
        self.pair_of_label: dict[int, tuple[int, int]] = {}
        self.label_events = 0
        self.team = TeamCache()
        self._set_closure(Closure())

    # ------------------------------------------------------------------ what is decided
    @property
    def closure(self) -> Closure:
        """The closure of the live asserted labels (grows in place as labels arrive)."""
        return self._closure

    def _set_closure(self, closure: Closure, values: np.ndarray | None = None) -> None:
        # A replaced closure (rebuild, retraction, bulk import) is another training set.
        self._closure = closure
        self.generation += 1
        self.mutations += 1
        self._index: np.ndarray | None = None
        self._groups: dict[int, Any] = {}
        self.values = self._all_values() if values is None else _frozen(values)

    def replace_closure(self, closure: Closure, values: np.ndarray | None = None) -> None:
        """Use ``closure`` from now on (a bulk import, a retraction), with the pool's
        ``values`` under it when they were computed already (:meth:`values_under`)."""
        self._set_closure(closure, values)

    def values_under(self, closure: Closure) -> np.ndarray:
        """The pool's values under ``closure`` (same concepts), computed before a write."""
        if not len(self.pool):
            return np.zeros(0, dtype=np.int8)
        index = self.pool_index()
        return closure.values_by_index(index[:, 0], index[:, 1])

    def add_label(self, a_id: int, b_id: int, positive: bool) -> Update:
        """Apply one label to the closure and the pool values; raises ContradictionError."""
        update = self._closure.add_label(a_id, b_id, positive)
        self.mutations += 1
        self._decide(update)
        return update

    def training_key(self) -> TrainingKey:
        return TrainingKey(self.generation, len(self._closure), len(self.labels), len(self.pool))

    def pool_index(self) -> np.ndarray:
        """The pool as closure indices, shape ``(m, 2)``."""
        if self._index is None or len(self._index) != len(self.pool):
            index = self._closure.index
            self._index = _frozen(np.array(
                [(index(a), index(b)) for a, b in self.pool.concepts.tolist()],
                dtype=np.int64).reshape(-1, 2))
        return self._index

    def _all_values(self) -> np.ndarray:
        return _frozen(self.values_under(self._closure))

    def _pool_by(self, side: int) -> tuple[dict[int, tuple[int, int]], np.ndarray, np.ndarray]:
        """The pool rows grouped by the closure index of their ``a`` (0) or ``b`` (1) side.

        ``(span, rows, other)``: the rows whose side is ``x`` are ``rows[s:e]`` for
        ``(s, e) = span[x]``, and ``other[s:e]`` the closure indices of their other side.
        """
        key = (len(self.pool), side)
        cached = self._groups.get(side)
        if cached is not None and cached[0] == key:
            return cached[1]
        index = self.pool_index()
        rows = np.argsort(index[:, side], kind="stable")
        keys = index[rows, side]
        span: dict[int, tuple[int, int]] = {}
        if len(keys):
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            ends = np.r_[starts[1:], len(keys)]
            span = dict(zip(keys[starts].tolist(), zip(starts.tolist(), ends.tolist(),
                                                        strict=True), strict=True))
        groups = (span, rows, index[rows, 1 - side])
        self._groups[side] = (key, groups)
        return groups

    def _decide(self, update: Update) -> None:
        """Replace the values with a copy that knows what ``update`` decided in the pool.

        The lines of the update meet the pool through the pool rows of each line's concept,
        so the cost follows the lines and the pool pairs they touch, never the pairs decided.
        """
        changed: list[tuple[int, int]] = []
        for value, lines in ((1, update.lines[0]), (0, update.lines[1])):
            for by_row, line, bits in lines:
                span, rows, other = self._pool_by(0 if by_row else 1)
                hit = span.get(line)
                if hit is None:
                    continue
                start, end = hit
                changed += [(row, value) for row, o in zip(rows[start:end].tolist(),
                                                           other[start:end].tolist(),
                                                           strict=True) if bits >> o & 1]
        if changed:
            values = self.values.copy()
            rows_changed, new = zip(*changed, strict=True)
            values[list(rows_changed)] = new
            self.values = _frozen(values)

    def pool_asserted(self) -> np.ndarray:
        """Whether each pool pair carries a live asserted label."""
        labels = self.labels
        return np.fromiter((pair in labels for pair in map(tuple, self.pool.concepts.tolist())),
                           dtype=bool, count=len(self.pool))

    # ------------------------------------------------------------------ loading
    def add_concept(self, concept_id: int, name: str) -> None:
        self._closure.add_concept(concept_id)
        self.mutations += 1
        self.name_of[concept_id] = name
        self.id_of[name] = concept_id
        self.max_concept_id = max(self.max_concept_id, concept_id)

    def add_pairs(self, rows: list[tuple[int, int, int, np.ndarray]]) -> None:
        """Append pool pairs ``(pair_id, a_id, b_id, features)`` (a new pool snapshot)."""
        if rows:
            self.pool = self.pool.extended(rows)
            self.mutations += 1
            self.values = self._all_values()

    def remember_label(self, label: AssertedLabel) -> None:
        self.remember((label.a_id, label.b_id),
                      LiveLabel(label.id, label.positive, label.annotator, label.created_at))

    def remember(self, pair: tuple[int, int], live: LiveLabel) -> None:
        """A live label on ``pair`` (stored in the transaction that calls this)."""
        self.labels[pair] = live
        self.pair_of_label[live.id] = pair
        self.label_events += 1
        self.mutations += 1

    def forget_label(self, label_id: int) -> None:
        pair = self.pair_of_label.pop(label_id, None)
        if pair is not None:
            self.labels.pop(pair, None)
            self.label_events += 1
            self.mutations += 1


def _load_concepts(session: Session, state: ProjectState) -> None:
    rows = session.execute(
        select(Concept.id, Concept.name)
        .where(Concept.project_id == state.project_id, Concept.id > state.max_concept_id,
               Concept.deleted_at.is_(None))
        .order_by(Concept.id)
    )
    for concept_id, name in rows:
        state.add_concept(concept_id, name)


def _load_pairs(session: Session, state: ProjectState) -> None:
    after = int(state.pool.ids[-1]) if len(state.pool) else 0
    rows = session.execute(
        select(PoolPair.id, PoolPair.a_id, PoolPair.b_id, PoolPair.features)
        .where(PoolPair.project_id == state.project_id, PoolPair.id > after)
        .order_by(PoolPair.id)
    )
    state.add_pairs([(pair_id, a_id, b_id, decode_features(blob))
                     for pair_id, a_id, b_id, blob in rows])


def load_rows(session: Session, state: ProjectState) -> None:
    """Load the concepts and pool pairs stored since the state last read them."""
    _load_concepts(session, state)
    _load_pairs(session, state)


def live_labels(session: Session, project_id: int, after_version: int | None = None,
                up_to_version: int | None = None) -> list[AssertedLabel]:
    """The live asserted labels of a project in the order they were asserted (their ids)."""
    query = select(AssertedLabel).where(AssertedLabel.project_id == project_id,
                                        AssertedLabel.retracted_at.is_(None))
    if after_version is not None:
        query = query.where(AssertedLabel.version > after_version)
    if up_to_version is not None:
        query = query.where(AssertedLabel.version <= up_to_version)
    return list(session.scalars(query.order_by(AssertedLabel.id)))


def _label_events(session: Session, project_id: int) -> int:
    """Labels asserted plus labels retracted, ever: what ``labels_behind`` counts in."""
    asserted, retracted = session.execute(
        select(func.count(), func.count(AssertedLabel.retracted_at))
        .where(AssertedLabel.project_id == project_id)).one()
    return int(asserted) + int(retracted)


def _rebuild(session: Session, state: ProjectState, project: Project) -> None:
    state.invalidate()
    state.created_at = project.created_at
    state.feature_length = project.feature_length
    _load_concepts(session, state)
    _load_pairs(session, state)
    labels = live_labels(session, state.project_id, up_to_version=project.version)
    state.replace_closure(Closure.from_labels(
        [Label(lab.a_id, lab.b_id, lab.positive) for lab in labels], state.closure.concepts))
    for label in labels:
        state.remember_label(label)
    state.label_events = _label_events(session, state.project_id)


def catch_up(session: Session, state: ProjectState, project: Project) -> ProjectState:
    """Bring ``state`` up to ``project.version`` (call while holding ``state.lock``).

    ``project`` is the project row as read in the current transaction.
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
        load_rows(session, state)
        for label in live_labels(session, state.project_id, after_version=state.version,
                                 up_to_version=project.version):
            state.add_label(label.a_id, label.b_id, label.positive)
            state.remember_label(label)
    state.team = state.team.caught_up(project)  # another process may have refitted
    state.version = project.version
    return state


class StateRegistry:
    """The cached states of the projects this process served lately (at most ``capacity``).

    States are made only for projects that exist (the caller checks first); the least
    recently used one is dropped when there are too many, to be rebuilt on its next request.
    Whoever keeps something per project beside the state (the trainer its models) hears of
    every state that leaves, dropped or evicted (:meth:`on_drop`).
    """

    def __init__(self, capacity: int = MAX_CACHED_STATES) -> None:
        self._states: OrderedDict[int, ProjectState] = OrderedDict()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []
        self.capacity = capacity

    def on_drop(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(project_id)`` whenever a project's state leaves the registry.

        It is called after the state left, outside the registry's lock.
        """
        self._listeners.append(listener)

    def get(self, project_id: int) -> ProjectState:
        evicted: list[int] = []
        with self._lock:
            state = self._states.get(project_id)
            if state is None:
                state = self._states[project_id] = ProjectState(project_id)
                while len(self._states) > self.capacity:
                    evicted.append(self._states.popitem(last=False)[0])
            else:
                self._states.move_to_end(project_id)
        self._dropped(evicted)
        return state

    def cached(self, project_id: int) -> ProjectState | None:
        """The project's state if this process has one (built or not), else None."""
        with self._lock:
            return self._states.get(project_id)

    def drop(self, project_id: int) -> None:
        """Forget the project's state (a deleted project, one not found)."""
        with self._lock:
            self._states.pop(project_id, None)
        self._dropped([project_id])

    def _dropped(self, project_ids: list[int]) -> None:
        for project_id in project_ids:
            for listener in self._listeners:
                listener(project_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)


def warm_up(sessions: sessionmaker[Session], registry: StateRegistry) -> tuple[int, int]:
    """Build the cached state of every project from the database (at start-up).

    Each project is read in its own short read-only transaction, so warming never holds one
    long snapshot or any write lock, and processes that start together do not wait on each
    other. A project changed meanwhile (by another process) is caught up by its next request
    as usual; one deleted meanwhile is skipped. At most ``registry.capacity`` projects (the
    newest) are built.

    Returns
    -------
    projects, labels : int
        How many projects were built and how many live asserted labels they hold.
    """
    with sessions() as session:
        project_ids = list(session.scalars(
            select(Project.id).order_by(Project.id.desc()).limit(registry.capacity)))
    built = labels = 0
    for project_id in reversed(project_ids):
        with sessions() as session:
            project = session.get(Project, project_id)
            if project is None:
                continue
            state = registry.get(project_id)
            with state.lock:
                try:
                    catch_up(session, state, project)
                except BaseException:
                    state.invalidate()
                    raise
            built += 1
            labels += len(state.labels)
    return built, labels
