"""Importing a file into a project: validate every record first, then write in batches.

The formats are those of ``docs/formats.md``: JSON Lines records (``project``, ``concept``,
``pair``, ``label``, ``retract``, ``text``, ``link``, ``answer``), a CSV file of one kind, or
an AL-CPL domain folder.

A *source* is a callable that returns a fresh iterator of ``(line, record or reason)`` each
time it is called: the import reads it twice, once to validate everything (nothing written, no
write lock held, every bad line listed), once to write through the same services as the JSON
routes. Neither pass holds the file in memory, but for a run of labels (and the ``answer``
records).

The modules, by topic:

- :mod:`~app.services.importing.records`: the records of each kind, a source, the summary;
- :mod:`~app.services.importing.readers`: the JSON Lines, CSV and AL-CPL readers;
- :mod:`~app.services.importing.validation`: every check before anything is written;
- :mod:`~app.services.importing.writing`: the writes, in batches or staged;
- :mod:`~app.services.importing.spooling`: a request's body spooled, imported by the
  request or by a job.
"""

from app.services.importing.readers import (
    InputLimits,
    al_cpl_records,
    al_cpl_source,
    bounded_lines,
    csv_records,
    file_source,
    jsonl_records,
    too_deep,
)
from app.services.importing.records import (
    AnswerRecord,
    ImportSummary,
    PairRef,
    ProjectSettings,
    Record,
    Source,
    TextRecord,
    record_json,
)
from app.services.importing.validation import MAX_LISTED_ERRORS, validate
from app.services.importing.writing import BATCH, Progress, import_source

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
