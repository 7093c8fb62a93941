"""Idempotent retries of label posts (the ``Idempotency-Key`` header, Stripe's design).

The outcome of executing the request (its 2xx answer, or the 409 of a contradiction) is stored
with the key and a hash of the request, in the same transaction as the labels themselves, so a
retry after a lost answer (or a crash) either finds the labels and their response, or neither.
An :class:`Idempotency` is the :class:`app.services.unit.Once` hook of such a write
(:meth:`app.services.unit.ProjectWork.idempotent`): the route says how a result is answered.
A retry with the same key and body replays that response; the key with another body is refused
(422); a retry that arrives while the first request is still running in this process gets 409
with its own problem type. Refusals before execution (schema errors, unknown concepts) are not
stored, so a corrected retry with the same key can still pass. (Across
processes the project lock makes the retry wait for the first request, then replay it.)

Records expire after ``ttl`` (``SPORAL_IDEMPOTENCY_TTL_SECONDS``, default a day): an older
record is ignored, so its key acts as new, and each stored record deletes at most
:data:`SWEEP_BATCH` expired records of its project, in the same transaction, so that the table
holds about one TTL's worth of answers instead of every answer ever given.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.errors import IdempotencyInProgress, IdempotencyKeyReused
from models import IdempotencyRecord
from models.base import utcnow

__all__ = ["DEFAULT_TTL", "SWEEP_BATCH", "Idempotency", "InFlight", "StoredResponse",
           "request_hash"]

DEFAULT_TTL = timedelta(days=1)
SWEEP_BATCH = 100
"""Expired records deleted, at most, with each record stored (more than one per store, so the
expired ones never pile up; few enough to keep the write short)."""


def request_hash(kind: str, body: BaseModel) -> str:
    """A hash of what the request asks (its route and validated body, key order ignored)."""
    canonical = json.dumps([kind, body.model_dump(mode="json")], sort_keys=True,
                           separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class InFlight:
    """The idempotency keys whose first request is running in this process."""

    def __init__(self) -> None:
        self._keys: set[tuple[int, str]] = set()
        self._lock = threading.Lock()

    @contextmanager
    def claim(self, project_id: int, key: str) -> Iterator[None]:
        with self._lock:
            if (project_id, key) in self._keys:
                raise IdempotencyInProgress(key)
            self._keys.add((project_id, key))
        try:
            yield
        finally:
            with self._lock:
                self._keys.discard((project_id, key))


@dataclass(frozen=True)
class StoredResponse:
    """A response as stored under a key: its status and JSON body (``replayed``: read back)."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


@dataclass
class Idempotency:
    """One request's key and hash; looks up and stores inside the caller's transaction.

    ``answer`` turns the write's result into the answer to store (and to give).
    """

    project_id: int
    key: str
    request_hash: str
    answer: Callable[[Any], StoredResponse]
    ttl: timedelta = DEFAULT_TTL

    def _cutoff(self) -> datetime:
        """Records created at or before this are expired."""
        return utcnow() - self.ttl

    def replayed(self, session: Session) -> StoredResponse | None:
        """The stored answer of the first request with this key, if any."""
        record = session.scalar(select(IdempotencyRecord).where(
            IdempotencyRecord.project_id == self.project_id, IdempotencyRecord.key == self.key))
        if record is None or record.created_at <= self._cutoff():
            return None  # an expired record is as good as none: the key acts as new
        if record.request_hash != self.request_hash:
            raise IdempotencyKeyReused(
                f"Idempotency-Key {self.key!r} was already used with another request body")
        return StoredResponse(record.status_code, json.loads(record.response_body), replayed=True)

    def record(self, session: Session, result: Any) -> None:
        """Store the answer of ``result``; delete this key's expired record and a batch of
        others.

        Called after :meth:`replayed` found nothing in the same transaction, so a record with
        this key, if any, is expired.
        """
        answer = self.answer(result)
        records = IdempotencyRecord
        expired = (select(records.id)
                   .where(records.project_id == self.project_id,
                          records.created_at <= self._cutoff())
                   .order_by(records.created_at).limit(SWEEP_BATCH))
        for doomed in (records.id.in_(expired.scalar_subquery()),
                       (records.project_id == self.project_id) & (records.key == self.key)):
            session.execute(delete(records).where(doomed),
                            execution_options={"synchronize_session": False})
        session.add(IdempotencyRecord(project_id=self.project_id, key=self.key,
                                      request_hash=self.request_hash, status_code=answer.status,
                                      response_body=json.dumps(answer.body, default=str)))
