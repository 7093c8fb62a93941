"""Models train in the background, never inside a request.

Each process has one :class:`Trainer`: a single low-priority thread that keeps the models that
requests asked for (``state.wanted``) trained on each project's newest labels.

* **Latest wins.** A change of a project's labels or pool schedules its wanted models again;
  a model already queued stays queued once, and when its turn comes it is trained on what the
  project holds *then*. Each model trains once at a time; strategy models (milliseconds) go
  first and never wait behind a prediction model (the forest, up to a second).
* **Bounded CPU.** The strategy models train in the trainer thread; the prediction models in
  one worker process (shared by every app of the process, started on first use), one at a
  time. Both run at a lower scheduling priority (``nice`` 10 on Linux), and the forest holds
  no lock nor the interpreter of the request threads: on two cores, requests find a core.
* **Requests use the newest model that exists** and say which (:meth:`TrainedModel.info`:
  ``labels_behind`` counts the labels asserted or retracted since it was trained). Before any
  model exists requests fall back to p = 0.5 (``model: null``). A request may wait for a
  model trained on the current labels (``?fresh=true``, :meth:`Trainer.wait_fresh`).
* **Pool outputs once per model.** A model's probabilities (or committee votes) for every pool
  pair are computed once, right after it is trained; pairs registered later are computed on
  first use and kept.

The models themselves:

* a strategy's model (:func:`reasoning.strategies.fit_model`): trained on the decided pool
  pairs for strategies that use the closure (``-R``, ``-R+``, CNT), else on the asserted ones;
* the prediction model (a per-project setting, default the paper's 200-tree random forest):
  trained on every decided pool pair; gives ``p(positive)`` of the undecided ones.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from app.services.state import ProjectState, StateRegistry, TrainingKey
from reasoning.classifiers import make_probabilistic, positive_proba
from reasoning.strategies import ModelOutputs, Strategy, fit_model, model_inputs, model_outputs

__all__ = [
    "FOREST_TREES",
    "ModelKey",
    "TrainedModel",
    "Trainer",
    "prediction_key",
    "strategy_key",
]

logger = logging.getLogger("sporal")

FOREST_TREES = 200
RANDOM_STATE = 0  # models are deterministic given the labels: answers repeat across processes
TRAINER_NICE = 10


@dataclass(frozen=True)
class ModelKey:
    """Which model: a strategy's (``kind`` lc or qbc) or the prediction model (its ``kind``)."""

    purpose: str  # "strategy" or "prediction"
    kind: str
    closure_labels: bool

    def __str__(self) -> str:
        source = "closure" if self.closure_labels else "asserted"
        return f"{self.purpose}:{self.kind}:{source}"

    @property
    def trains_here(self) -> bool:
        """Fast strategy models train in the trainer thread; forests in the worker process."""
        return self.purpose == "strategy" and self.kind != "forest"

    @property
    def rank(self) -> int:
        """Training order: fast strategy models before the forests."""
        return 0 if self.trains_here else 1

    @property
    def name(self) -> str:
        """The model's name in answers."""
        if self.purpose == "prediction":
            return self.kind
        return _MODEL_NAMES[self.kind]


_MODEL_NAMES = {  # a strategy model's family → its name in answers
    "lc": "logistic_regression",
    "qbc": "decision_tree_committee",
    "forest": "extra_trees",
}


def strategy_key(strategy: Strategy) -> ModelKey | None:
    """The model a strategy scores with; None for those that use none (Random, CNT)."""
    if not strategy.needs_model:
        return None
    return ModelKey("strategy", strategy.family, strategy.uses_closure)


def prediction_key(kind: str) -> ModelKey:
    return ModelKey("prediction", kind, True)


@dataclass(frozen=True)
class TrainedModel:
    """A model trained on one snapshot of a project, with its outputs on the pool.

    ``estimator`` is None for a prediction model (it stays in the worker process that trained
    it: its outputs came back) and for a model that could not be fitted (``fitted`` False: too
    few rows, or one class; callers then use p = 0.5).
    """

    key: ModelKey
    fitted: bool
    estimator: Any
    trained_on: TrainingKey
    version: int
    label_events: int
    rows: int
    positive: int
    outputs: ModelOutputs | None

    def info(self, state: ProjectState) -> dict[str, Any] | None:
        """What answers say about the model: None while it cannot be trained."""
        if not self.fitted:
            return None
        return {"name": self.key.name, "trained_on": self.rows, "positive": self.positive,
                "negative": self.rows - self.positive, "version": self.version,
                "labels_behind": max(0, state.label_events - self.label_events)}

    def is_fresh(self, state: ProjectState) -> bool:
        return self.trained_on == state.training_key()

    def pool_outputs(self, state: ProjectState) -> ModelOutputs | None:
        """The outputs for every row of the state's pool (call holding ``state.lock``).

        Rows registered after the model was trained are computed now and kept with the model
        (a prediction model, whose estimator is elsewhere, gives them NaN: unknown until the
        model trained on the new pool arrives).
        """
        if not self.fitted or self.outputs is None:
            return None
        have, want = len(self.outputs), len(state.pool)
        if have >= want:
            return self.outputs
        old = self.outputs
        if self.estimator is None:
            assert old.proba is not None
            outputs = ModelOutputs(proba=np.concatenate([old.proba,
                                                         np.full(want - have, np.nan)]))
        else:
            extra = _outputs(self.key, self.estimator, state.pool.X[have:want])
            outputs = ModelOutputs(
                proba=None if old.proba is None or extra.proba is None
                else np.concatenate([old.proba, extra.proba]),
                votes=None if old.votes is None or extra.votes is None
                else np.hstack([old.votes, extra.votes]))
        state.models[str(self.key)] = replace(self, outputs=outputs)
        return outputs


def _outputs(key: ModelKey, estimator: Any, X: np.ndarray) -> ModelOutputs:
    if key.purpose == "prediction":
        return ModelOutputs(proba=positive_proba(estimator, X) if len(X) else np.zeros(0))
    if not len(X):
        return ModelOutputs(proba=np.zeros(0)) if key.kind != "qbc" else \
            ModelOutputs(votes=np.zeros((0, 0), dtype=np.int64))
    outputs = model_outputs(key.kind, estimator, X)
    assert outputs is not None
    return outputs


def _fit(key: ModelKey, X: np.ndarray, y: np.ndarray) -> Any:
    if key.purpose == "strategy":
        return fit_model(key.kind, X, y, random_state=RANDOM_STATE)
    if len(y) < 2 or len(np.unique(y)) < 2:
        return None
    if key.kind == "logistic_regression":
        return make_probabilistic(RANDOM_STATE).fit(X, y.astype(np.int64))
    forest = RandomForestClassifier(n_estimators=FOREST_TREES, random_state=RANDOM_STATE,
                                    n_jobs=1)
    return forest.fit(X, y.astype(np.int64))


def _inputs(key: ModelKey, X: np.ndarray, concepts: np.ndarray | None,
            values: np.ndarray) -> np.ndarray:
    """What the model of ``key`` sees: ``X``, or for a forest strategy (the snapshot holds its
    ``concepts``) also the reverse pair's features and the concepts' decided shares
    (:func:`reasoning.strategies.model_inputs`)."""
    if concepts is None:
        return X
    return model_inputs(key.kind, concepts, X, values)


def _fit_outputs(key: ModelKey, X: np.ndarray, concepts: np.ndarray | None,
                 values: np.ndarray, mask: np.ndarray) -> ModelOutputs | None:
    """Build the inputs, fit and compute the pool's outputs: what the worker process runs
    (None: not fitted). The inputs are built here, so that only the pool's own features
    travel to the worker."""
    inputs = _inputs(key, X, concepts, values)
    estimator = _fit(key, inputs[mask], values[mask] == 1)
    return None if estimator is None else _outputs(key, estimator, inputs)


def _worker_start(nice: int) -> None:
    try:
        os.nice(nice)
    except OSError:  # not allowed: run at normal priority
        pass
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


_workers: ProcessPoolExecutor | None = None
_workers_lock = threading.Lock()


def _worker_pool(nice: int) -> ProcessPoolExecutor:
    """The one worker process of this process that trains prediction models (lazily started).

    ``forkserver`` (not ``fork``): the worker starts from a clean process, never from a copy
    of a server with threads and open database connections.
    """
    global _workers
    with _workers_lock:
        if _workers is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["app.services.training"])
            _workers = ProcessPoolExecutor(max_workers=1, mp_context=context,
                                           initializer=_worker_start, initargs=(nice,))
        return _workers


def _worker_broke() -> None:
    global _workers
    with _workers_lock:
        if _workers is not None:
            _workers.shutdown(wait=False, cancel_futures=True)
        _workers = None


@dataclass(frozen=True)
class _Snapshot:
    """What one training needs, taken under the state's lock in a moment (no copies).

    ``concepts`` (the pool's pairs) only for a forest strategy, whose inputs need them."""

    X: np.ndarray
    concepts: np.ndarray | None
    mask: np.ndarray
    values: np.ndarray
    trained_on: TrainingKey
    version: int
    label_events: int

    def model(self, key: ModelKey, estimator: Any, outputs: ModelOutputs | None,
              fitted: bool) -> TrainedModel:
        y = self.values[self.mask] == 1
        return TrainedModel(key, fitted, estimator, self.trained_on, self.version,
                            self.label_events, int(len(y)), int(np.count_nonzero(y)), outputs)


def _snapshot(state: ProjectState, key: ModelKey) -> _Snapshot:
    with state.lock:
        values = state.values
        mask = values >= 0
        if not key.closure_labels:
            mask = mask & state.pool_asserted()
        pool = state.pool
        trained_on, version, events = state.training_key(), state.version, state.label_events
    # the pool and the values are replaced, never changed: these stay the snapshot's
    concepts = pool.concepts if key.purpose == "strategy" and key.kind == "forest" else None
    return _Snapshot(pool.X, concepts, mask, values, trained_on, version, events)


def train(state: ProjectState, key: ModelKey) -> TrainedModel:
    """Train ``key`` here, on the state as it is now (``state.lock`` only for the snapshot)."""
    snap = _snapshot(state, key)
    inputs = _inputs(key, snap.X, snap.concepts, snap.values)
    estimator = _fit(key, inputs[snap.mask], snap.values[snap.mask] == 1)
    outputs = _outputs(key, estimator, inputs) if estimator is not None else None
    return snap.model(key, estimator, outputs, estimator is not None)


def submit(state: ProjectState, key: ModelKey, nice: int) -> tuple[_Snapshot, Future[Any]]:
    """Start training ``key`` in the worker process; its outputs come back in the future."""
    snap = _snapshot(state, key)
    return snap, _worker_pool(nice).submit(_fit_outputs, key, snap.X, snap.concepts,
                                           snap.values, snap.mask)


class Trainer:
    """The background trainer of one process (see the module docstring)."""

    def __init__(self, registry: StateRegistry, *, nice: int = TRAINER_NICE) -> None:
        self.registry = registry
        self.nice = nice
        self._queue: OrderedDict[tuple[int, str], ModelKey] = OrderedDict()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.trainings = 0

    # ------------------------------------------------------------------ requests' side
    def want(self, state: ProjectState, key: ModelKey) -> TrainedModel | None:
        """The newest model of ``key`` (None before any); schedules a newer one if needed.

        Call holding ``state.lock``.
        """
        state.wanted.add(str(key))
        model = state.models.get(str(key))
        if model is None or not model.is_fresh(state):
            self._schedule(state.project_id, key)
        return model

    def changed(self, state: ProjectState) -> None:
        """The state's labels or pool changed: schedule every model it wants."""
        for name in list(state.wanted):  # (requests add to it under the state's lock)
            model = state.models.get(name)
            if model is None or not model.is_fresh(state):
                self._schedule(state.project_id, _parse(name))

    def wait_fresh(self, state: ProjectState, key: ModelKey, target: TrainingKey,
                   timeout: float) -> bool:
        """Wait (not holding ``state.lock``) until ``key`` is trained on ``target`` or newer.

        True when it is; False when ``timeout`` seconds passed first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                model = state.models.get(str(key))
                if model is not None and _covers(model.trained_on, target):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._cond.wait(left)

    # ------------------------------------------------------------------ the thread
    def _schedule(self, project_id: int, key: ModelKey) -> None:
        with self._cond:
            if self._closed:
                return
            self._queue.setdefault((project_id, str(key)), key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sporal-trainer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _next(self, *, block: bool = True,
              strategy_only: bool = False) -> tuple[int, ModelKey] | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                items = [k for k, key in self._queue.items()
                         if not strategy_only or key.trains_here]
                if items:
                    item = min(items, key=lambda k: self._queue[k].rank)
                    return item[0], self._queue.pop(item)
                if not block:
                    return None
                self._cond.wait()

    def _run(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        except (AttributeError, OSError):  # not Linux, or not allowed: run at normal priority
            pass
        while (job := self._next()) is not None:
            self._train(*job)

    def _train(self, project_id: int, key: ModelKey) -> None:
        state = self.registry.cached(project_id)
        if state is None or state.version < 0:
            return  # dropped or invalidated: its next request asks again
        model: TrainedModel | None
        try:
            if key.trains_here:
                model = train(state, key)
            else:
                model = self._train_elsewhere(state, key)
        except Exception:  # a model that fails to train must not stop the trainer
            logger.exception("sporal: training %s of project %d failed", key, project_id)
            return
        if model is None:
            return
        with state.lock:
            current = state.models.get(str(key))
            if current is None or _covers(model.trained_on, current.trained_on):
                state.models[str(key)] = model
            stale = not model.is_fresh(state)
        with self._cond:
            self.trainings += 1
            self._cond.notify_all()
        if stale:  # labels arrived while it trained: latest wins, train again
            self._schedule(project_id, key)

    def _train_elsewhere(self, state: ProjectState, key: ModelKey) -> TrainedModel | None:
        """A forest, in the worker process; the fast strategy models train meanwhile."""
        snap, future = submit(state, key, self.nice)
        future.add_done_callback(lambda _: self._wake())
        while not future.done():
            job = self._next(block=False, strategy_only=True)
            if job is not None:
                self._train(*job)
                continue
            with self._cond:
                if self._closed:
                    future.cancel()
                    return None
                if not future.done() and not any(k.trains_here
                                                 for k in self._queue.values()):
                    self._cond.wait(timeout=1.0)
        try:
            outputs = future.result()
        except BrokenProcessPool:  # the worker died (e.g. killed): the next one starts anew
            _worker_broke()
            raise
        return snap.model(key, None, outputs, outputs is not None)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _covers(have: TrainingKey, target: TrainingKey) -> bool:
    """A model trained on ``have`` is at least as new as one trained on ``target``.

    Within one closure (``generation``) labels only add decided pairs, asserted labels and pool
    pairs; a replaced closure is newer than everything before it.
    """
    if have.generation != target.generation:
        return have.generation > target.generation
    return all(h >= t for h, t in zip(have[1:], target[1:], strict=True))


def _parse(name: str) -> ModelKey:
    purpose, kind, source = name.split(":")
    return ModelKey(purpose, kind, source == "closure")
