"""The adapter's own state, in a SQLite file through SQLAlchemy: it survives restarts.

Five tables: ``settings`` (the bot user of earlier versions and the webhook secret that
``setup`` chose; ``ls_project``, the team's one project of earlier versions), ``people`` (each
person who answers: their Label Studio user, their name in sporal and their own Label Studio
project), ``tasks`` (Label Studio task ↔ sporal pair, the project it is in, why sporal asked it,
and whether the task is open, answered, deleted from the window, or retired by the bot of an
earlier version),
``annotations`` (Label Studio annotation ↔ sporal label id, with the ``updated_at`` last
forwarded, so that an event seen twice changes nothing, and the stored problem of a refused
answer) and ``messages`` (a note for one annotator, such as a refusal and its proof, shown on
the open tasks until that annotator answers again).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import ForeignKey, String, Text, create_engine, event, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

__all__ = ["AnnotationRow", "Base", "MessageRow", "PersonRow", "SettingRow", "State", "TaskRow"]

# Task reasons: sporal's ("new", "second-opinion", "disagreement"), or "check" (a decided pair
# that sporal asks to check an annotator's reading of the question).
# Task statuses: "open" (in the window), "answered", "deleted" (decided and unanswered: taken
# out of Label Studio), "retired" (annotated by the bot: earlier versions; withdrawn now).
# Annotation statuses: "asserted" (a live sporal label), "conflict" (refused with a 409, kept
# to retry after a retraction), "cancelled" (skipped), "empty" (no yes/no), "deleted".


class Base(DeclarativeBase):
    pass


class SettingRow(Base):
    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text, nullable=False)


class TaskRow(Base):
    __tablename__ = "tasks"

    task_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    a: Mapped[str] = mapped_column(Text, nullable=False)
    b: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="open")
    prediction_id: Mapped[int | None] = mapped_column(nullable=True)
    score: Mapped[float | None] = mapped_column(nullable=True)
    bot_annotation_id: Mapped[int | None] = mapped_column(nullable=True)
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    reason: Mapped[str] = mapped_column(String(32), nullable=False, default="new",
                                        server_default="new")
    # The Label Studio project it is in (null: the team's one project of earlier versions).
    ls_project: Mapped[int | None] = mapped_column(nullable=True, index=True)

    @property
    def pair(self) -> tuple[str, str]:
        return self.a, self.b


class PersonRow(Base):
    """One person who answers in their own Label Studio project."""

    __tablename__ = "people"

    user_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)  # in LS
    name: Mapped[str] = mapped_column(Text, nullable=False)  # their annotator name in sporal
    ls_project: Mapped[int] = mapped_column(nullable=False, unique=True)


class MessageRow(Base):
    __tablename__ = "messages"

    user_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    annotation_id: Mapped[int] = mapped_column(nullable=False)  # the answer it is about
    text: Mapped[str] = mapped_column(Text, nullable=False)
    published: Mapped[bool] = mapped_column(nullable=False, default=False)


class AnnotationRow(Base):
    __tablename__ = "annotations"

    annotation_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.task_id"), nullable=False)
    user_id: Mapped[int | None] = mapped_column(nullable=True)
    label: Mapped[str | None] = mapped_column(String(16), nullable=True)
    updated_at: Mapped[str] = mapped_column(String(64), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    sporal_label_id: Mapped[int | None] = mapped_column(nullable=True, index=True)
    problem: Mapped[str | None] = mapped_column(Text, nullable=True)

    @property
    def problem_body(self) -> dict[str, Any] | None:
        return json.loads(self.problem) if self.problem else None


class State:
    """The SQLite file at ``path`` (created with its tables when missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.engine = create_engine(f"sqlite:///{self.path}")

        @event.listens_for(self.engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL survives a crash of the adapter (a power cut may lose the last
            # commits, which the reconcile recovers from Label Studio's export) and spares a
            # disk flush per commit on the way from an answer to the next task.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        Base.metadata.create_all(self.engine)
        with self.engine.begin() as connection:  # a state file of an earlier version
            columns = {row[1] for row in connection.exec_driver_sql("PRAGMA table_info(tasks)")}
            if "reason" not in columns:
                connection.exec_driver_sql(
                    "ALTER TABLE tasks ADD COLUMN reason VARCHAR(32) NOT NULL DEFAULT 'new'")
            if "ls_project" not in columns:
                connection.exec_driver_sql("ALTER TABLE tasks ADD COLUMN ls_project INTEGER")
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block (rolled back on an error)."""
        with self._sessions() as session, session.begin():
            yield session

    def get(self, key: str) -> str | None:
        with self.session() as session:
            row = session.get(SettingRow, key)
            return row.value if row else None

    def put(self, key: str, value: str) -> None:
        with self.session() as session:
            session.merge(SettingRow(key=key, value=value))

    def tasks(self, status: str | None = None, ls_project: int | None = None) -> list[TaskRow]:
        """The tasks (of one status, of one Label Studio project), by id."""
        with self.session() as session:
            query = select(TaskRow).order_by(TaskRow.task_id)
            if status is not None:
                query = query.where(TaskRow.status == status)
            if ls_project is not None:
                query = query.where(TaskRow.ls_project == ls_project)
            return list(session.scalars(query))

    def people(self) -> list[PersonRow]:
        """Everyone who answers in a project of their own, by Label Studio user id."""
        with self.session() as session:
            return list(session.scalars(select(PersonRow).order_by(PersonRow.user_id)))

    def annotations(self, status: str | None = None) -> list[AnnotationRow]:
        with self.session() as session:
            query = select(AnnotationRow).order_by(AnnotationRow.annotation_id)
            if status is not None:
                query = query.where(AnnotationRow.status == status)
            return list(session.scalars(query))

    def messages(self) -> list[MessageRow]:
        with self.session() as session:
            return list(session.scalars(select(MessageRow).order_by(MessageRow.user_id)))

    def dispose(self) -> None:
        self.engine.dispose()
