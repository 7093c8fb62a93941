"""Annotator keys: a person's key to one project (``POST/GET/DELETE
/projects/{pid}/annotator-keys``).

A key is shown once and stored as its SHA-256 (:func:`app.security.hash_key`), as the
project's keys are. A name has at most one live key: a new one retires the one before, and a
revocation retires it and ends the annotator's leases (``reservations``), so that the pairs
``next`` reserved for them go back to the team.
"""

from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import NotFound
from app.schemas import AnnotatorKeyCreated, AnnotatorKeyItem, AnnotatorKeyPage
from app.security import hash_key, new_key
from models import Reservation, utcnow
from models.tables import AnnotatorKey

__all__ = ["issue_key", "list_keys", "revoke_key"]


def _retire(session: Session, project_id: int, annotator: str) -> int:
    """Retire the annotator's live key; how many were live (0 or 1)."""
    result = session.execute(update(AnnotatorKey).where(
        AnnotatorKey.project_id == project_id, AnnotatorKey.annotator == annotator,
        AnnotatorKey.retired_at.is_(None)).values(retired_at=utcnow()))
    return int(getattr(result, "rowcount", 0) or 0)


def issue_key(session: Session, project_id: int, annotator: str) -> AnnotatorKeyCreated:
    """A new key for ``annotator`` in the project; the name's earlier key stops working."""
    key = new_key()
    with write_transaction(session, project_id):
        _retire(session, project_id, annotator)
        row = AnnotatorKey(project_id=project_id, annotator=annotator, key_hash=hash_key(key),
                           created_at=utcnow())
        session.add(row)
        session.flush()
        created = AnnotatorKeyCreated(annotator=annotator, created_at=row.created_at,
                                      api_key=key)
    return created


def list_keys(session: Session, project_id: int) -> AnnotatorKeyPage:
    """Every annotator of the project with a live key, by name (never the keys)."""
    rows = session.execute(select(AnnotatorKey.annotator, AnnotatorKey.created_at).where(
        AnnotatorKey.project_id == project_id, AnnotatorKey.retired_at.is_(None))
        .order_by(AnnotatorKey.annotator)).all()
    return AnnotatorKeyPage(items=[AnnotatorKeyItem(annotator=r.annotator,
                                                    created_at=r.created_at) for r in rows])


def revoke_key(session: Session, project_id: int, annotator: str) -> None:
    """Revoke the annotator's key and end their leases; 404 when they hold none."""
    with write_transaction(session, project_id):
        if not _retire(session, project_id, annotator):
            raise NotFound(f"{annotator!r} holds no key of this project")
        session.execute(delete(Reservation).where(Reservation.project_id == project_id,
                                                  Reservation.annotator == annotator))
