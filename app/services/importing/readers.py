"""The readers of an import file: JSON Lines, CSV, and an AL-CPL domain folder.

Each gives a source (:data:`~app.services.importing.records.Source`) whose records are read
line by line and checked before they are parsed (:class:`InputLimits`): no line over its
length limit is held whole, no JSON nested deeper than its limit is parsed.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from app.schemas import ConceptIn, LabelIn, PairIn, label_value
from app.services.importing.records import Item, Kind, Parsed, Record, Source, item_of
from app.settings import Settings
from reasoning.data import load_domain

__all__ = [
    "InputLimits",
    "al_cpl_records",
    "al_cpl_source",
    "bounded_lines",
    "csv_records",
    "file_source",
    "jsonl_records",
    "too_deep",
]


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


@dataclass(frozen=True)
class InputLimits:
    """What one line of a file may hold, checked before it is parsed (docs/formats.md)."""

    line_bytes: int = 16 * 1024 * 1024
    depth: int = 64

    @classmethod
    def of(cls, settings: Settings) -> InputLimits:
        return cls(settings.max_import_line_bytes, settings.max_import_depth)


_SKIP = 1024 * 1024


def bounded_lines(handle: IO[bytes], cap: int) -> Iterator[bytes | None]:
    """Each line of ``handle`` (its newline included), or None for a line over ``cap`` bytes.

    A long line is never held whole: its first ``cap + 1`` bytes tell, the rest is read in
    chunks and dropped, so the next line keeps its number.
    """
    while raw := handle.readline(cap + 1):
        if len(raw) <= cap:
            yield raw
            continue
        while not raw.endswith(b"\n") and (raw := handle.readline(_SKIP)):
            pass
        yield None


_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{\]}]')


def too_deep(raw: bytes, limit: int) -> bool:
    """Whether the JSON text ``raw`` nests arrays and objects deeper than ``limit``.

    Brackets inside strings do not count; a line with few brackets is not scanned at all.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for match in _TOKENS.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _too_long(limits: InputLimits) -> str:
    return f"longer than {limits.line_bytes} bytes (SPORAL_MAX_IMPORT_LINE_BYTES)"


def _json_value(line: int, raw: bytes, limits: InputLimits) -> Any:
    """The JSON value of one line, or a :class:`_BadLine` saying why not."""
    if too_deep(raw, limits.depth):
        return _BadLine(line, f"nested deeper than {limits.depth} (SPORAL_MAX_IMPORT_DEPTH)")
    try:
        return json.loads(raw.decode("utf-8-sig" if line == 1 else "utf-8"),
                          parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        return _BadLine(line, f"not UTF-8: {exc.reason} at byte {exc.start}")
    except ValueError as exc:
        return _BadLine(line, f"not JSON: {exc}")
    except RecursionError:  # deeper than the interpreter allows, under the limit set
        return _BadLine(line, "nested too deep")


class _BadLine(Exception):
    """A line that cannot be read: its number and why."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line, self.reason = line, reason


def jsonl_records(lines: Iterable[bytes | None], limits: InputLimits = InputLimits()) -> Parsed:
    """The records of a JSON Lines byte stream, one per non-blank line (None: a line over
    the length cap, from :func:`bounded_lines`)."""
    for line, raw in enumerate(lines, start=1):
        if raw is None:
            yield line, _too_long(limits)
            continue
        if not raw.strip():
            continue
        value = _json_value(line, raw, limits)
        if isinstance(value, _BadLine):
            yield line, value.reason
            continue
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
            yield line, 'want a JSON object with a "kind"'
            continue
        kind = value.pop("kind")
        item = item_of(kind, value)
        yield (line, item) if isinstance(item, str) else (line, Record(line, kind, item))


def _csv_kind(header: list[str]) -> tuple[Kind, list[str]] | str:
    if header in (["name"], ["name", "description"]):
        return "concept", header
    if header[:3] == ["a", "b", "label"] and header[3:] in ([], ["annotator"]):
        return "label", header
    if header[:2] == ["a", "b"] and len(header) > 2:
        if len(set(header)) != len(header):
            return "duplicate column names"
        return "pair", header
    return ("unknown header: want name[,description], a,b,label[,annotator], or a,b and one "
            "column per feature")


def _csv_item(kind: Kind, header: list[str], row: list[str]) -> Item | str:
    if len(row) != len(header):
        return f"{len(row)} cells, the header has {len(header)}"
    if kind == "pair":
        features: list[float] = []
        for column, cell in zip(header[2:], row[2:], strict=True):
            try:
                value = float(cell)
            except ValueError:
                return f"column {column!r}: {cell!r} is not a number"
            if not math.isfinite(value):
                return f"column {column!r}: {cell!r} is not finite"
            features.append(value)
        return item_of(kind, {"a": row[0], "b": row[1], "features": features})
    fields = {column: (cell if cell != "" or column in ("name", "a", "b", "label") else None)
              for column, cell in zip(header, row, strict=True)}
    return item_of(kind, fields)


def _csv_text(lines: Iterable[bytes | None], limits: InputLimits) -> Iterator[str]:
    """The physical lines decoded one by one, so that an error names its own line."""
    for line, raw in enumerate(lines, start=1):
        if raw is None:
            raise _BadLine(line, _too_long(limits))
        try:
            yield raw.decode("utf-8-sig" if line == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _BadLine(line, f"not UTF-8: {exc.reason} at byte {exc.start}") from None


def csv_records(lines: Iterable[bytes | None], limits: InputLimits = InputLimits()) -> Parsed:
    """The records of a CSV byte stream (physical lines, as :func:`bounded_lines` gives
    them); the header names them. A line that cannot be read ends the file there."""
    reader = csv.reader(_csv_text(lines, limits))
    first = 1
    kind: tuple[Kind, list[str]] | str = "no header"
    try:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield first, f"not CSV: {exc}"
                return
            line, first = first, reader.line_num + 1
            if line == 1:
                kind = _csv_kind([h.lstrip("\ufeff") for h in row])
                if isinstance(kind, str):
                    yield 1, kind
                    return
                continue
            if not row or isinstance(kind, str):
                continue
            item = _csv_item(kind[0], kind[1], row)
            yield (line, item) if isinstance(item, str) else (line, Record(line, kind[0], item))
    except _BadLine as bad:
        yield bad.line, bad.reason


def file_source(open_file: Callable[[], AbstractContextManager[IO[bytes]]],
                fmt: Literal["csv", "jsonl"], limits: InputLimits = InputLimits()) -> Source:
    """A source reading a binary file from its start on each pass (``open_file`` opens it);
    no line over ``limits.line_bytes`` is read whole."""

    def records() -> Parsed:
        with open_file() as handle:
            lines = bounded_lines(handle, limits.line_bytes)
            if fmt == "jsonl":
                yield from jsonl_records(lines, limits)
            else:
                yield from csv_records(lines, limits)

    return records


def al_cpl_records(folder: str | Path, domain: str, *, with_labels: bool) -> Iterator[Record]:
    """An AL-CPL domain as records: its concepts, every row as a pool pair, and its labels.

    A row ``A,B`` is the pair ``(B, A)`` (B is a prerequisite of A when its label is 1; read
    by :func:`reasoning.data.load_domain`).
    """
    data = load_domain(folder, domain)
    line = 0
    for name in data.concepts:
        line += 1
        yield Record(line, "concept", ConceptIn(name=name))
    for (a, b), features in zip(data.pairs, data.features, strict=True):
        line += 1
        yield Record(line, "pair", PairIn(a=a, b=b, features=features.tolist()))
    if with_labels:
        for (a, b), positive in zip(data.pairs, data.labels, strict=True):
            line += 1
            yield Record(line, "label", LabelIn(a=a, b=b, label=label_value(bool(positive))))


def al_cpl_source(folder: str | Path, domain: str, *, with_labels: bool) -> Source:
    """:func:`al_cpl_records` as a source (the domain is read once, kept for both passes)."""
    records = list(al_cpl_records(folder, domain, with_labels=with_labels))

    def source() -> Parsed:
        return ((r.line, r) for r in records)

    return source
