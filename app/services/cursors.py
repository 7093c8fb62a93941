"""Keyset cursors: the ``next`` of a page, and the one way a cursor is read back.

A cursor is URL-safe base64 (unpadded) of compact JSON of one flat shape: an array (the labels'
``[key, a, b]``) or an object (the answers' and disagreements' ``{"after": key}``) of ids and
names. Paging routes take the cursor from the client, so :meth:`CursorShape.decode` trusts
nothing in it: it is bounded in length, its JSON is checked to be flat before it is parsed (no
recursion however deep the brackets), every id is within the range of the id columns (32-bit on
PostgreSQL, so a query never overflows), and the cursor must be exactly what
:meth:`CursorShape.encode` gives for what it holds. Anything else is
:class:`~app.errors.InvalidCursor` (422).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidCursor
from app.security import MAX_ID

__all__ = ["ANSWERS", "DISAGREEMENTS", "LABELS", "MAX_CURSOR_LENGTH", "CursorShape"]

MAX_CURSOR_LENGTH = 4096
"""The longest cursor read (the routes' ``max_length``)."""

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


@dataclass(frozen=True)
class CursorShape:
    """What one kind of cursor holds.

    Attributes
    ----------
    fields : tuple of type
        The type of each value in order: ``int`` (an id, 1 to :data:`~app.security.MAX_ID`)
        or ``str``.
    names : tuple of str, optional
        The keys of an object cursor, one per field; None for an array cursor.
    """

    fields: tuple[type, ...]
    names: tuple[str, ...] | None = None

    def encode(self, *values: Any) -> str:
        """The cursor of ``values`` (one per field)."""
        payload: Any = list(values) if self.names is None else dict(
            zip(self.names, values, strict=True))
        raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def decode(self, cursor: str) -> tuple[Any, ...]:
        """The values of a cursor that :meth:`encode` gave; :class:`InvalidCursor` otherwise.

        Examples
        --------
        >>> LABELS.decode(LABELS.encode(7, "a", "b"))
        (7, 'a', 'b')
        >>> try:
        ...     ANSWERS.decode(ANSWERS.encode(2**31))  # beyond the id column
        ... except InvalidCursor:
        ...     print("invalid")
        invalid
        """
        values = self._values(cursor) if isinstance(cursor, str) else None
        if values is None or self.encode(*values) != cursor:
            raise InvalidCursor(str(cursor))
        return values

    def _values(self, cursor: str) -> tuple[Any, ...] | None:
        """What the cursor holds if it has this shape (not yet checked to be canonical)."""
        if len(cursor) > MAX_CURSOR_LENGTH or not _ALPHABET.fullmatch(cursor):
            return None
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
            if not _flat(text):
                return None
            payload = json.loads(text)
        except (ValueError, binascii.Error):  # UnicodeDecodeError and JSON errors included
            return None
        if self.names is None:
            values = payload if isinstance(payload, list) else None
        elif isinstance(payload, dict) and list(payload) == list(self.names):
            values = [payload[name] for name in self.names]
        else:
            values = None
        if values is None or len(values) != len(self.fields):
            return None
        if not all(_fits(value, kind) for value, kind in zip(values, self.fields, strict=True)):
            return None
        return tuple(values)


def _flat(text: str) -> bool:
    """True when the JSON text opens at most one array or object (strings aside): what a
    cursor holds, and nothing that parsing could recurse into."""
    bare = _JSON_STRING.sub('""', text)
    return bare.count("[") + bare.count("{") <= 1


def _fits(value: Any, kind: type) -> bool:
    if kind is int:  # an id: never a bool, never beyond the column
        return type(value) is int and 1 <= value <= MAX_ID
    return type(value) is kind


LABELS = CursorShape((int, str, str))
"""``GET .../labels?after=``: the key of the last item's label, then its pair's names."""

ANSWERS = CursorShape((int,), names=("after",))
"""``GET .../answers?cursor=``: the id of the last answer of the page."""

DISAGREEMENTS = CursorShape((int,), names=("after",))
"""``GET .../disagreements?cursor=``: the id of the last disagreement of the page."""
