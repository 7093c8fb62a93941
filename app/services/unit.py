"""One unit of work per request on a project: a caught-up ``(session, project, state)``.

:func:`open_project` is the one way a request, a job or an import reaches a project's
reasoning state (the routes use it through the ``ReadProject`` / ``WriteProject`` dependencies
of :mod:`app.routes.common`); nothing here knows about HTTP:

1. the project must exist (404 before any cached state is made for it);
2. the state's lock is taken and the state caught up with the project row's version, in a
   read-only transaction;
3. the caller reads the state (:class:`ProjectView`) or writes (:meth:`ProjectWork.write`):
   ``compute`` plans the write against the cached state (the closure update, the gains) with
   no database lock held, then ``store`` writes the plan in a short write transaction that
   first re-checks the project's version (and the write's own ``holds`` check, if any). If
   another process wrote in between, the cache catches up and the work runs once more,
   inside the write transaction this time, so it cannot be overtaken twice;
4. any exception after the cache changed invalidates it (checked with the state's mutation
   counter), so a failed request never leaves the cache ahead of the database;
5. the lock is released, and if the labels or the pool changed the trainer is told.

Idempotent writes (:meth:`ProjectWork.idempotent`) add a :class:`Once` hook: asked before the
work and again inside the write transaction whether an earlier request with the same key
already answered, and told the result to keep, in that same transaction. Finding an answer
inside the transaction is the one case where the unit leaves the caller's code by an
exception: a private one, raised and caught in this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import ConcurrentChange, ModelNotReady, ProjectNotFound
from app.services.state import ProjectState, StateRegistry, TeamCache, catch_up
from app.services.training import ModelKey, TrainedModel, Trainer
from app.settings import Settings
from models import Project

logger = logging.getLogger("sporal")

__all__ = [
    "Limits",
    "Once",
    "ProjectOpener",
    "ProjectView",
    "ProjectWork",
    "open_project",
]

A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)
P = TypeVar("P")
R = TypeVar("R")
V = TypeVar("V", bound="ProjectView")


class Once(Protocol[A_co]):
    """The hook of an idempotent write (an ``Idempotency-Key``): at most one answer per key."""

    def replayed(self, session: Session) -> A_co | None:
        """The answer an earlier request with this key stored, if any (read in ``session``)."""

    def record(self, session: Session, result: Any) -> None:
        """Keep ``result``, the write's own, in ``session``'s write transaction."""


class _Replayed(Exception):  # noqa: N818 - the one signal, raised and caught in this module
    """The write transaction found the answer of an earlier request with the same key."""

    def __init__(self, answer: Any) -> None:
        super().__init__("replayed")
        self.answer = answer


def _read_project(session: Session, project_id: int) -> Project:
    project = session.get(Project, project_id, populate_existing=True)
    if project is None:
        raise ProjectNotFound(project_id)
    return project


class ProjectOpener(Protocol):
    """What opens a project's unit of work outside a request (a job, an import):
    :class:`app.runtime.Runtime` is one. Services that run as jobs take it by this protocol,
    so that they need not import what starts a process."""

    def open(self, kind: type[V], project_id: int,
             session: Session | None = None) -> AbstractContextManager[V]:
        """The unit of work of ``kind`` on ``project_id``, caught up and locked."""
        ...


@dataclass(frozen=True)
class Limits:
    """What one project may hold: refused before the work (422 ``budget-exceeded``)."""

    decided_pairs: int = 50_000_000
    concepts: int = 50_000

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(settings.max_decided_pairs, settings.max_concepts)


@dataclass
class ProjectView:
    """A project and its reasoning state, caught up, held for one request."""

    session: Session
    project: Project
    state: ProjectState
    trainer: Trainer
    registry: StateRegistry
    fresh_timeout: float
    limits: Limits = Limits()

    def refresh(self) -> None:
        """Catch the state up again in a new read transaction (the lock is held)."""
        if self.session.in_transaction():
            self.session.rollback()
        self.project = _read_project(self.session, self.state.project_id)
        catch_up(self.session, self.state, self.project)
        self.session.rollback()

    def model(self, key: ModelKey, *, fresh: bool = False) -> TrainedModel | None:
        """The newest trained model of ``key`` (None before any; the trainer is asked).

        With ``fresh`` it waits, without holding the lock, for a model trained on the labels
        as they are now; past ``fresh_timeout`` seconds it raises :class:`ModelNotReady`.
        """
        model = self.trainer.want(self.state, key)
        if not fresh or (model is not None and model.is_fresh(self.state)):
            return model
        target = self.state.training_key()
        self.state.lock.release()
        try:
            ready = self.trainer.wait_fresh(self.state, key, target, self.fresh_timeout)
        finally:
            self.state.lock.acquire()
        self.refresh()
        if not ready:
            raise ModelNotReady(key.name, self.fresh_timeout)
        return self.trainer.want(self.state, key)


class ProjectWork(ProjectView):
    """A :class:`ProjectView` that may write: compute first, then a short transaction."""

    _atomic: Project | None = None
    _once: Once[Any] | None = None
    _staged: TeamCache | None = None

    @property
    def in_transaction(self) -> bool:
        """Whether a write transaction is open for this unit now (inside :meth:`atomically`):
        then another connection's write would wait for it."""
        return self._atomic is not None

    def write(self, compute: Callable[[ProjectWork], P],
              store: Callable[[ProjectWork, Project, P], R],
              holds: Callable[[ProjectWork, P], bool] | None = None) -> R:
        """``store(self, project, compute(self))`` in a write transaction, at the same version.

        ``compute`` plans on the cached state (it may change it, and may read but not end the
        session's transaction) and raises the domain errors that refuse the request.
        ``store`` runs inside the write transaction with the locked ``project`` row, writes
        the plan, bumps ``project.version`` when it changed the project's data, and returns
        the result. ``holds``, when given, reads (in the write transaction, before ``store``)
        whether the plan still holds where the version does not tell (another annotator
        leased a pair meanwhile); False computes it again. Returns what ``store`` returns.
        A team cache staged by ``store`` (:meth:`stage_team`) reaches the state once the
        transaction committed.
        """
        if self._atomic is not None:  # inside atomically(): one transaction holds them all
            plan = compute(self)
            if holds is not None and not holds(self, plan):
                raise ConcurrentChange("a write inside an atomic import was overtaken; retry")
            return self._store(self._atomic, store, plan)
        state = self.state
        version, before = state.version, state.mutations
        self._staged = None
        plan = compute(self)  # 1. on the cached state, no database lock held
        with write_transaction(self.session, state.project_id) as locked:
            assert locked is not None  # 2. nobody wrote meanwhile: store the plan
            current = locked.version == version and (holds is None or holds(self, plan))
            if current:
                result = self._store(locked, store, plan)
        if current:
            return self._committed(result)
        logger.info("project %d: a write was overtaken (another process wrote, or a pair was "
                    "leased meanwhile); planning it again under the lock", state.project_id)
        if state.mutations != before:  # 3. overtaken: the plan had moved the cache, rebuild
            state.invalidate()
        with write_transaction(self.session, state.project_id) as locked:
            assert locked is not None  # 4. catch up and do it all again, locked
            catch_up(self.session, state, locked)
            self._staged = None
            plan = compute(self)
            if holds is not None and not holds(self, plan):
                raise ConcurrentChange("the project changed under a locked write; retry")
            result = self._store(locked, store, plan)
        return self._committed(result)

    def end_read(self) -> None:
        """End what the session read before a write (nothing inside :meth:`atomically`,
        whose one transaction holds the reads and the writes)."""
        if self._atomic is None:
            self.session.rollback()

    def stage_team(self, team: TeamCache) -> None:
        """Make ``team`` the state's team cache once the write in progress has committed
        (inside :meth:`atomically`, once the whole block has); never if it rolls back."""
        self._staged = team

    def _committed(self, result: R) -> R:
        """``result`` of a committed write, the team cache it staged now the state's."""
        if self._staged is not None:
            self.state.team, self._staged = self._staged, None
        return result

    def _store(self, locked: Project, store: Callable[[ProjectWork, Project, P], R],
               plan: P) -> R:
        """``store`` inside the write transaction, between the two steps of the idempotency
        hook (a stored answer found here ends the idempotent block, nothing written)."""
        if self._once is not None:
            answer = self._once.replayed(self.session)
            if answer is not None:  # the first request committed meanwhile, elsewhere
                raise _Replayed(answer)
        result = store(self, locked, plan)
        if self._once is not None:
            self._once.record(self.session, result)
        self.project = locked
        self.state.version = locked.version
        return result

    def idempotent(self, once: Once[A], run: Callable[[], R]) -> R | A:
        """``run()``, a service call that writes through this unit, answered at most once.

        The answer stored under ``once`` is looked up first (in a read transaction) and, if
        found, returned without running anything; else every write of ``run`` looks it up
        again inside its write transaction and records its result there (see :class:`Once`).
        An answer found then (another process's request with the same key committed in the
        meantime) is returned instead, nothing of this one stored and the cache dropped if
        the plan had moved it.
        """
        assert self._once is None and self._atomic is None, "not nested"
        stored = once.replayed(self.session)
        self.session.rollback()
        if stored is not None:
            return stored
        entered = self.state.mutations
        self._once = once
        try:
            return run()
        except _Replayed as replayed:
            if self.state.mutations != entered:
                self.state.invalidate()
                self.refresh()
            answer: A = replayed.answer
            return answer
        finally:
            self._once = None

    @contextmanager
    def atomically(self) -> Iterator[Project]:
        """Every :meth:`write` inside runs in one write transaction: all of them, or none.

        For a file import, whose records were all validated before: the write lock is held
        for the whole block (computations included), and a failure anywhere rolls everything
        back and drops the cache, which had moved ahead. Yields the locked project row, which
        the block may also write (a staged import switches its labels in there).
        """
        state = self.state
        self._staged = None
        try:
            with write_transaction(self.session, state.project_id) as locked:
                assert locked is not None
                catch_up(self.session, state, locked)
                self._atomic = locked
                yield locked
        except BaseException:
            self._staged = None
            state.invalidate()
            raise
        finally:
            self._atomic = None
        self._committed(None)


@contextmanager
def open_project(kind: type[V], session: Session, registry: StateRegistry, trainer: Trainer,
                 project_id: int, *, fresh_timeout: float,
                 limits: Limits = Limits()) -> Iterator[V]:
    """The unit of work of one request on ``project_id`` (see the module docstring)."""
    if registry.cached(project_id) is None:  # no cached state for unknown projects
        if session.get(Project, project_id) is None:
            raise ProjectNotFound(project_id)
        session.rollback()  # the catch-up reads after the lock, never an older snapshot
    state = registry.get(project_id)
    state.lock.acquire()
    entered = state.mutations
    key = state.training_key()
    try:
        try:
            project = _read_project(session, project_id)
        except ProjectNotFound:
            registry.drop(project_id)
            raise
        catch_up(session, state, project)
        entered = state.mutations
        yield kind(session, project, state, trainer, registry, fresh_timeout, limits)
    except BaseException:
        if state.mutations != entered:
            state.invalidate()
        raise
    finally:
        if session.in_transaction():
            session.rollback()
        changed = state.version >= 0 and state.training_key() != key
        state.lock.release()
        if changed:
            trainer.changed(state)
