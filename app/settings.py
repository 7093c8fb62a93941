"""The service's settings, read once from ``SPORAL_*`` environment variables.

Nothing else in the service reads ``os.environ``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from reasoning.consensus.asking import CHECK_RATE

__all__ = ["Settings", "get_settings"]


def _default_database_url() -> str:
    return f"sqlite:///{Path.cwd() / 'sporal.db'}"


class Settings(BaseSettings):
    """Every knob of the service; each field is the environment variable ``SPORAL_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="SPORAL_", extra="ignore")

    database_url: str = Field(
        default_factory=_default_database_url,
        description="SQLAlchemy URL; default a SQLite file sporal.db in the working directory.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins allowed by CORS, comma-separated ('*' for any).",
    )
    admin_key: SecretStr | None = Field(
        default=None,
        description="When set, only this key manages projects and every project needs a key.",
    )
    lease_seconds: float = Field(
        default=600.0, gt=0, description="How long GET .../next?annotator= reserves its pairs."
    )
    max_decided_pairs: int = Field(
        default=50_000_000, gt=0, description="Decided pairs one project may hold; a label "
        "or import that would decide more is refused before the work (422 budget-exceeded)."
    )
    max_concepts: int = Field(
        default=50_000, gt=0, description="Concepts one project may hold (422 budget-exceeded)."
    )
    check_rate: float = Field(
        default=CHECK_RATE, ge=0, le=1, description="In `consensus`, the share of an annotator's "
        "questions that are check questions until they passed more checks than they failed."
    )
    consensus_local_from: int = Field(
        default=1000, ge=0, description="In `consensus`, a contested answer on a project with at "
        "least this many asserted labels is repaired on its pair at once (the last fit's "
        "accuracies held fixed) and the full consensus refitted by a background job; below it, "
        "the full consensus is computed in the request (docs/consensus.md).")
    agreement_job_from: int = Field(
        default=5000, ge=0, description="A project with at least this many answers serves "
        "the last agreement view computed (`as_of.current` false) while a job computes the "
        "view of the answers as they are now; below it, the view is computed in the request "
        "(docs/consensus.md, \"Agreement\").")
    fresh_timeout: float = Field(
        default=10.0, gt=0, description="How long `?fresh=true` waits for a model trained on "
        "the current labels before answering 503."
    )
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024, gt=0, description="Larger request bodies are refused with 413."
    )
    max_import_bytes: int = Field(
        default=2 * 1024**3, gt=0, description="Largest file POST .../import accepts (streamed, "
        "so exempt from max_body_bytes)."
    )
    max_import_line_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="Longest line of an imported file (bytes, "
        "its newline included): a longer line is refused (422, naming it) before it is parsed."
    )
    max_import_depth: int = Field(
        default=64, ge=2, description="Deepest nesting of arrays and objects in one JSON Lines "
        "record: a deeper line is refused (422, naming it) before it is parsed."
    )
    max_import_spool_bytes: int = Field(
        default=4 * 1024**3, gt=0, description="Bytes the imports of one process may spool at "
        "once, all together: an import that would pass it is refused (503 with Retry-After) "
        "before the rest of its body is read."
    )
    import_async_bytes: int = Field(
        default=128 * 1024**2, ge=0, description="A file POST .../import receives larger than "
        "this (bytes) is imported by a job (202 Accepted) even without Prefer: respond-async."
    )
    import_stage_labels: int = Field(
        default=10_000, ge=1, description="An import with at least this many labels, all after "
        "its other records and without retractions, stages them in short write transactions "
        "and switches them in at the end in one; smaller imports are one write transaction."
    )
    import_stage_timeout: float = Field(
        default=600.0, gt=0, description="A staged import that has written nothing for this "
        "long is dead (its process was killed): the next staged import deletes its rows."
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000, ge=0, description="How long a SQLite writer waits for the write lock."
    )
    sqlite_synchronous: Literal["FULL", "NORMAL"] = Field(
        default="FULL", description="SQLite's synchronous pragma (FULL survives power loss)."
    )
    warm_up: bool = Field(
        default=True, description="Build every project's reasoning state from the database at "
        "start-up (else each project is built on its first request)."
    )
    default_prediction_model: Literal["random_forest", "logistic_regression"] = "random_forest"
    blas_threads: int = Field(
        default=1, ge=1, description="Threads of numpy's BLAS per process. Requests already "
        "run in parallel threads; more BLAS threads on top only fight for the cores."
    )
    shutdown_timeout: int = Field(
        default=30, ge=1, description="On SIGTERM, how long running requests may finish; then "
        "they are cancelled and the process exits (their transactions roll back)."
    )
    idempotency_ttl_seconds: int = Field(
        default=86_400, ge=1, description="How long the answer stored under an "
        "Idempotency-Key is kept: past it, the key acts as new and the record is deleted."
    )

    request_threads: int = Field(
        default=40, ge=1, description="Threads that run requests in one process (anyio's "
        "limiter): a request waiting for its project's lock holds one."
    )
    job_workers: int = Field(
        default=2, ge=1, description="Threads of one process that run jobs (feature "
        "recomputes): at most this many jobs run at once per process."
    )
    max_jobs: int = Field(
        default=16, ge=1, description="Jobs one process holds queued or running; a heavy "
        "request past it is refused with 503 jobs-busy and Retry-After."
    )
    heavy_requests_per_project: int = Field(
        default=2, ge=1, description="Heavy requests (link and text changes, renames) one "
        "project may have in flight in one process; more are refused with 429 and Retry-After."
    )
    recompute_async_threshold: int = Field(
        default=250_000, ge=0, description="Concepts with texts x pool pairs from which a "
        "feature recompute runs as a job (202 Accepted) even without Prefer: respond-async."
    )
    job_ttl_seconds: int = Field(
        default=86_400, ge=1, description="How long a finished job stays readable; past it, "
        "it is deleted (lazily) and its route answers 404."
    )
    job_stale_seconds: int = Field(
        default=120, ge=1, description="A queued or running job of another host whose "
        "process has not touched it for this long is marked failed (interrupted)."
    )
    health_timeout: float = Field(
        default=1.0, gt=0, description="How long /health waits for its own database "
        "connection and query before answering 503."
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("admin_key", mode="before")
    @classmethod
    def _empty_key_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def open_mode(self) -> bool:
        """True when no admin key is configured: the service asks no key anywhere."""
        return self.admin_key is None


@lru_cache
def get_settings() -> Settings:
    """The settings of this process (read from the environment once)."""
    return Settings()
