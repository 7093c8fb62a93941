"""What a running sporal holds, and the one way to reach a project: :meth:`Runtime.open`.

The service (:func:`app.main.create_app`) and ``sporal import`` in-process
(:func:`app.importer.import_local`) each start one :class:`Runtime` from the settings. Every
route on a project (through the ``ReadProject`` / ``WriteProject`` dependencies of
:mod:`app.routes.common`), the file import route and the importer reach the project through
:meth:`Runtime.open`, which opens its unit of work (:func:`app.services.unit.open_project`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.orm import Session

from app.db import Database
from app.services import asking
from app.services.labels import incremental
from app.services.state import StateRegistry
from app.services.training import Trainer
from app.services.unit import Limits, ProjectView, open_project
from app.settings import Settings

__all__ = ["Runtime"]

V = TypeVar("V", bound=ProjectView)


@dataclass(frozen=True)
class Runtime:
    """The settings, the database, the cached reasoning states and the trainer of one process."""

    settings: Settings
    database: Database
    registry: StateRegistry
    trainer: Trainer

    @classmethod
    def start(cls, settings: Settings) -> Runtime:
        """A runtime for ``settings``: the database's engine, an empty cache, a trainer.

        The database must be migrated; :meth:`close` ends the trainer and the engine. The
        team's question policy takes its check rate from the settings, the incremental
        consensus its threshold.
        """
        asking.configure(settings.check_rate)
        incremental.configure(settings.consensus_local_from)
        registry = StateRegistry()
        return cls(settings, Database(settings.database_url, settings), registry,
                   Trainer(registry))

    def close(self) -> None:
        """Stop the trainer's threads and close the database's connections."""
        self.trainer.close()
        self.database.dispose()

    @contextmanager
    def open(self, kind: type[V], project_id: int, session: Session | None = None
             ) -> Iterator[V]:
        """The unit of work of ``kind`` on project ``project_id``: caught up and locked.

        Parameters
        ----------
        kind : type
            :class:`~app.services.unit.ProjectView` to read,
            :class:`~app.services.unit.ProjectWork` to write.
        project_id : int
            The project.
        session : Session, optional
            The session to work in (a request's); default a new one, closed after.

        Raises
        ------
        ProjectNotFound
            No project has this id.
        """
        if session is None:
            with self.database.sessions() as own, self.open(kind, project_id, own) as unit:
                yield unit
            return
        with open_project(kind, session, self.registry, self.trainer, project_id,
                          fresh_timeout=self.settings.fresh_timeout,
                          limits=Limits.of(self.settings)) as unit:
            yield unit
