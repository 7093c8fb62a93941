"""SQLAlchemy ORM tables of the service (imports only sqlalchemy)."""

from models.base import NAMING_CONVENTION, Base, UTCDateTime, utcnow
from models.tables import (
    NAME_LENGTH,
    POLICIES,
    Answer,
    AssertedLabel,
    CheckQuestion,
    ClosureEffect,
    Concept,
    ConceptLink,
    ConceptText,
    Disagreement,
    IdempotencyRecord,
    PoolPair,
    Project,
    Reservation,
    Suggestion,
)

__all__ = [
    "NAME_LENGTH",
    "NAMING_CONVENTION",
    "AssertedLabel",
    "Base",
    "ClosureEffect",
    "Concept",
    "ConceptLink",
    "ConceptText",
    "IdempotencyRecord",
    "PoolPair",
    "Project",
    "Answer",
    "CheckQuestion",
    "Disagreement",
    "POLICIES",
    "Reservation",
    "Suggestion",
    "UTCDateTime",
    "utcnow",
]
