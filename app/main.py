"""The FastAPI application: :func:`create_app` wires settings, database, caches and routes."""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from threadpoolctl import threadpool_limits

from app import __version__
from app.db import Database
from app.errors import install_error_handlers
from app.middleware import BodySizeLimit, KeyCheck
from app.routes import (
    agreement,
    answers,
    concepts,
    corpus,
    disagreements,
    export,
    importing,
    jobs,
    labels,
    meta,
    pairs,
    people,
    projects,
    quality,
    queries,
)
from app.routes.docs import install_docs
from app.routes.ui import install_ui
from app.runtime import Runtime
from app.services.idempotency import InFlight
from app.services.jobs import JobRunner
from app.services.state import StateRegistry, warm_up
from app.settings import Settings, get_settings

__all__ = ["create_app"]

logger = logging.getLogger("sporal")

DESCRIPTION = """
Active learning of a strict partial order (e.g. concept prerequisites). Post labels; every
label is closed under the order's rules, so one answer decides many pairs; ask `next` for the
question whose answer would decide the most. Errors are RFC 9457 `application/problem+json`.
"""


def _announce(settings: Settings) -> None:
    url = make_url(settings.database_url).render_as_string(hide_password=True)
    logger.warning("sporal: database %s", url)
    if settings.open_mode:
        logger.warning("sporal: OPEN MODE - SPORAL_ADMIN_KEY is unset, no API key is asked "
                       "anywhere (fine for one person on a laptop; set it for a team)")
    else:
        logger.warning("sporal: keys required - the admin key manages projects, each "
                       "project's key opens that project")


def _warm_up(database: Database, registry: StateRegistry) -> None:
    """Rebuild every project's reasoning state from the database before serving.

    The database is the source of truth; this only fills the cache early, so the first
    request of each project does not pay for it. A failure (e.g. a database not migrated yet)
    is logged and leaves the cache to be built lazily, request by request.
    """
    started = time.perf_counter()
    try:
        projects, labels = warm_up(database.sessions, registry)
    except SQLAlchemyError as exc:
        logger.warning("sporal: reasoning cache not built at start-up (%s: %s); each project "
                       "is built on its first request", type(exc).__name__,
                       str(exc).splitlines()[0] if str(exc) else "")
        return
    logger.warning("sporal: reasoning cache built from the database: %d project(s), "
                   "%d live label(s) in %.3f s", projects, labels, time.perf_counter() - started)


def _document_security(app: FastAPI, settings: Settings) -> None:
    """In open mode the schema asks for no key, as the service does not."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            if settings.open_mode:
                schema.get("components", {}).pop("securitySchemes", None)
                for operations in schema.get("paths", {}).values():
                    for operation in operations.values():
                        operation.pop("security", None)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]


SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the interpreter lock while another waits for it."""

GC_THRESHOLDS = (50_000, 20, 100)
"""Allocations before a young collection, and how rarely the older generations are swept."""


def _tune_collector() -> None:
    """Keep the cyclic garbage collector from pausing every request for 100+ ms.

    A full collection walks every object alive, and holds the interpreter lock meanwhile: with
    the cached states of a few large projects that measured 100–170 ms, every few hundred
    requests, and every request in flight waited. Almost everything is freed by reference
    counting, so sweeping rarely costs a little memory; the objects alive after start-up (the
    modules, the warmed-up states) are frozen out of the sweeps altogether.
    """
    gc.set_threshold(*GC_THRESHOLDS)
    gc.collect()
    gc.freeze()


def _include_routers(app: FastAPI) -> None:
    for module in (meta, projects, concepts, pairs, corpus, labels, queries, export,
                   importing, jobs, answers, agreement, disagreements, people, quality):
        for name in ("admin_router", "router"):
            router = getattr(module, name, None)
            if router is not None:
                app.include_router(router)


def _job_runner(runtime: Runtime) -> JobRunner:
    settings = runtime.settings
    return JobRunner(runtime.database, workers=settings.job_workers, max_jobs=settings.max_jobs,
                     heavy_requests_per_project=settings.heavy_requests_per_project,
                     ttl_seconds=settings.job_ttl_seconds,
                     stale_seconds=settings.job_stale_seconds)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new application for ``settings`` (default: from the ``SPORAL_*`` environment).

    The database must be migrated (``sporal migrate``; ``sporal serve`` does it).
    """
    settings = settings or get_settings()
    # A request that waits on the database gives the interpreter lock away at every call and
    # must win it back from threads computing for other projects (a closure, gains, a JSON
    # body): at the default 5 ms a turn, a 30-query label waited 150 ms behind an import. A
    # shorter turn keeps one project's heavy work from showing in another's latency.
    sys.setswitchinterval(SWITCH_INTERVAL)
    runtime = Runtime.start(settings)
    database, registry, trainer = runtime.database, runtime.registry, runtime.trainer
    runner = _job_runner(runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _announce(settings)
        # The threads that run requests; the connection pool has one connection for each
        # (app.db.pool_sizes), so a request never waits for a connection.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.request_threads
        runner.start()
        # Oversubscribed BLAS threads made each retrain 10x slower on a busy 2-core machine.
        with threadpool_limits(limits=settings.blas_threads):
            if settings.warm_up:
                _warm_up(database, registry)
            _tune_collector()
            yield
        runner.close()
        runtime.close()

    app = FastAPI(title="sporal", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)  # offline ones: install_docs below
    app.state.settings = settings
    app.state.database = database
    app.state.project_states = registry
    app.state.trainer = trainer
    app.state.runtime = runtime
    app.state.jobs = runner
    app.state.inflight = InFlight()
    install_error_handlers(app)
    _include_routers(app)
    _document_security(app, settings)
    install_docs(app)
    install_ui(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       streamed=importing.IMPORT_PATH,
                       max_streamed_bytes=settings.max_import_bytes)
    # Added after (so outside) the size limit, which reads the body: keys are checked first.
    app.add_middleware(KeyCheck, settings=settings, database=database)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["Content-Type", "X-API-Key", "Idempotency-Key", "Prefer"],
            expose_headers=["Idempotent-Replayed", "Retry-After", "Content-Disposition",
                            "Location"],
        )
    return app
