"""Alembic environment: the URL comes from the service settings; one process migrates at a time.

The whole upgrade runs in one transaction that first takes a lock: SQLite's write lock
(``BEGIN IMMEDIATE``, transactional DDL) or a PostgreSQL advisory transaction lock. Processes
that start together therefore do not race: the second waits, then sees the head revision.
"""

from __future__ import annotations

from alembic import context

from app.db import MIGRATION_LOCK_KEY, WRITE_OPTION, make_engine
from app.settings import get_settings
from models import Base

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    return config.attributes.get("database_url") or get_settings().database_url


def run_migrations_offline() -> None:
    """Emit the SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    url = _database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_database_url())
    sqlite = engine.dialect.name == "sqlite"
    try:
        with engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                if engine.dialect.name == "postgresql":
                    connection.exec_driver_sql(
                        f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
                    )
                context.configure(
                    connection=connection,
                    target_metadata=target_metadata,
                    render_as_batch=sqlite,
                    transactional_ddl=True,
                )
                with context.begin_transaction():
                    context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
