"""Validating an import file: every check its writes would make, before any is made.

The checks run on a copy of the project's names, pool and closure, with no write lock held
and nothing written; every bad line is listed (the first :data:`MAX_LISTED_ERRORS`). Each kind
of record has its check (:data:`_CHECKS`); a run of labels is checked together when the run
ends (:meth:`Validator.flush`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from app.errors import InvalidItems
from app.schemas import ConceptIn, LabelIn, LinkIn, PairIn, label_value
from app.services.corpus import FEATURE_LENGTH
from app.services.importing.records import (
    AnswerRecord,
    DeletedRecord,
    DisagreementRecord,
    Kind,
    PairRef,
    ProjectSettings,
    ReaskRecord,
    Record,
    Source,
    TextRecord,
)
from app.services.labels.policy import policy_of
from app.services.labels.proofs import pair_problem
from app.services.labels.shared import CANONICAL_MIN
from app.services.state import ProjectState
from app.services.unit import ProjectView
from models import Project
from reasoning.closure import Closure, ContradictionError, Label

__all__ = ["MAX_LISTED_ERRORS", "Validator", "validate", "validated"]

MAX_LISTED_ERRORS = 1_000
"""Most bad lines named in one refusal (the count says how many there were)."""


def _consensus_import(view: ProjectView) -> bool:
    """Whether the file's labels are all taken as answers, none refused by the closure: the
    project's policy refuses nothing (the one place validation reads the policy)."""
    return not policy_of(view.project).refuses


def _digest(features: list[float]) -> bytes:
    return hashlib.blake2b(np.asarray(features, dtype="<f8").tobytes(), digest_size=16).digest()


class _Features:
    """What the file's pairs must agree on with the project: whose features, how many."""

    def __init__(self, project: Project) -> None:
        self.length: int | None = project.feature_length
        # True: the pool's features are computed; False: the client's; None: not known yet
        self.computed: bool | None = True if project.features_computed else (
            False if self.length is not None else None)
        self.digests: dict[tuple[str, str], bytes] = {}  # the file's new pairs

    def mode(self, computed: bool) -> str | None:
        """The project's features are computed (or the client's) from here on."""
        if self.computed is not None and self.computed != computed:
            return ("the project's features are computed from texts and links: send pairs "
                    "without features" if self.computed else
                    "the project's pairs come with features (its features are not computed)")
        self.computed = computed
        if computed:
            self.length = FEATURE_LENGTH
        return None

    def settings(self, item: ProjectSettings) -> str | None:
        """The ``project`` record's ``feature_length`` and ``features``."""
        if item.feature_length is not None and self.length is not None \
                and item.feature_length != self.length:
            return f"feature_length {item.feature_length}, the project has {self.length}"
        if item.features is not None:
            return self.mode(item.features == "computed")
        return None

    def pair(self, state: ProjectState, item: PairIn) -> str | None:
        """A ``pair`` record's features: none when computed, else as many as the others."""
        if item.features is None or self.computed:
            return self.mode(item.features is None)
        if (refused := self.mode(False)) is not None:
            return refused
        if self.length is None:
            self.length = len(item.features)
        if len(item.features) != self.length:
            return f"{len(item.features)} features, the project has {self.length}"
        return self._same(state, item.a, item.b, item.features)

    def _same(self, state: ProjectState, a: str, b: str, features: list[float]) -> str | None:
        """A pair already in the pool (or the file) comes back with the same features."""
        ids = (state.id_of.get(a), state.id_of.get(b))
        row = state.pool.row_of.get(ids) if None not in ids else None  # type: ignore[arg-type]
        digest = _digest(features)
        known = _digest(state.pool.features[row].tolist()) if row is not None \
            else self.digests.get((a, b))
        if known is not None and known != digest:
            return "already registered with other features"
        if known is None:
            self.digests[(a, b)] = digest
        return None


class Validator:
    """Every check the writes would make, on a copy of the project's names, pool and closure.

    Concepts new to the project enter the closure copy under their names (the project's own
    under their ids), so labels between new concepts are closed like the others.
    """

    def __init__(self, view: ProjectView) -> None:
        self.state = view.state
        self.consensus = _consensus_import(view)  # no label refused: all answers
        self.features = _Features(view.project)
        self.new: set[str] = set()
        self.closure: Closure = self.state.closure.copy()
        self.live: set[tuple[Any, Any]] = set(self.state.closure.asserted)
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
        self.deletions = 0
        self.label_records: dict[tuple[str, str], int] = {}  # label records per pair
        self.label_refs: list[tuple[int, str, str, int]] = []  # answers' (line, a, b, seq)
        self.reviews: dict[int, tuple[str, str]] = {}  # the reviewer answers' places, pairs

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
        """Why ``record`` cannot be written after the records before it (None: it can)."""
        return _CHECKS[record.kind](self, record)

    def label(self, a_name: str, b_name: str, positive: bool) -> str | None:
        """Close one label into the copy (under consensus, only count it live)."""
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
        if len(pending) >= CANONICAL_MIN and self._closed_at_once(pending):
            return
        for line, a, b, positive in pending:
            reason = self.label(a, b, positive)
            if reason is not None:
                self.fail(line, reason)

    def _closed_at_once(self, pending: list[tuple[int, str, str, bool]]) -> bool:
        """Close ``pending`` with the labels before it in one go; False, nothing changed,
        when it repeats a pair with the other label or contradicts itself."""
        seen: dict[tuple[Any, Any], bool] = {
            (lab.a, lab.b): lab.positive for lab in self.closure.asserted_labels()}
        if not all(seen.setdefault((self.key(a), self.key(b)), positive) == positive
                   for _, a, b, positive in pending):  # a repeated label is one label
            return False
        closed = Closure.closed([Label(a, b, positive) for (a, b), positive in seen.items()],
                                self.closure.concepts)
        if closed is None:
            return False
        self.closure = closed
        self.live.update(seen)
        return True

    def retract(self, item: PairRef) -> str | None:
        self.flush()
        self.retracts += 1
        a, b = self.key(item.a), self.key(item.b)
        if (a, b) not in self.live:
            return "no live label on this pair to retract"
        self.live.discard((a, b))
        if (a, b) in self.closure.asserted:  # under consensus a file's labels are only live
            self.closure = self.closure.retract(a, b)
        return None

    def run(self, source: Source) -> None:
        """Check every record of ``source``, in file order."""
        for line, parsed in source():
            self.records += 1
            if self._held_label(line, parsed):
                continue
            if self.labels:
                self.labels_last = False
            self.flush()  # errors come out in the order of their lines
            reason = parsed if isinstance(parsed, str) else self.check(parsed)
            if reason is not None:
                self.fail(line, reason)
        self.flush()
        self._check_label_refs()

    def _held_label(self, line: int, parsed: Record | str) -> bool:
        """Hold a label on a pair of known names for its run's check; whether it was one."""
        if isinstance(parsed, str) or not isinstance(parsed.item, LabelIn) \
                or pair_problem(self, parsed.item.a, parsed.item.b) is not None:
            return False
        item = parsed.item
        self.labels += 1
        pair = (item.a, item.b)
        self.label_records[pair] = self.label_records.get(pair, 0) + 1
        self.pending.append((line, self.names.setdefault(item.a, item.a),
                             self.names.setdefault(item.b, item.b), item.positive))
        return True

    def _check_label_refs(self) -> None:
        """Each answer's ``label_seq`` names one of the file's labels on its pair."""
        for line, a, b, seq in self.label_refs:
            if seq > self.label_records.get((a, b), 0):
                self.fail(line, f"label_seq {seq}: the file has "
                                f"{self.label_records.get((a, b), 0)} label(s) on this pair")


# ---------------------------------------------------------------------------- checks by kind
def _check_project(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, ProjectSettings)
    if checker.seen_project or checker.records > 1:
        return "a project record must be the first line, and the only one"
    checker.seen_project = True
    return checker.features.settings(item)


def _check_concept(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, ConceptIn)
    if item.name not in checker:
        checker.new.add(item.name)
        checker.closure.add_concept(item.name)
    return None


def _check_text(checker: Validator, record: Record) -> str | None:
    assert isinstance(record.item, TextRecord)
    return checker.known(record.item.name)


def _check_link(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, LinkIn)
    missing = checker.known(item.source, item.target)
    return missing or ("a link needs two concepts" if item.source == item.target else None)


def _pair_named(checker: Validator,
                item: PairIn | LabelIn | PairRef | AnswerRecord | DisagreementRecord
                | ReaskRecord) -> str | None:
    """What is wrong with the pair a record names (unknown names, a self pair), if anything."""
    problem = pair_problem(checker, item.a, item.b, "pair")
    return None if problem is None else problem.reason


def _check_pair(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, PairIn)
    return _pair_named(checker, item) or checker.features.pair(checker.state, item)


def _check_label(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, LabelIn)
    return _pair_named(checker, item) or checker.label(item.a, item.b, item.positive)


def _check_retract(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, PairRef)
    return _pair_named(checker, item) or checker.retract(item)


def _check_answer(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, AnswerRecord)
    if (problem := _pair_named(checker, item)) is not None:
        return problem
    checker.answers += 1
    if item.role == "reviewer":
        checker.reviews[checker.answers] = (item.a, item.b)
    if item.label_seq is not None:
        checker.label_refs.append((record.line, item.a, item.b, item.label_seq))
    return None


def _check_disagreement(checker: Validator, record: Record) -> str | None:
    """A disagreement's pair, its close (a reason with a time, only then) and resolutions
    (reviewer answers on its pair, earlier in the file)."""
    item = record.item
    assert isinstance(item, DisagreementRecord)
    if (problem := _pair_named(checker, item)) is not None:
        return problem
    if (item.closed_at is None) != (item.closed_reason is None):
        return "closed_at and closed_reason come together"
    for place in item.resolutions:
        if checker.reviews.get(place) != (item.a, item.b):
            return (f"resolution {place}: not a reviewer's answer on this pair among the "
                    f"{checker.answers} answer record(s) before it")
    return None


def _check_deleted(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, DeletedRecord)
    checker.deletions += 1
    return checker.known(item.name)


def _check_reask(checker: Validator, record: Record) -> str | None:
    item = record.item
    assert isinstance(item, ReaskRecord)
    return _pair_named(checker, item)


_CHECKS: dict[Kind, Callable[[Validator, Record], str | None]] = {
    "project": _check_project, "concept": _check_concept, "pair": _check_pair,
    "label": _check_label, "retract": _check_retract, "text": _check_text,
    "link": _check_link, "answer": _check_answer, "disagreement": _check_disagreement,
    "deleted": _check_deleted,
    "exclusion": lambda checker, record: None, "reask": _check_reask,
    "quality": lambda checker, record: None,  # its fields checked, its counts not read
}
"""The check of each kind of record (a label's closure is checked with its run)."""


def validated(view: ProjectView, source: Source) -> Validator:
    """The validator that read all of ``source``; :class:`InvalidItems` if a line is bad."""
    checker = Validator(view)
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
    return validated(view, source).records
