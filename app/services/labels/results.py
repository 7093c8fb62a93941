"""What a label write answers: :class:`Written` or :class:`Refused`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from app.errors import BulkContradiction, Contradiction

__all__ = ["Refused", "Written"]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Written(Generic[M]):
    """A label write that went through: its answer, ``created`` (a bulk import always is),
    or not (the one label posted was already asserted the same way)."""

    answer: M
    created: bool = True


@dataclass(frozen=True)
class Refused:
    """A label write refused by the order: nothing asserted; ``error`` holds the proof."""

    error: Contradiction | BulkContradiction
