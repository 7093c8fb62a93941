"""The records of an import file: one model per kind, a record, a source, the summary.

A *source* is a callable that returns a fresh iterator of ``(line, record or reason)`` each
time it is called (:mod:`app.services.importing.readers` makes them); the import reads it
twice, once to validate, once to write.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from app.schemas import (
    AnswerOutcome,
    ClosedReason,
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
)
from app.schemas import Source as AnswerSource

__all__ = [
    "AnswerRecord",
    "DisagreementRecord",
    "ExclusionRecord",
    "ImportSummary",
    "Item",
    "Kind",
    "LabelRecord",
    "PairRef",
    "Parsed",
    "ProjectSettings",
    "QualityRecord",
    "ReaskRecord",
    "Record",
    "Source",
    "TextRecord",
    "item_of",
    "record_json",
]


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
    confidence: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="A live label's confidence when the project was exported (the project "
        "export writes it; an import computes it again from the answers, so it is not read).")
    contested: bool | None = Field(
        default=None, description="Whether the label's pair had an open disagreement when "
        "the project was exported (written by the export, computed again on import).")


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


class DisagreementRecord(_Record):
    """The ``disagreement`` record: a disagreement as kept (a project export writes them
    after the answers, oldest first).

    ``resolutions`` are the reviewer's answers that resolved it, oldest first, each named by
    its place among the file's ``answer`` records (from 1); ``closed_reason`` is given with
    ``closed_at`` and only then.
    """

    a: Name
    b: Name
    opened_at: Timestamp
    closed_at: Timestamp | None = None
    closed_reason: ClosedReason | None = None
    reopened_at: Timestamp | None = None
    resolutions: list[Annotated[int, Field(ge=1, le=2**31 - 1)]] = Field(
        default_factory=list, max_length=10_000)


class DeletedRecord(_Record):
    """The ``deleted`` record: a concept the project deleted (a tombstone), registered by its
    ``concept`` record so that the records on it read back, and deleted again once every
    other record is written (a project export writes them last)."""

    name: Name
    deleted_at: Timestamp


class ExclusionRecord(_Record):
    """The ``exclusion`` record: an annotator whose answers do not count (``consensus``;
    ``POST .../annotators/{name}/exclude``), as kept."""

    annotator: Name
    role: Literal["admin", "project", "reviewer"] = "project"
    excluded_at: Timestamp


class ReaskRecord(_Record):
    """The ``reask`` record: a pair only ``annotator`` had answered, re-asked of the others
    (``POST .../annotators/{name}/reask``), as kept."""

    a: Name
    b: Name
    annotator: Name
    asked_at: Timestamp


class _WrongCount(_Record):
    estimate: Annotated[float, Field(ge=0)]
    low: Annotated[int, Field(ge=0)]
    high: Annotated[int, Field(ge=0)]


class QualityRecord(_Record):
    """The ``quality`` record: how many of the map's pool pairs were likely wrong when the
    project was exported (``GET quality``); written by the export, checked and not read (an
    import computes it again from what the file carries)."""

    decided_wrong: _WrongCount
    predicted_wrong: _WrongCount | None = None
    decided: Annotated[int, Field(ge=0)]
    undecided: Annotated[int, Field(ge=0)]


class TextRecord(_Record):
    """The ``text`` record: a concept's text (``""`` removes it)."""

    name: Name
    text: TextValue


Kind = Literal["project", "concept", "pair", "label", "retract", "text", "link", "answer",
               "disagreement", "deleted", "exclusion", "reask", "quality"]
Item = (ProjectSettings | ConceptIn | PairIn | LabelIn | PairRef | TextRecord | LinkIn
        | AnswerRecord | DisagreementRecord | DeletedRecord | ExclusionRecord | ReaskRecord
        | QualityRecord)
_MODELS: dict[str, type[BaseModel]] = {
    "project": ProjectSettings, "concept": ConceptIn, "pair": PairIn, "label": LabelRecord,
    "retract": PairRef, "text": TextRecord, "link": LinkIn, "answer": AnswerRecord,
    "disagreement": DisagreementRecord, "deleted": DeletedRecord,
    "exclusion": ExclusionRecord, "reask": ReaskRecord, "quality": QualityRecord,
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
    disagreements_created: int = 0
    concepts_deleted: int = 0
    records: int = 0


def _reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(parts)


def item_of(kind: str, fields: dict[str, Any]) -> Item | str:
    """The validated item of a record of ``kind``, or why ``fields`` are not one."""
    model = _MODELS.get(kind)
    if model is None:
        return f"unknown kind {kind!r} (want one of {', '.join(_MODELS)})"
    try:
        item: Item = model.model_validate(fields)  # type: ignore[assignment]
    except ValidationError as exc:
        return _reason(exc)
    return item


def record_json(record: Record) -> str:
    """One JSON Lines line (without its newline) for ``record``."""
    fields = record.item.model_dump(mode="json", exclude_none=True)
    return json.dumps({"kind": record.kind, **fields}, ensure_ascii=False,
                      separators=(",", ":"))
