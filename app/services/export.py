"""Export every decided pair of a project: CSV, JSON, or GraphML of the positive relation;
or the whole project (``project``) as JSON Lines in the import format (docs/formats.md).

A format is a frozen :class:`ExportFormat` object in the registry :data:`FORMATS` (its name,
media type, file suffix, the JSON schema type of its body in the OpenAPI document, its
writer, and whether it carries the map's quality), read by name with :func:`get_format`. The
route's ``format`` values and documented media types come from the registry: a new format is
one writer and one line there. The JSON export and the project export carry how many of the
map's pool pairs are likely wrong (``GET quality``'s body, which the route computes for them
only): the JSON export as its ``quality`` member, the project export as its ``quality``
record, after the ``project`` record (an import does not read it).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from xml.sax.saxutils import quoteattr

from sqlalchemy import String, case, cast, select
from sqlalchemy.orm import Session, aliased

from app.errors import ValidationFailed
from app.schemas import DEFAULT_QUESTION, label_value
from app.services.labels.confidence import pair_confidence
from app.services.labels.listing import Filters, iter_labels, snapshot, with_confidence
from app.services.labels.policy import DEFAULT_POLICY
from app.services.state import decode_features
from models import (
    AnnotatorExclusion,
    Answer,
    AssertedLabel,
    Concept,
    ConceptLink,
    ConceptText,
    Disagreement,
    PoolPair,
    ReaskedPair,
)
from models.tables import DisagreementResolution

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "ExportFormat",
    "Writer",
    "csv_chunks",
    "csv_parts",
    "export",
    "get_format",
    "neutralise_cell",
    "project_lines",
]

CSV_COLUMNS = ["a", "b", "label", "source", "id", "caused_by", "annotator", "confidence",
               "contested"]
"""The columns of the CSV export and the keys of the JSON export's items (new ones appended)."""
# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: Any) -> Any:
    """The cell, with a leading ``'`` when a spreadsheet would read it as a formula.

    Example
    -------
    >>> neutralise_cell("=1+1"), neutralise_cell("limit"), neutralise_cell(7)
    ("'=1+1", 'limit', 7)
    """
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


_CHUNK = 1 << 16  # characters per chunk of the stream


def _decided(session: Session, project_id: int) -> Iterator[dict[str, Any]]:
    """Every decided pair, in the order of ``GET labels``, streamed from the stored lines,
    with its ``confidence`` and whether it is ``contested``."""
    snap = snapshot(session, project_id)
    return with_confidence(session, snap, iter_labels(session, snap, Filters()))


def _chunks(parts: Iterator[str]) -> Iterator[bytes]:
    """The text as byte chunks of about :data:`_CHUNK` characters (the first comes early)."""
    buffer: list[str] = []
    size = 0
    for part in parts:
        buffer.append(part)
        size += len(part)
        if size >= _CHUNK:
            yield "".join(buffer).encode("utf-8")
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode("utf-8")


def _cell(value: Any) -> Any:
    """A CSV cell: empty for None, ``true``/``false`` for a boolean, else neutralised."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return neutralise_cell(value)


def csv_parts(columns: Sequence[str], items: Iterable[dict[str, Any]]) -> Iterator[str]:
    """``items`` as CSV text under a header of ``columns`` (other keys left out), in parts as
    it is written: empty cells for None, ``true``/``false`` for booleans, cells a spreadsheet
    would run as formulas neutralised (:func:`neutralise_cell`). Every CSV the service writes
    is written here."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for item in items:
        writer.writerow({k: _cell(item.get(k)) for k in columns})
        if buffer.tell() >= _CHUNK:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _json(project: dict[str, Any], quality: dict[str, Any] | None,
          items: Iterator[dict[str, Any]]) -> Iterator[str]:
    head: dict[str, Any] = {"project": project}
    if quality is not None:
        head["quality"] = quality
    yield json.dumps(head, ensure_ascii=False, default=str)[:-1] + ', "items": ['
    separator = ""
    for item in items:
        yield separator + json.dumps({k: item.get(k) for k in CSV_COLUMNS},
                                     ensure_ascii=False, default=str)
        separator = ", "
    yield "]}"


_GRAPHML_HEAD = (
    "<?xml version='1.0' encoding='utf-8'?>\n"
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
    'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
    '  <key id="d0" for="edge" attr.name="asserted" attr.type="boolean"/>\n'
    '  <key id="d1" for="edge" attr.name="caused_by" attr.type="long"/>\n'
    '  <key id="d2" for="edge" attr.name="confidence" attr.type="double"/>\n'
    '  <key id="d3" for="edge" attr.name="contested" attr.type="boolean"/>\n'
    '  <graph edgedefault="directed">\n')


def _graphml(session: Session, project_id: int,
             items: Iterator[dict[str, Any]]) -> Iterator[str]:
    """The positive relation as GraphML, written as it streams (asserted edges marked; each
    edge's confidence, and whether it is contested)."""
    yield _GRAPHML_HEAD
    for name in session.scalars(select(Concept.name).where(Concept.project_id == project_id,
                                                           Concept.deleted_at.is_(None))
                                .order_by(Concept.id)):
        yield f"    <node id={quoteattr(name)}/>\n"
    for item in items:
        if item["label"] == "positive":
            asserted = "true" if item["source"] == "asserted" else "false"
            yield (f"    <edge source={quoteattr(item['a'])} target={quoteattr(item['b'])}>"
                   f'<data key="d0">{asserted}</data>'
                   f'<data key="d1">{int(item["caused_by"])}</data>'
                   f'<data key="d2">{item["confidence"]!r}</data>'
                   f'<data key="d3">{"true" if item["contested"] else "false"}</data>'
                   '</edge>\n')
    yield "  </graph>\n</graphml>\n"


def _line(kind: str, **fields: Any) -> str:
    fields = {k: v for k, v in fields.items() if v is not None}
    return json.dumps({"kind": kind, **fields}, ensure_ascii=False, separators=(",", ":")) + "\n"


@dataclass(frozen=True)
class _Names:
    """How the file names the project's concepts: a live one by its name, a deleted one (a
    tombstone) by the name it had, or, where that name is taken again (by a concept or
    another tombstone), by ``"<name> (deleted <id>)"``; ``tombstones``: ``(file name,
    deleted_at)`` of each, oldest first."""

    renamed: frozenset[int]
    tombstones: list[tuple[str, datetime]]

    @classmethod
    def read(cls, session: Session, pid: int) -> _Names:
        rows: list[tuple[int, str, datetime]] = [
            (int(k), str(name), at) for k, name, at in session.execute(
                select(Concept.id, Concept.deleted_name, Concept.deleted_at)
                .where(Concept.project_id == pid, Concept.deleted_at.is_not(None))
                .order_by(Concept.id)) if at is not None]
        if not rows:
            return cls(frozenset(), [])
        said = [name for _, name, _ in rows]
        live = set(session.scalars(select(Concept.name).where(
            Concept.project_id == pid, Concept.name.in_(sorted(set(said))))))
        renamed = frozenset(k for k, name, _ in rows if name in live or said.count(name) > 1)
        return cls(renamed, [(f"{name} (deleted {k})" if k in renamed else name, at)
                             for k, name, at in rows])

    def of(self, concept: Any) -> Any:
        """The SQL expression of the file's name of ``concept`` (a :class:`Concept` alias)."""
        whens: list[Any] = [(concept.deleted_at.is_(None), concept.name)]
        if self.renamed:
            whens.append((concept.id.in_(sorted(self.renamed)), concept.deleted_name
                          + " (deleted " + cast(concept.id, String) + ")"))
        return case(*whens, else_=concept.deleted_name)


def _answer_lines(session: Session, pid: int, labels: list[tuple[int, str, str]],
                  names: _Names) -> Iterator[str]:
    """Every answer, oldest first, each naming the label it stood behind by its place among
    the labels of its pair (``label_seq``: 1 for the first label asserted there)."""
    seq: dict[int, int] = {}
    count: dict[tuple[str, str], int] = {}
    for label_id, a_name, b_name in sorted(labels):
        count[(a_name, b_name)] = seq[label_id] = count.get((a_name, b_name), 0) + 1
    a, b = aliased(Concept), aliased(Concept)
    for row in session.execute(
            select(names.of(a), names.of(b), Answer.positive, Answer.annotator, Answer.role,
                   Answer.source,
                   Answer.outcome, Answer.check_question, Answer.created_at,
                   Answer.retracted_at, Answer.label_id)
            .join(a, a.id == Answer.a_id).join(b, b.id == Answer.b_id)
            .where(Answer.project_id == pid).order_by(Answer.id)):
        yield _line("answer", a=row[0], b=row[1], label=label_value(row[2]), annotator=row[3],
                    role=None if row[4] == "annotator" else row[4], source=row[5],
                    outcome=row[6], check=True if row[7] else None,
                    created_at=row[8].isoformat(),
                    retracted_at=None if row[9] is None else row[9].isoformat(),
                    label_seq=seq.get(row[10]) if row[10] is not None else None)


def _disagreement_lines(session: Session, pid: int, names: _Names) -> Iterator[str]:
    """Every disagreement, oldest first, with its close and its resolutions, each named by
    its place among the file's answers (``_answer_lines`` writes them in id order)."""
    links = session.execute(
        select(DisagreementResolution.disagreement_id, DisagreementResolution.answer_id)
        .join(Disagreement, Disagreement.id == DisagreementResolution.disagreement_id)
        .where(Disagreement.project_id == pid).order_by(DisagreementResolution.id)).all()
    place = {answer_id: k for k, answer_id in enumerate(session.scalars(
        select(Answer.id).where(Answer.project_id == pid).order_by(Answer.id)), 1)} \
        if links else {}
    resolved: dict[int, list[int]] = {}
    for k, answer_id in links:
        resolved.setdefault(k, []).append(place[answer_id])
    a, b = aliased(Concept), aliased(Concept)
    for row in session.execute(
            select(Disagreement.id, names.of(a), names.of(b), Disagreement.opened_at,
                   Disagreement.closed_at, Disagreement.closed_reason, Disagreement.reopened_at)
            .join(a, a.id == Disagreement.a_id).join(b, b.id == Disagreement.b_id)
            .where(Disagreement.project_id == pid).order_by(Disagreement.id)):
        yield _line("disagreement", a=row[1], b=row[2], opened_at=row[3].isoformat(),
                    closed_at=None if row[4] is None else row[4].isoformat(),
                    closed_reason=None if row[4] is None else row[5],
                    reopened_at=None if row[6] is None else row[6].isoformat(),
                    resolutions=resolved.get(row[0]))


def _team_action_lines(session: Session, pid: int) -> Iterator[str]:
    """The excluded annotators and the re-asked pairs, oldest first."""
    for annotator, role, at in session.execute(
            select(AnnotatorExclusion.annotator, AnnotatorExclusion.role,
                   AnnotatorExclusion.excluded_at)
            .where(AnnotatorExclusion.project_id == pid).order_by(AnnotatorExclusion.id)):
        yield _line("exclusion", annotator=annotator, role=role, excluded_at=at.isoformat())
    a, b = aliased(Concept), aliased(Concept)
    for a_name, b_name, annotator, at in session.execute(
            select(a.name, b.name, ReaskedPair.annotator, ReaskedPair.asked_at)
            .join(a, a.id == ReaskedPair.a_id).join(b, b.id == ReaskedPair.b_id)
            .where(ReaskedPair.project_id == pid, a.deleted_at.is_(None),
                   b.deleted_at.is_(None)).order_by(ReaskedPair.id)):
        yield _line("reask", a=a_name, b=b_name, annotator=annotator, asked_at=at.isoformat())


def _label_history(session: Session, pid: int, labels: Sequence[Any]) -> Iterator[str]:
    """The ``label`` and ``retract`` records of ``labels`` (id, a, b, positive, annotator,
    version, retracted version, a id, b id), in the order they were made; a live label with
    its confidence and contested flag as they are now."""
    events: list[tuple[int, int, int, str]] = []
    batch = {version: n for n, version in enumerate(sorted({row[5] for row in labels}), 1)}
    known = pair_confidence(session, pid) if labels else None
    for label_id, a_name, b_name, positive, annotator, version, retracted, a_id, b_id in labels:
        live = known if retracted is None else None  # how sure the live labels are, as read
        events.append((version, 1, label_id, _line(
            "label", a=a_name, b=b_name, label=label_value(positive),
            annotator=annotator, batch=batch[version],
            confidence=live.of(a_id, b_id) if live is not None else None,
            contested=live.is_contested(a_id, b_id) if live is not None else None)))
        if retracted is not None:
            # a write that replaces labels (a consensus's refit) retracts, then asserts
            events.append((retracted, 0, label_id, _line("retract", a=a_name, b=b_name)))
    for *_, line in sorted(events):
        yield line


def _head_lines(project: dict[str, Any], quality: dict[str, Any] | None) -> Iterator[str]:
    """The ``project`` record (the policy and question where they are not the defaults),
    then the ``quality`` record: ``GET quality``'s counts as the project was exported (its
    model left out), written by the export and not read by the import."""
    policy = project.get("policy", DEFAULT_POLICY)
    question = project.get("question")
    yield _line("project", name=project["name"], description=project["description"],
                prediction_model=project["prediction_model"],
                feature_length=project["feature_length"],
                features="computed" if project.get("features_computed") else None,
                policy=None if policy == DEFAULT_POLICY else policy,
                question=None if question in (None, DEFAULT_QUESTION) else question)
    if quality is not None:
        yield _line("quality", decided_wrong=quality["decided_wrong"],
                    predicted_wrong=quality.get("predicted_wrong"),
                    decided=quality["decided"], undecided=quality["undecided"])


def project_lines(session: Session, project: dict[str, Any],
                  quality: dict[str, Any] | None = None) -> Iterator[str]:
    """The whole project as JSON Lines records that ``POST .../import`` reads back.

    Settings (the policy and question where they are not the defaults), with ``quality``
    after them (``GET quality``'s body; None: no ``quality`` record), concepts (with their
    texts), links and the pool (with features, unless sporal computes them) in registration
    order, then the label history: each assertion and each retraction at the project version
    it was made, so that replaying the file rebuilds the same live labels, closure and
    ``caused_by``: each label carries its write (``batch``: the writes that asserted labels
    numbered from 1, so that the file does not depend on the project's version), and an
    import applies the labels of one write together, as that write did. Then every
    answer (the evidence), which an import restores as it was; then every disagreement
    (its close and why, its resolutions); then the excluded annotators and the re-asked
    pairs; last, each deleted concept (``deleted``: a tombstone, registered by its
    ``concept`` record so that the history on it reads back, deleted again once everything
    is written; :class:`_Names`).
    """
    pid = project["id"]
    computed = bool(project.get("features_computed"))
    yield from _head_lines(project, quality)
    names = _Names.read(session, pid)
    for name, description, text in session.execute(
            select(names.of(Concept), Concept.description, ConceptText.text)
            .outerjoin(ConceptText, ConceptText.concept_id == Concept.id)
            .where(Concept.project_id == pid).order_by(Concept.id)):
        yield _line("concept", name=name, description=description, text=text)
    a, b = aliased(Concept), aliased(Concept)
    for source, target in session.execute(
            select(a.name, b.name).select_from(ConceptLink)
            .join(a, a.id == ConceptLink.source_id).join(b, b.id == ConceptLink.target_id)
            .where(ConceptLink.project_id == pid).order_by(ConceptLink.id)):
        yield _line("link", source=source, target=target)
    for a_name, b_name, blob in session.execute(
            select(a.name, b.name, PoolPair.features).join(a, a.id == PoolPair.a_id)
            .join(b, b.id == PoolPair.b_id).where(PoolPair.project_id == pid)
            .order_by(PoolPair.id)):
        # computed features are computed again from the texts and links on import
        yield _line("pair", a=a_name, b=b_name,
                    features=None if computed else decode_features(blob).tolist())
    labels = session.execute(
        select(AssertedLabel.id, names.of(a), names.of(b), AssertedLabel.positive,
               AssertedLabel.annotator,
               AssertedLabel.version, AssertedLabel.retracted_version, AssertedLabel.a_id,
               AssertedLabel.b_id)
        .join(a, a.id == AssertedLabel.a_id).join(b, b.id == AssertedLabel.b_id)
        .where(AssertedLabel.project_id == pid)).all()
    yield from _label_history(session, pid, labels)
    yield from _answer_lines(session, pid, [(row[0], row[1], row[2]) for row in labels], names)
    yield from _disagreement_lines(session, pid, names)
    yield from _team_action_lines(session, pid)
    for name, deleted_at in names.tombstones:  # last: what named them is written
        yield _line("deleted", name=name, deleted_at=deleted_at.isoformat())


# ---------------------------------------------------------------------------- the registry
Writer = Callable[[Session, dict[str, Any], dict[str, Any] | None], Iterator[str]]
"""Writes the export of a project (its :class:`~app.schemas.ProjectRead` as JSON, and
``GET quality``'s body where the format carries it, else None) as text parts, read in the
given session."""


@dataclass(frozen=True)
class ExportFormat:
    """A format of ``GET /projects/{pid}/export``.

    Attributes
    ----------
    name : str
        The value of the route's ``format``.
    media_type : str
        The response's ``Content-Type``.
    suffix : str
        The file name's ending in ``Content-Disposition``.
    schema : str
        The JSON schema type of the body in the OpenAPI document (``string`` or ``object``).
    writer : Writer
        The export as text parts.
    quality : bool
        Whether the export carries the map's quality (``GET quality``'s body, which the
        route computes only for such a format).
    """

    name: str
    media_type: str
    suffix: str
    schema: str
    writer: Writer
    quality: bool = False

    def __repr__(self) -> str:
        return f"ExportFormat({self.name!r})"


def _write_csv(session: Session, project: dict[str, Any],
               quality: dict[str, Any] | None) -> Iterator[str]:
    return csv_parts(CSV_COLUMNS, _decided(session, project["id"]))


def _write_json(session: Session, project: dict[str, Any],
                quality: dict[str, Any] | None) -> Iterator[str]:
    return _json(project, quality, _decided(session, project["id"]))


def _write_graphml(session: Session, project: dict[str, Any],
                   quality: dict[str, Any] | None) -> Iterator[str]:
    return _graphml(session, project["id"], _decided(session, project["id"]))


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("csv", "text/csv; charset=utf-8", "csv", "string", _write_csv),
    ExportFormat("json", "application/json", "json", "object", _write_json, quality=True),
    ExportFormat("graphml", "application/graphml+xml", "graphml", "string", _write_graphml),
    ExportFormat("project", "application/jsonl", "jsonl", "string", project_lines,
                 quality=True),
)
"""Every export format, in the order the route documents them (the first is its default)."""

FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
_BY_NAME = {f.name: f for f in FORMATS}
assert len(_BY_NAME) == len(FORMATS), "two export formats of one name"


def get_format(name: str | ExportFormat) -> ExportFormat:
    """The format called ``name`` (a format as is); :class:`ValidationFailed` (422) for any
    other name.

    Examples
    --------
    >>> get_format("project").media_type
    'application/jsonl'
    """
    if isinstance(name, ExportFormat):
        return name
    found = _BY_NAME.get(name)
    if found is None:
        valid = ", ".join(FORMAT_NAMES)
        raise ValidationFailed(f"unknown export format {name!r}; valid: {valid}", errors=[
            {"loc": ["format"], "msg": f"Input should be one of {valid}", "type": "enum"}])
    return found


def csv_chunks(columns: Sequence[str], items: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """``items`` as CSV (:func:`csv_parts`), in byte chunks of about 64 KiB."""
    return _chunks(csv_parts(columns, items))


def export(session: Session, project: dict[str, Any], fmt: str | ExportFormat,
           quality: dict[str, Any] | None = None) -> Iterator[bytes]:
    """The export in ``fmt`` (:func:`get_format`) as a stream of byte chunks, with
    ``quality`` (``GET quality``'s body) where the format carries it.

    Read in the session's one transaction: a consistent snapshot however long it streams.
    Raises :class:`ValidationFailed` at once for an unknown format.
    """
    chosen = get_format(fmt)
    return _chunks(chosen.writer(session, project, quality if chosen.quality else None))
