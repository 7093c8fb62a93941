"""The database: an engine used the safe way on SQLite and PostgreSQL, sessions, migrations.

SQLite serves concurrent requests safely when (see the pysqlite dialect documentation,
"Serializable isolation / Savepoints / Transactional DDL"):

- the WAL journal lets readers run beside the single writer;
- a busy timeout makes a second writer wait instead of failing at once;
- a write transaction takes the write lock up front (``BEGIN IMMEDIATE``), so a transaction
  that reads and then writes can never fail with ``SQLITE_BUSY_SNAPSHOT`` half-way.

Python's ``sqlite3`` driver would issue its own deferred ``BEGIN``; it is switched off in the
``connect`` event and the ``begin`` event emits the right ``BEGIN`` instead. On PostgreSQL the
writes of one project are serialized by locking the project's row at the start of the write
transaction (``SELECT ... FOR UPDATE``); other projects do not wait.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.errors import DatabaseBusy, ProjectNotFound
from app.settings import Settings, get_settings
from models import Project

__all__ = [
    "MIGRATIONS_DIR",
    "Database",
    "SessionDep",
    "get_database",
    "get_session",
    "make_engine",
    "pool_sizes",
    "migrate",
    "write_transaction",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

# Execution option that turns the next transaction of a connection into a write transaction.
WRITE_OPTION = "sporal_write"

# Connections taken outside request threads and jobs: the warm-up, the job heartbeat, the
# key check's lookups between two requests' threads.
SPARE_CONNECTIONS = 4

# Key of the PostgreSQL advisory lock held while migrations run (any fixed 64-bit number).
MIGRATION_LOCK_KEY = 0x5350_4F52_414C  # "SPORAL"


_WRITERS: weakref.WeakKeyDictionary[Engine, tuple[threading.Lock, float]] = \
    weakref.WeakKeyDictionary()
"""Per SQLite engine: the lock its writers queue on in this process, and the busy timeout."""


@contextmanager
def _queued_writer(session: Session) -> Iterator[None]:
    """On SQLite, writers of one process take turns on a lock of the process first.

    SQLite's own busy handler waits by sleeping, ever longer (up to 100 ms a nap), so a writer
    that finds the lock taken wakes long after it was released: a 40 ms import made another
    project's label wait 200 ms. Queued on a process lock, the next writer starts the moment
    the last one committed; other processes still meet SQLite's busy timeout.
    """
    writer = _WRITERS.get(session.get_bind().engine)
    if writer is None:
        yield
        return
    lock, timeout = writer
    if not lock.acquire(timeout=timeout):
        raise DatabaseBusy()
    try:
        yield
    finally:
        lock.release()


def _configure_sqlite(engine: Engine, settings: Settings) -> None:
    busy_ms = int(settings.sqlite_busy_timeout_ms)
    _WRITERS[engine] = (threading.Lock(), busy_ms / 1000)
    synchronous = settings.sqlite_synchronous

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        # busy_timeout first: switching a fresh file to WAL itself needs the lock.
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def pool_sizes(settings: Settings) -> tuple[int, int]:
    """The connection pool of one process: ``(pool_size, max_overflow)``.

    Every thread that runs a request (``request_threads``) or a job (``job_workers``) holds
    at most one connection at a time, so the pool has one for each and a few spare: a request
    never waits for a connection, and never meets ``QueuePool limit ... reached``. The
    overflow covers streamed answers (an export holds its connection between the chunks it
    sends, without a thread).
    """
    return (settings.request_threads + settings.job_workers + SPARE_CONNECTIONS,
            settings.request_threads)


def make_engine(database_url: str, settings: Settings | None = None, *,
                pool: tuple[int, int] | None = None, pool_timeout: float = 30.0,
                busy_timeout_ms: int | None = None) -> Engine:
    """An engine for ``database_url`` configured for concurrent requests.

    Parameters
    ----------
    database_url : str
        A SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
    settings : Settings, optional
        Busy timeout and synchronous mode for SQLite; default the process settings.
    pool : (int, int), optional
        Pool size and overflow; default :func:`pool_sizes` of ``settings``.
    pool_timeout : float
        Seconds to wait for a free connection (then ``TimeoutError``: 503 database-busy).
    busy_timeout_ms : int, optional
        SQLite's busy timeout; default ``settings.sqlite_busy_timeout_ms``.
    """
    settings = settings or get_settings()
    if busy_timeout_ms is not None:
        settings = settings.model_copy(update={"sqlite_busy_timeout_ms": busy_timeout_ms})
    pool_size, max_overflow = pool or pool_sizes(settings)
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={
                "check_same_thread": False,
                "timeout": settings.sqlite_busy_timeout_ms / 1000,
            },
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
        )
        _configure_sqlite(engine, settings)
        return engine
    if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")  # the driver we ship
    return create_engine(url, pool_pre_ping=True, pool_size=pool_size,
                         max_overflow=max_overflow, pool_timeout=pool_timeout)


class Database:
    """An engine and its session factory, and a small engine of its own for ``/health``.

    The health engine (two connections, a short wait for one, a short busy timeout) is never
    taken by requests, so the health check answers within ``health_timeout`` however busy the
    request pool is.
    """

    def __init__(self, database_url: str, settings: Settings | None = None) -> None:
        settings = settings or get_settings()
        self.url = database_url
        self.engine = make_engine(database_url, settings)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.health_timeout = settings.health_timeout
        self.health_engine = make_engine(
            database_url, settings, pool=(1, 1), pool_timeout=settings.health_timeout,
            busy_timeout_ms=int(settings.health_timeout * 1000))

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def ping(self) -> str:
        """Run ``SELECT 1`` on the health engine; the database's dialect name."""
        with self.health_engine.connect() as connection:
            connection.execute(select(1))
        return self.health_engine.dialect.name

    def dispose(self) -> None:
        self.engine.dispose()
        self.health_engine.dispose()


@contextmanager
def write_transaction(session: Session, project_id: int | None = None) -> Iterator[Project | None]:
    """A write transaction that holds the project's write lock from its first statement.

    Whatever the session read before is a finished read-only snapshot and is ended first.
    On SQLite the transaction starts with ``BEGIN IMMEDIATE``; on PostgreSQL the project's row is
    locked with ``SELECT ... FOR UPDATE``. Commits on success, rolls back on any error.

    Yields
    ------
    Project or None
        The locked project (None when ``project_id`` is None).

    Raises
    ------
    ProjectNotFound
        When ``project_id`` names no project.
    """
    if session.in_transaction():
        session.rollback()
    with _queued_writer(session), session.begin():
        session.connection(execution_options={WRITE_OPTION: True})
        project = None
        if project_id is not None:
            # populate_existing: the session keeps objects across commits (expire_on_commit
            # off), and the locked row must be read as it is now, not as an earlier
            # transaction of this session saw it (its version decides whether to catch up)
            project = session.scalar(
                select(Project).where(Project.id == project_id).with_for_update()
                .execution_options(populate_existing=True)
            )
            if project is None:
                raise ProjectNotFound(project_id)
        yield project


def get_database(request: Request) -> Database:
    """The application's database (a dependency)."""
    database: Database = request.app.state.database
    return database


def get_session(request: Request) -> Iterator[Session]:
    """A session for one request, closed after the response (a dependency)."""
    with get_database(request).sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def alembic_config(database_url: str) -> Any:
    """The Alembic configuration of the project's migrations for ``database_url``."""
    from alembic.config import Config

    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def migrate(database_url: str | None = None, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (default the newest schema).

    Safe when several processes start together: the upgrade runs inside one transaction that
    holds the database's write lock (SQLite) or an advisory lock (PostgreSQL), so the second
    process waits and then finds nothing left to do.
    """
    from alembic import command

    command.upgrade(alembic_config(database_url or get_settings().database_url), revision)


def downgrade(database_url: str | None = None, revision: str = "base") -> None:
    """Downgrade the database to ``revision`` (default: empty)."""
    from alembic import command

    command.downgrade(alembic_config(database_url or get_settings().database_url), revision)
