"""The stored form of a bitset over concept ordinals (the lines of ``closure_effects``).

Kept apart from :mod:`app.services.labels.store`, which writes them, so that a reader such as
:mod:`app.services.asking` decodes them without importing the label writers.
"""

from __future__ import annotations

import zlib

__all__ = ["decode", "encode"]


def encode(bits: int) -> bytes:
    """A bitset as stored: little-endian bytes, zlib-compressed (runs and gaps shrink).

    Examples
    --------
    >>> decode(encode(0b1011))
    11
    """
    return zlib.compress(bits.to_bytes(max(1, (bits.bit_length() + 7) // 8), "little"), 1)


def decode(blob: bytes) -> int:
    """The bitset of :func:`encode`."""
    return int.from_bytes(zlib.decompress(blob), "little")
