"""Importing a file into a project: validate every record first, then write in batches.

The formats are those of ``docs/formats.md``: JSON Lines records (``project``, ``concept``,
``pair``, ``label``, ``retract``, ``answer``), a CSV file of one kind, or an AL-CPL domain
folder.

A *source* is a callable that returns a fresh iterator of ``(line, record or reason)`` each
time it is called: the import reads it twice, once to validate everything (nothing written, no
write lock held, every bad line listed), once to write through the same services as the JSON
routes (concepts, pairs, bulk labels, retractions), in batches of :data:`BATCH` records so that
no request-size limit applies; a run of labels is one batch, however long, so that it is one
bulk import (closed at once, :data:`~app.services.labels.shared.CANONICAL_MIN`). Neither pass
holds the file in memory, but for that run of labels (and the ``answer`` records).

A ``policy`` (and ``question``) of the file's ``project`` record is set once every record is
written: the labels are replayed under the project's policy as it was (``strict`` for a new
project), so that a project export's labels come back as they were, whatever its policy. A
file with ``answer`` records (a project export) brings its answers back as they were: they
replace the answers its labels would have given (one per label, source ``import``), each
linked to the label it stood behind.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from dataclasses import field as default
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError
from sqlalchemy import delete, func, insert, select

from app.errors import InvalidItems
from app.schemas import (
    AnswerOutcome,
    BulkLabels,
    ConceptIn,
    Description,
    LabelIn,
    LinkIn,
    Name,
    PairIn,
    PolicyName,
    PredictionModelName,
    Question,
    TextValue,
    label_value,
)
from app.schemas import Source as AnswerSource
from app.services.concepts import add_concepts
from app.services.corpus import FEATURE_LENGTH, change_corpus, set_texts
from app.services.labels import Refused, post_bulk, retract_label
from app.services.labels.policy import POLICIES, policy_of
from app.services.labels.proofs import pair_problem
from app.services.labels.shared import CANONICAL_MIN
from app.services.pairs import add_pairs
from app.services.staging import LabelStage, StagedLine, StagePolicy
from app.services.unit import ProjectView, ProjectWork
from app.settings import Settings
from models import Answer, AssertedLabel, Project
from reasoning.closure import Closure, ContradictionError, Label
from reasoning.data import load_domain

__all__ = [
    "AnswerRecord",
    "BATCH",
    "MAX_LISTED_ERRORS",
    "ImportSummary",
    "InputLimits",
    "PairRef",
    "Progress",
    "ProjectSettings",
    "Record",
    "Source",
    "TextRecord",
    "al_cpl_records",
    "al_cpl_source",
    "bounded_lines",
    "csv_records",
    "file_source",
    "import_source",
    "jsonl_records",
    "record_json",
    "too_deep",
    "validate",
]

BATCH = 10_000
"""Most records written by one service call (one short write transaction)."""
MAX_LISTED_ERRORS = 1_000
"""Most bad lines named in one refusal (the count says how many there were)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ProjectSettings(_Record):
    """The ``project`` record: settings applied to the target project (not its name)."""

    name: Name | None = None
    description: Description | None = None
    prediction_model: PredictionModelName | None = None
    feature_length: int | None = Field(default=None, ge=1)
    features: Literal["client", "computed"] | None = None
    policy: PolicyName | None = Field(
        default=None, description="Set once every record is written (the labels are "
        "replayed under the project's policy as it was).")
    question: Question | None = None


class PairRef(_Record):
    """The ``retract`` record: the live label on ``(a, b)`` is retracted."""

    a: Name
    b: Name


class LabelRecord(LabelIn):
    """The ``label`` record: a label, and the write it was asserted in (``batch``)."""

    batch: int | None = Field(
        default=None, ge=0, le=2**53,
        description="Labels of one batch are imported together, as one bulk import; a run "
        "of labels without it is one batch. The project export numbers its writes.")


Timestamp = Annotated[datetime, Strict(False)]


class AnswerRecord(_Record):
    """The ``answer`` record: one answer as kept (a project export writes them last).

    ``label_seq`` names the label it stood behind: the ``label_seq``-th ``label`` record of
    the file on the same pair (from 1), or none (a refused or contested answer).
    """

    a: Name
    b: Name
    label: Literal["positive", "negative"]
    annotator: Name | None = None
    role: Literal["annotator", "reviewer"] = "annotator"
    source: AnswerSource = "import"
    outcome: AnswerOutcome
    check: bool = False
    created_at: Timestamp
    retracted_at: Timestamp | None = None
    label_seq: int | None = Field(default=None, ge=1, le=2**31 - 1)

    @property
    def positive(self) -> bool:
        return self.label == "positive"


class TextRecord(_Record):
    """The ``text`` record: a concept's text (``""`` removes it)."""

    name: Name
    text: TextValue


Kind = Literal["project", "concept", "pair", "label", "retract", "text", "link", "answer"]
Item = (ProjectSettings | ConceptIn | PairIn | LabelIn | PairRef | TextRecord | LinkIn
        | AnswerRecord)
_MODELS: dict[str, type[BaseModel]] = {
    "project": ProjectSettings, "concept": ConceptIn, "pair": PairIn, "label": LabelRecord,
    "retract": PairRef, "text": TextRecord, "link": LinkIn, "answer": AnswerRecord,
}


@dataclass(frozen=True)
class Record:
    """One record of a file: its first line number, its kind and its validated fields."""

    line: int
    kind: Kind
    item: Item


Parsed = Iterator[tuple[int, Record | str]]
"""``(line, record)`` for a good record, ``(line, reason)`` for a bad one."""
Source = Callable[[], Parsed]


class ImportSummary(BaseModel):
    """What an import wrote, per kind: new items and items that were already there."""

    concepts_created: int = 0
    concepts_known: int = 0
    pairs_created: int = 0
    pairs_unchanged: int = 0
    labels_created: int = 0
    labels_unchanged: int = 0
    labels_retracted: int = 0
    texts_set: int = 0
    links_created: int = 0
    answers_created: int = 0
    records: int = 0


def _reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(parts)


def _item(kind: str, fields: dict[str, Any]) -> Item | str:
    model = _MODELS.get(kind)
    if model is None:
        return f"unknown kind {kind!r} (want one of {', '.join(_MODELS)})"
    try:
        item: Item = model.model_validate(fields)  # type: ignore[assignment]
    except ValidationError as exc:
        return _reason(exc)
    return item


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


# ---------------------------------------------------------------------------- parsers
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
        item = _item(kind, value)
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
        return _item(kind, {"a": row[0], "b": row[1], "features": features})
    fields = {column: (cell if cell != "" or column in ("name", "a", "b", "label") else None)
              for column, cell in zip(header, row, strict=True)}
    return _item(kind, fields)


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


def record_json(record: Record) -> str:
    """One JSON Lines line (without its newline) for ``record``."""
    fields = record.item.model_dump(mode="json", exclude_none=True)
    return json.dumps({"kind": record.kind, **fields}, ensure_ascii=False,
                      separators=(",", ":"))


# ---------------------------------------------------------------------------- validation
def _digest(features: list[float]) -> bytes:
    return hashlib.blake2b(np.asarray(features, dtype="<f8").tobytes(), digest_size=16).digest()


class _Validator:
    """Every check the writes would make, on a copy of the project's names, pool and closure.

    Concepts new to the project enter the closure copy under their names (the project's own
    under their ids), so labels between new concepts are closed like the others.
    """

    def __init__(self, view: ProjectView) -> None:
        state = view.state
        self.state = state
        self.new: set[str] = set()
        self.feature_length = view.project.feature_length
        self.consensus = not policy_of(view.project).refuses  # no label refused: all answers
        # True: the pool's features are computed; False: the client's; None: not known yet
        self.computed: bool | None = True if view.project.features_computed else (
            False if self.feature_length is not None else None)
        self.pool_digest: dict[tuple[str, str], bytes] = {}
        self.closure: Closure = state.closure.copy()
        self.live: set[tuple[Any, Any]] = set(state.closure.asserted)
        self.errors: list[dict[str, Any]] = []
        self.count = 0
        self.records = 0
        self.seen_project = False
        # a run of labels, checked together: (line, a, b, positive), names as in self.names
        self.pending: list[tuple[int, str, str, bool]] = []
        self.names: dict[str, str] = {}  # one object per name, however many lines use it
        self.labels = 0
        self.labels_last = True  # no record but labels after the first label
        self.retracts = 0
        self.answers = 0
        self.label_records: dict[tuple[str, str], int] = {}  # label records per pair
        self.label_refs: list[tuple[int, str, str, int]] = []  # answers' (line, a, b, seq)

    def fail(self, line: int, reason: str) -> None:
        self.count += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append({"line": line, "reason": reason})

    def key(self, name: str) -> Any:
        return self.state.id_of.get(name, name)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a concept of the project or of the file read so far."""
        return name in self.state.id_of or name in self.new

    def known(self, *names: str) -> str | None:
        missing = [n for n in names if n not in self]
        return "unknown concept " + ", ".join(repr(m) for m in missing) if missing else None

    def check(self, record: Record) -> str | None:
        item = record.item
        if isinstance(item, ProjectSettings):
            if self.seen_project or self.records > 1:
                return "a project record must be the first line, and the only one"
            self.seen_project = True
            if item.feature_length is not None and self.feature_length is not None \
                    and item.feature_length != self.feature_length:
                return f"feature_length {item.feature_length}, the project has " \
                       f"{self.feature_length}"
            if item.features is not None:
                return self.mode(item.features == "computed")
            return None
        if isinstance(item, ConceptIn):
            if item.name not in self.state.id_of and item.name not in self.new:
                self.new.add(item.name)
                self.closure.add_concept(item.name)
            return None
        if isinstance(item, TextRecord):
            return self.known(item.name)
        if isinstance(item, LinkIn):
            missing = self.known(item.source, item.target)
            return missing or ("a link needs two concepts" if item.source == item.target
                               else None)
        assert isinstance(item, PairIn | LabelIn | PairRef | AnswerRecord)
        problem = pair_problem(self, item.a, item.b, "pair")
        if problem is not None:
            return problem.reason
        if isinstance(item, AnswerRecord):
            self.answers += 1
            if item.label_seq is not None:
                self.label_refs.append((record.line, item.a, item.b, item.label_seq))
            return None
        if isinstance(item, PairIn):
            return self.pair(item)
        if isinstance(item, LabelIn):
            return self.label(item.a, item.b, item.positive)
        return self.retract(item)

    def mode(self, computed: bool) -> str | None:
        """The project's features are computed (or the client's) from here on."""
        if self.computed is not None and self.computed != computed:
            return ("the project's features are computed from texts and links: send pairs "
                    "without features" if self.computed else
                    "the project's pairs come with features (its features are not computed)")
        self.computed = computed
        if computed:
            self.feature_length = FEATURE_LENGTH
        return None

    def pair(self, item: PairIn) -> str | None:
        if item.features is None or self.computed:
            return self.mode(item.features is None)
        if (refused := self.mode(False)) is not None:
            return refused
        if self.feature_length is None:
            self.feature_length = len(item.features)
        if len(item.features) != self.feature_length:
            return f"{len(item.features)} features, the project has {self.feature_length}"
        ids = (self.state.id_of.get(item.a), self.state.id_of.get(item.b))
        row = self.state.pool.row_of.get(ids) if None not in ids else None  # type: ignore[arg-type]
        digest = _digest(item.features)
        known = _digest(self.state.pool.features[row].tolist()) if row is not None \
            else self.pool_digest.get((item.a, item.b))
        if known is not None and known != digest:
            return "already registered with other features"
        if known is None:
            self.pool_digest[(item.a, item.b)] = digest
        return None

    def label(self, a_name: str, b_name: str, positive: bool) -> str | None:
        a, b = self.key(a_name), self.key(b_name)
        if self.consensus:
            self.live.add((a, b))
            return None
        status = self.closure.status(a, b)
        if status.asserted and status.value == positive:
            return None
        try:
            self.closure.add_label(a, b, positive)
        except ContradictionError as exc:
            name: dict[Any, str] = self.state.name_of
            cited = ", ".join(
                f"({name.get(p.a, p.a)}, {name.get(p.b, p.b)}) "
                f"{label_value(p.positive)}" for p in exc.proof.labels)
            return f"contradicts the labels {cited}"
        self.live.add((a, b))
        return None

    def flush(self) -> None:
        """Check the run of labels read since the last other record.

        A long run is closed at once with the labels before it (the cost of the closure's
        rows, whatever the order: a chain of 20,000 is checked in a second); only when that
        finds a contradiction are the labels checked one by one, to name each bad line.
        """
        pending, self.pending = self.pending, []
        if len(pending) >= CANONICAL_MIN:
            seen: dict[tuple[Any, Any], bool] = {
                (lab.a, lab.b): lab.positive for lab in self.closure.asserted_labels()}
            if all(seen.setdefault((self.key(a), self.key(b)), positive) == positive
                   for _, a, b, positive in pending):  # a repeated label is one label
                closed = Closure.closed([Label(a, b, positive) for (a, b), positive
                                         in seen.items()], self.closure.concepts)
                if closed is not None:
                    self.closure = closed
                    self.live.update(seen)
                    return
        for line, a, b, positive in pending:
            reason = self.label(a, b, positive)
            if reason is not None:
                self.fail(line, reason)

    def retract(self, item: PairRef) -> str | None:
        self.flush()
        self.retracts += 1
        a, b = self.key(item.a), self.key(item.b)
        if (a, b) not in self.live:
            return "no live label on this pair to retract"
        self.live.discard((a, b))
        self.closure = self.closure.retract(a, b)
        return None

    def run(self, source: Source) -> None:
        for line, parsed in source():
            self.records += 1
            if not isinstance(parsed, str) and isinstance(parsed.item, LabelIn) \
                    and pair_problem(self, parsed.item.a, parsed.item.b) is None:
                item = parsed.item
                self.labels += 1
                pair = (item.a, item.b)
                self.label_records[pair] = self.label_records.get(pair, 0) + 1
                self.pending.append((line, self.names.setdefault(item.a, item.a),
                                     self.names.setdefault(item.b, item.b), item.positive))
                continue
            if self.labels:
                self.labels_last = False
            self.flush()  # errors come out in the order of their lines
            if isinstance(parsed, str):
                self.fail(line, parsed)
                continue
            reason = self.check(parsed)
            if reason is not None:
                self.fail(line, reason)
        self.flush()
        for line, a, b, seq in self.label_refs:
            if seq > self.label_records.get((a, b), 0):
                self.fail(line, f"label_seq {seq}: the file has "
                                f"{self.label_records.get((a, b), 0)} label(s) on this pair")


def _validated(view: ProjectView, source: Source) -> _Validator:
    checker = _Validator(view)
    view.session.rollback()  # no read transaction stays open during a long validation
    checker.run(source)
    if checker.count:
        error = InvalidItems(checker.errors, "lines of the file")
        error.members["invalid_lines"] = checker.count
        raise error
    return checker


def validate(view: ProjectView, source: Source) -> int:
    """Check every record of ``source`` against the project; the number of records.

    Raises :class:`InvalidItems` listing each bad line (``{"line", "reason"}``, the first
    :data:`MAX_LISTED_ERRORS`); the project is not changed either way.
    """
    return _validated(view, source).records


# ---------------------------------------------------------------------------- writing
@dataclass
class _Later:
    """What is written once every other record is: the ``policy`` and ``question`` of the
    ``project`` record, and the file's answers (which replace those its labels gave)."""

    marks: tuple[int, int]  # the project's newest answer id and label id before the file
    settings: dict[str, Any] = default(default_factory=dict)
    answers: list[AnswerRecord] = default(default_factory=list)

    @classmethod
    def at(cls, work: ProjectWork) -> _Later:
        pid = work.state.project_id
        answer = work.session.scalar(select(func.max(Answer.id)).where(Answer.project_id == pid))
        label = work.session.scalar(select(func.max(AssertedLabel.id))
                                    .where(AssertedLabel.project_id == pid))
        return cls((int(answer or 0), int(label or 0)))


def _answer_rows(work: ProjectWork, later: _Later) -> list[dict[str, Any]]:
    """The file's answers as rows, each linked to the label it stood behind: the
    ``label_seq``-th label the file made on its pair (or the live label agreeing with it)."""
    state = work.state
    made: dict[tuple[int, int], list[int]] = {}
    for made_id, a, b in work.session.execute(
            select(AssertedLabel.id, AssertedLabel.a_id, AssertedLabel.b_id)
            .where(AssertedLabel.project_id == state.project_id,
                   AssertedLabel.id > later.marks[1]).order_by(AssertedLabel.id)):
        made.setdefault((a, b), []).append(made_id)
    rows = []
    for item in later.answers:
        pair = (state.id_of[item.a], state.id_of[item.b])
        label_id: int | None = None
        seq, live = item.label_seq, state.labels.get(pair)
        if seq is not None and seq <= len(made.get(pair, ())):
            label_id = made[pair][seq - 1]
        elif seq is not None and live is not None and live.positive == item.positive:
            label_id = live.id  # the file's label was there already
        rows.append({"project_id": state.project_id, "a_id": pair[0], "b_id": pair[1],
                     "positive": item.positive, "annotator": item.annotator,
                     "role": item.role, "source": item.source, "outcome": item.outcome,
                     "check_question": item.check, "label_id": label_id,
                     "created_at": item.created_at, "retracted_at": item.retracted_at})
    return rows


def _finish(work: ProjectWork, later: _Later, summary: ImportSummary) -> None:
    """Write what waited for every other record (:class:`_Later`)."""
    if not (later.answers or later.settings):
        return

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        if later.answers:
            work.session.execute(delete(Answer).where(Answer.project_id == project.id,
                                                      Answer.id > later.marks[0]))
            work.session.execute(insert(Answer), _answer_rows(work, later))
            summary.answers_created += len(later.answers)
        for name, value in later.settings.items():
            # a policy that keeps the labels as given is set here; one that draws them from
            # the answers by its adopt() below, with the labels it draws
            if name != "policy" or POLICIES[value].refuses:
                setattr(project, name, value)
        project.version += 1

    work.write(lambda work: None, store)
    final = POLICIES[later.settings.get("policy", work.project.policy)]
    if not final.refuses and ("policy" in later.settings or later.answers):
        final.adopt(work)  # the labels follow the answers, as a change of policy does


def _apply_settings(work: ProjectWork, item: ProjectSettings) -> None:
    changes: dict[str, Any] = item.model_dump(include={"description", "prediction_model"},
                                              exclude_none=True)
    if item.features == "computed" and not work.project.features_computed:
        changes.update(features_computed=True, feature_length=FEATURE_LENGTH)
    if not changes:
        return

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        for field, value in changes.items():
            setattr(project, field, value)
        project.version += 1  # other processes drop their trained models
        work.state.feature_length = project.feature_length

    work.write(lambda work: None, store)


def _write_batch(work: ProjectWork, kind: Kind, items: list[Any], summary: ImportSummary,
                 later: _Later) -> None:
    if kind == "project":
        for item in items:
            _apply_settings(work, item)
            later.settings.update(item.model_dump(include={"policy", "question"},
                                                  exclude_none=True))
    elif kind == "answer":
        later.answers += items
    elif kind == "concept":
        created, stored = add_concepts(work, items)
        summary.concepts_created += created
        summary.concepts_known += len(stored) - created
    elif kind == "pair":
        pairs = add_pairs(work, items)
        summary.pairs_created += pairs.created
        summary.pairs_unchanged += pairs.unchanged
    elif kind == "text":
        summary.texts_set += set_texts(work, {item.name: item.text for item in items})
    elif kind == "link":
        plan, _ = change_corpus(work, add_links=[(item.source, item.target) for item in items])
        summary.links_created += len(plan.links_added)
    elif kind == "label":
        # a run has no length limit: no request made it (validated record by record)
        written = post_bulk(work, BulkLabels.model_construct(labels=items), source="import")
        if isinstance(written, Refused):  # validated, unless labels changed since
            raise written.error
        summary.labels_created += written.answer.created
        summary.labels_unchanged += written.answer.unchanged
    else:
        state = work.state
        for item in items:
            live = state.labels[(state.id_of[item.a], state.id_of[item.b])]
            retract_label(work, live.id)
            summary.labels_retracted += 1


def _batch(item: Any) -> int | None:
    return item.batch if isinstance(item, LabelRecord) else None


Progress = Callable[[int, int], None]
"""Called after each batch written with ``(records in the batch, records in the file)``."""


def _write(work: ProjectWork, records: Iterable[Record], total: int,
           progress: Progress | None, summary: ImportSummary | None = None) -> ImportSummary:
    """Write ``records`` in file order, through the services, batch by batch."""
    summary = summary or ImportSummary()
    later = _Later.at(work)
    kind: Kind | None = None
    batch: list[Any] = []
    for record in records:
        summary.records += 1
        if batch and (record.kind != kind or (len(batch) >= BATCH and kind != "label")
                      or (kind == "label" and _batch(record.item) != _batch(batch[0]))):
            assert kind is not None
            _write_batch(work, kind, batch, summary, later)
            if progress is not None:
                progress(len(batch), total)
            batch = []
        kind = record.kind
        batch.append(record.item)
    if batch and kind is not None:
        _write_batch(work, kind, batch, summary, later)
        if progress is not None:
            progress(len(batch), total)
    _finish(work, later, summary)
    return summary


def _records(source: Source) -> Iterator[Record]:
    """The records of a validated source."""
    for _, parsed in source():
        assert isinstance(parsed, Record)  # validated
        yield parsed


def _stage_labels(stage: LabelStage, source: Source, summary: ImportSummary, total: int,
                  progress: Progress | None) -> None:
    """Stage every run of labels of ``source`` (its other records come first)."""
    run: dict[tuple[str, str], StagedLine] = {}  # a repeated label is unchanged: kept once
    lines = 0
    batch: int | None = None

    def staged(done: int) -> None:
        if progress is not None:
            progress(done, total)

    def flush() -> None:
        nonlocal lines
        created = stage.stage_run(list(run.values()), staged)
        summary.labels_created += created
        summary.labels_unchanged += lines - created
        summary.records += lines
        run.clear()
        lines = 0

    for record in _records(source):
        item = record.item
        if isinstance(item, ConceptIn):
            stage.add_concept(item.name)
        elif isinstance(item, LabelIn):
            if lines and _batch(item) != batch:
                flush()
            batch = _batch(item)
            lines += 1
            if (item.a, item.b) not in run:
                run[(item.a, item.b)] = stage.label(item.a, item.b, item.positive,
                                                    item.annotator)
    if lines:
        flush()


def _import_staged(work: ProjectWork, source: Source, total: int, progress: Progress | None,
                   policy: StagePolicy) -> ImportSummary:
    """The labels staged in short writes, then switched in with the rest of the file."""
    summary = ImportSummary()

    def write_others(work: ProjectWork) -> None:  # in the switch's write transaction
        others = itertools.takewhile(lambda r: r.kind != "label", _records(source))
        _write(work, others, total, progress, summary)

    stage = LabelStage.open(work, policy)
    try:
        _stage_labels(stage, source, summary, total, progress)
        stage.switch(write_others)
    finally:
        stage.close(policy.timeout)
    return summary


def import_source(work: ProjectWork, source: Source, *, progress: Progress | None = None,
                  policy: StagePolicy | None = None) -> ImportSummary:
    """Validate every record of ``source``, then write them all in file order, atomically.

    Raises :class:`InvalidItems` (every bad line) before anything is written. A file whose
    labels come last (no retraction) and number at least ``policy.min_labels`` has them
    staged in short transactions and switched in with its other records in one
    (:mod:`app.services.staging`); any other file is written in one transaction. Either
    way a failure part-way (a crash, a concurrent change) stores nothing.
    """
    checker = _validated(work, source)
    policy = policy or StagePolicy()
    records = checker.records
    staged = (checker.labels >= policy.min_labels and checker.labels_last
              and not (checker.retracts or checker.answers)
              and not checker.consensus)  # consensus: every label an answer
    del checker  # its copy of the closure: the writes make their own
    if staged:
        return _import_staged(work, source, records, progress, policy)
    with work.atomically():  # all of the file or none of it
        return _write(work, _records(source), records, progress)
