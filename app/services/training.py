"""Models train in the background, never inside a request.

Each process has one :class:`Trainer`: it owns the trained models of every project (keyed by
project and :class:`ModelKey`), and a single low-priority thread keeps the models that requests
asked for trained on each project's newest labels. The cached states
(:mod:`app.services.state`) know nothing of it: the trainer reads a state for a moment to take
a training snapshot, and drops a project's models when its state leaves the registry (the
project deleted, or its state evicted).

* **Latest wins.** A change of a project's labels or pool schedules its wanted models again;
  a model already queued stays queued once, and when its turn comes it is trained on what the
  project holds *then*. Each model trains once at a time; strategy models (milliseconds) go
  first and never wait behind a prediction model (the forest, up to a second).
* **Bounded CPU.** The strategy models train in the trainer thread; the prediction models in
  one worker process (shared by every app of the process, started with `sporal serve` or on
  first use: :func:`start_worker`; it ends with the process), one at a time. Both run at a
  lower scheduling priority (``nice`` 10 on Linux), and the forest holds no lock nor the
  interpreter of the request threads: on two cores, requests find a core.
* **Requests use the newest model that exists** and say which (:meth:`TrainedModel.info`:
  ``labels_behind`` counts the labels asserted or retracted since it was trained). Before any
  model exists requests fall back to p = 0.5 (``model: null``). A request may wait for a
  model trained on the current labels (``?fresh=true``, :meth:`Trainer.wait_fresh`).
* **Pool outputs once per model.** A model's probabilities (or committee votes) for every pool
  pair are computed once, right after it is trained; pairs registered later are computed on
  first use and kept (:meth:`Trainer.pool_outputs`). So is what is derived from a prediction
  model and the decided pairs, the consistent map (:meth:`Trainer.completed_map`).

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
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from app.services.fitting import ModelKey, fit_outputs, warm_up_worker, worker_start
from app.services.fitting import fit as _fit
from app.services.fitting import inputs as _inputs
from app.services.fitting import outputs as _outputs
from app.services.state import Pool, ProjectState, StateRegistry, TrainingKey
from reasoning.classifiers import FOREST_TREES
from reasoning.strategies import ModelOutputs, Strategy

__all__ = [
    "FOREST_TREES",
    "ModelKey",
    "TrainedModel",
    "Trainer",
    "prediction_key",
    "start_worker",
    "strategy_key",
]

logger = logging.getLogger("sporal")

TRAINER_NICE = 10
MIN_ROWS = 2  # labeled pairs below which no model is fitted (p = 0.5)


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

    def extended(self, pool: Pool) -> TrainedModel:
        """This model with outputs for every row of ``pool`` (itself when it has them).

        Rows registered after the model was trained are computed now (a prediction model,
        whose estimator is elsewhere, gives them NaN: unknown until the model trained on the
        new pool arrives).
        """
        if not self.fitted or self.outputs is None or len(self.outputs) >= len(pool):
            return self
        old, have, want = self.outputs, len(self.outputs), len(pool)
        if self.estimator is None:
            assert old.proba is not None
            unknown = np.full(want - have, np.nan)
            outputs = ModelOutputs(
                proba=np.concatenate([old.proba, unknown]),
                calibrated=None if old.calibrated is None
                else np.concatenate([old.calibrated, unknown]))
        else:
            extra = _outputs(self.key, self.estimator, pool.X[have:want])
            outputs = ModelOutputs(
                proba=None if old.proba is None or extra.proba is None
                else np.concatenate([old.proba, extra.proba]),
                votes=None if old.votes is None or extra.votes is None
                else np.hstack([old.votes, extra.votes]))
        return replace(self, outputs=outputs)


_workers: ProcessPoolExecutor | None = None
_workers_lock = threading.Lock()


def _worker_pool(nice: int) -> ProcessPoolExecutor:
    """The one worker process of this process that trains prediction models (started by
    :func:`start_worker` or on first use).

    ``forkserver`` (not ``fork``): the worker starts from a clean process, never from a copy
    of a server with threads and open database connections. The forkserver preloads only
    :mod:`app.services.fitting` (what the worker runs: NumPy, scikit-learn, the models), not
    the service, so neither it nor the worker holds FastAPI or SQLAlchemy.
    """
    global _workers
    with _workers_lock:
        if _workers is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["app.services.fitting", "threadpoolctl"])
            _workers = ProcessPoolExecutor(max_workers=1, mp_context=context,
                                           initializer=worker_start, initargs=(nice,))
        return _workers


def start_worker(nice: int = TRAINER_NICE) -> threading.Thread:
    """Start the worker process now and warm it, in a thread (returned) that waits for it.

    Called at start-up by ``sporal serve``: the first prediction model then trains in a
    worker already running, its imports done, rather than after a cold start of Python,
    NumPy and scikit-learn (seconds on a busy machine: past ``fresh=true``'s timeout). The
    thread runs at the server's priority, so the forkserver it starts does too (the worker
    lowers its own).
    """

    def warm() -> None:
        started = time.perf_counter()
        try:
            _worker_pool(nice).submit(warm_up_worker).result()
        except Exception as exc:  # a later training starts it again, and says why if it fails
            logger.warning("sporal: training worker not warmed up (%s: %s)",
                           type(exc).__name__, exc)
            return
        logger.info("sporal: training worker ready in %.2f s", time.perf_counter() - started)

    thread = threading.Thread(target=warm, name="sporal-worker-warm-up", daemon=True)
    thread.start()
    return thread


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
    concepts = pool.concepts if key.family.reads_pool else None
    return _Snapshot(pool.X, concepts, mask, values, trained_on, version, events)


def _nothing_to_train(key: ModelKey, snap: _Snapshot, project_id: int) -> bool:
    """Whether ``snap`` holds nothing a model of ``key`` can be fitted on (said in a debug line).

    Decided before the inputs are built: a project without a pool, with too few labeled
    pairs, with one class or without features is an expected state (its answers use
    p = 0.5), not an error of an estimator.
    """
    y = snap.values[snap.mask] == 1
    if not len(snap.X):
        reason = "no pool pairs"
    elif snap.concepts is None and (snap.X.ndim < 2 or snap.X.shape[1] == 0):
        reason = "no features"
    elif len(y) < MIN_ROWS:
        reason = f"{len(y)} labeled pool pair(s)"
    elif y.all() or not y.any():
        reason = "one class"
    else:
        return False
    logger.debug("sporal: nothing to train for %s of project %d: %s", key.name, project_id,
                 reason)
    return True


def train(state: ProjectState, key: ModelKey) -> TrainedModel:
    """Train ``key`` here, on the state as it is now (``state.lock`` only for the snapshot)."""
    snap = _snapshot(state, key)
    if _nothing_to_train(key, snap, state.project_id):
        return snap.model(key, None, None, False)
    inputs = _inputs(key, snap.X, snap.concepts, snap.values)
    estimator = _fit(key, inputs[snap.mask], snap.values[snap.mask] == 1)
    outputs = _outputs(key, estimator, inputs) if estimator is not None else None
    return snap.model(key, estimator, outputs, estimator is not None)


def submit(state: ProjectState, key: ModelKey, nice: int) -> tuple[_Snapshot, Future[Any]]:
    """Start training ``key`` in the worker process; its outputs come back in the future
    (at once None when there is nothing to train: the worker is not bothered)."""
    snap = _snapshot(state, key)
    if _nothing_to_train(key, snap, state.project_id):
        nothing: Future[Any] = Future()
        nothing.set_result(None)
        return snap, nothing
    return snap, _worker_pool(nice).submit(fit_outputs, key, snap.X, snap.concepts,
                                           snap.values, snap.mask)


_Entry = tuple[int, ModelKey]
"""One project's model of one key: how the trainer files models, wishes and jobs."""

M = TypeVar("M")


class Trainer:
    """The background trainer of one process, owner of the trained models (see the module
    docstring).

    Lock discipline: a request calls in holding its state's lock; the trainer's own lock
    (``_cond``) guards its bookkeeping and is taken after a state's lock, never before one.
    """

    def __init__(self, registry: StateRegistry, *, nice: int = TRAINER_NICE) -> None:
        self.registry = registry
        self.nice = nice
        self._models: dict[_Entry, TrainedModel] = {}
        self._wanted: dict[int, set[ModelKey]] = {}
        self._maps: dict[_Entry, tuple[TrainingKey, np.ndarray, Any]] = {}
        self._queue: dict[_Entry, None] = {}  # the jobs, in the order they were scheduled
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.trainings = 0
        registry.on_drop(self.forget)

    # ------------------------------------------------------------------ requests' side
    def want(self, state: ProjectState, key: ModelKey) -> TrainedModel | None:
        """The newest model of ``key`` (None before any); schedules a newer one if needed.

        Call holding ``state.lock``. From now on every change of the state's labels or pool
        (:meth:`changed`) trains the model again.
        """
        with self._cond:
            self._wanted.setdefault(state.project_id, set()).add(key)
            model = self._models.get((state.project_id, key))
            if model is None or not model.is_fresh(state):
                self._schedule(state.project_id, key)
            return model

    def changed(self, state: ProjectState) -> None:
        """The state's labels or pool changed: schedule every model it wants."""
        with self._cond:
            for key in self._wanted.get(state.project_id, ()):
                model = self._models.get((state.project_id, key))
                if model is None or not model.is_fresh(state):
                    self._schedule(state.project_id, key)

    def wait_fresh(self, state: ProjectState, key: ModelKey, target: TrainingKey,
                   timeout: float) -> bool:
        """Wait (not holding ``state.lock``) until ``key`` is trained on ``target`` or newer.

        True when it is; False when ``timeout`` seconds passed first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                model = self._models.get((state.project_id, key))
                if model is not None and _covers(model.trained_on, target):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._cond.wait(left)

    def pool_outputs(self, state: ProjectState, model: TrainedModel) -> ModelOutputs | None:
        """``model``'s outputs for every row of the state's pool (call holding ``state.lock``).

        None when the model could not be fitted. Rows registered after it was trained are
        computed on first use and kept with the model (:meth:`TrainedModel.extended`).
        """
        extended = model.extended(state.pool)
        if extended is not model:
            entry = (state.project_id, model.key)
            with self._cond:
                if self._models.get(entry) is model:
                    self._keep(entry, extended)
        return extended.outputs if extended.fitted else None

    def completed_map(self, state: ProjectState, key: ModelKey, proba: np.ndarray,
                      complete: Callable[[], M]) -> M:
        """What ``complete()`` makes of the prediction model ``key``'s ``proba`` (from
        :meth:`pool_outputs`) and the state's decided pairs: made once per model and decided
        set, and kept with the model (call holding ``state.lock``)."""
        entry, trained_on = (state.project_id, key), state.training_key()
        with self._cond:
            cached = self._maps.get(entry)
        if cached is not None and cached[0] == trained_on and cached[1] is proba:
            completed: M = cached[2]
            return completed
        completed = complete()
        with self._cond:
            if entry in self._models:  # (not for a project dropped meanwhile)
                self._maps[entry] = (trained_on, proba, completed)
        return completed

    def models(self, project_id: int) -> dict[ModelKey, TrainedModel]:
        """The newest trained model of each key of a project (a copy)."""
        with self._cond:
            return {key: model for (pid, key), model in self._models.items()
                    if pid == project_id}

    def forget(self, project_id: int) -> None:
        """Drop a project's models, wishes and queued jobs (its state left the registry)."""
        with self._cond:
            self._wanted.pop(project_id, None)
            for table in (self._models, self._maps, self._queue):
                for entry in [e for e in table if e[0] == project_id]:
                    del table[entry]

    def _keep(self, entry: _Entry, model: TrainedModel) -> None:
        """File ``model`` (holding ``_cond``); what was derived from the one before goes."""
        self._models[entry] = model
        self._maps.pop(entry, None)

    # ------------------------------------------------------------------ the thread
    def _schedule(self, project_id: int, key: ModelKey) -> None:
        with self._cond:
            if self._closed:
                return
            self._queue.setdefault((project_id, key))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sporal-trainer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _next(self, *, block: bool = True, strategy_only: bool = False) -> _Entry | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                jobs = [job for job in self._queue if not strategy_only or job[1].trains_here]
                if jobs:
                    job = min(jobs, key=lambda j: j[1].rank)
                    del self._queue[job]
                    return job
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
        with state.lock, self._cond:
            self.trainings += 1
            self._cond.notify_all()
            if self.registry.cached(project_id) is not state:
                return  # the state left meanwhile, and the project's models with it
            current = self._models.get((project_id, key))
            if current is None or _covers(model.trained_on, current.trained_on):
                self._keep((project_id, key), model)
            stale = not model.is_fresh(state)
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
                if not future.done() and not any(job[1].trains_here for job in self._queue):
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

