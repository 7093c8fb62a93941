"""One unit of work per request on a project: a caught-up ``(session, project, state)``.

:func:`open_project` is the one way a request reaches a project's reasoning state (the routes
use it through the ``ProjectRead`` / ``WriteProject`` dependencies of
:mod:`app.routes.common`):

1. the project must exist (404 before any cached state is made for it);
2. the state's lock is taken and the state caught up with the project row's version, in a
   read-only transaction;
3. the handler reads the state (:class:`ProjectView`) or writes (:meth:`ProjectWork.write`):
   it *computes* against the cached state first (the closure update, the gains) with no
   database lock held, then takes a short write transaction that re-checks the project's
   version and only writes. If another process wrote in between, the cache catches up and
   the work runs again, inside the write transaction this time;
4. any exception after the cache changed invalidates it (checked with the state's mutation
   counter), so a failed request never leaves the cache ahead of the database;
5. the lock is released, and if the labels or the pool changed the trainer is told.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import ConcurrentChange, ModelNotReady, ProjectNotFound
from app.services.state import ProjectState, StateRegistry, catch_up
from app.services.training import ModelKey, TrainedModel, Trainer
from app.settings import Settings
from models import Project

__all__ = [
    "Limits",
    "ProjectView",
    "ProjectWork",
    "Retry",
    "Superseded",
    "open_project",
]

P = TypeVar("P")
R = TypeVar("R")
V = TypeVar("V", bound="ProjectView")


class Retry(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a ``store`` step: the data moved under the computation; compute again."""


class Superseded(Exception, Generic[R]):  # noqa: N818 - a signal, not an error
    """Raised by a ``store`` step: answer ``result`` instead, and write nothing.

    (An idempotent retry whose first request committed in another process meanwhile.)
    """

    def __init__(self, result: R) -> None:
        super().__init__("superseded")
        self.result = result


def _read_project(session: Session, project_id: int) -> Project:
    project = session.get(Project, project_id, populate_existing=True)
    if project is None:
        raise ProjectNotFound(project_id)
    return project


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

    def write(self, compute: Callable[[ProjectWork], P],
              store: Callable[[ProjectWork, Project, P], R]) -> R:
        """``store(self, project, compute(self))`` in a write transaction, at the same version.

        ``compute`` works on the cached state (it may change it, and may read but not end the
        session's transaction); ``store`` runs inside the write transaction with the locked
        ``project`` row, writes, bumps ``project.version`` when it changed the project's data,
        and may raise :class:`Retry` or :class:`Superseded`. Returns what ``store`` returns.

        The first attempt computes with no database lock held. When another process wrote in
        between, the cache catches up and the work is done again, this time inside the write
        transaction (so it cannot be overtaken twice).
        """
        state = self.state
        if self._atomic is not None:  # inside atomically(): one transaction holds them all
            plan = compute(self)
            try:
                return self._stored(self._atomic, store(self, self._atomic, plan))
            except (Retry, Superseded):
                raise ConcurrentChange("a write inside an atomic import was overtaken; "
                                       "retry") from None
        version, before = state.version, state.mutations
        plan = compute(self)
        try:
            with write_transaction(self.session, state.project_id) as locked:
                assert locked is not None
                if locked.version != version:
                    raise Retry
                return self._stored(locked, store(self, locked, plan))
        except Retry:
            pass
        except Superseded as superseded:
            return self._superseded(superseded, before)
        if state.mutations != before:
            state.invalidate()
        try:
            with write_transaction(self.session, state.project_id) as locked:
                assert locked is not None
                self.project = locked
                catch_up(self.session, state, locked)
                before = state.mutations
                return self._stored(locked, store(self, locked, compute(self)))
        except Superseded as superseded:
            return self._superseded(superseded, before)
        except Retry:
            if state.mutations != before:
                state.invalidate()
            raise ConcurrentChange("the project changed under a locked write; retry") from None

    @contextmanager
    def atomically(self) -> Iterator[None]:
        """Every :meth:`write` inside runs in one write transaction: all of them, or none.

        For a file import, whose records were all validated before: the write lock is held
        for the whole block (computations included), and a failure anywhere rolls everything
        back and drops the cache, which had moved ahead.
        """
        state = self.state
        try:
            with write_transaction(self.session, state.project_id) as locked:
                assert locked is not None
                catch_up(self.session, state, locked)
                self._atomic = locked
                yield
        except BaseException:
            state.invalidate()
            raise
        finally:
            self._atomic = None

    def _stored(self, locked: Project, result: R) -> R:
        self.project = locked
        self.state.version = locked.version
        return result

    def _superseded(self, superseded: Superseded[R], before: int) -> R:
        if self.state.mutations != before:
            self.state.invalidate()
            self.refresh()
        return superseded.result


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
