"""Writing a validated import file: through the same services as the JSON routes, in batches.

The records are written in file order, in batches of :data:`BATCH` records of one kind, each
through its service (:data:`_WRITERS`: concepts, pairs, bulk labels, retractions), so that no
request-size limit applies; a run of labels is one batch, however long, so that it is one bulk
import (closed at once, :data:`~app.services.labels.shared.CANONICAL_MIN`). A file whose
labels come last may have them staged instead (:mod:`app.services.staging`); into a project
under a policy that takes every label as an answer (``consensus``), such a file's one run of
labels is planned before its write transaction instead, and written with the rest of the file
in one short one (:mod:`app.services.labels.team_bulk`).

A ``policy`` (and ``question``) of the file's ``project`` record is set once every record is
written: the labels are replayed under the project's policy as it was (``strict`` for a new
project), so that a project export's labels come back as they were, whatever its policy. A
file with ``answer`` records (a project export) brings its answers back as they were: they
replace the answers its labels would have given (one per label, source ``import``), each
linked to the label it stood behind; its ``disagreement`` records come back after them, as they
were (times, close reasons, resolutions), and so do its ``exclusion`` and ``reask`` records
(excluded annotators, re-asked pairs), before the policy's consensus runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as default
from typing import Any

from sqlalchemy import delete, func, insert, select

from app.errors import ConcurrentChange, Forbidden
from app.schemas import BulkLabels, ConceptIn, LabelIn
from app.security import Caller
from app.services.concepts import add_concepts
from app.services.corpus import FEATURE_LENGTH, change_corpus, set_texts
from app.services.corrections import delete_concept
from app.services.importing.records import (
    AnswerRecord,
    DeletedRecord,
    DisagreementRecord,
    ExclusionRecord,
    ImportSummary,
    Kind,
    LabelRecord,
    ProjectSettings,
    ReaskRecord,
    Record,
    Source,
)
from app.services.importing.validation import validated
from app.services.labels import Refused, post_bulk, retract_label
from app.services.labels.change import NewAnswer, TeamChange
from app.services.labels.policy import POLICIES, LabelPolicy
from app.services.labels.team_bulk import PROVISIONAL, TeamBulk, prepare, provisional, switch
from app.services.pairs import add_pairs
from app.services.staging import LabelStage, StagedLine, StagePolicy
from app.services.team import excluded_annotators
from app.services.unit import ProjectWork
from models import AnnotatorExclusion, Answer, AssertedLabel, Disagreement, Project, ReaskedPair
from models.tables import DisagreementResolution

__all__ = ["BATCH", "Progress", "import_source"]

BATCH = 10_000
"""Most records written by one service call (one short write transaction)."""

Progress = Callable[[int, int], None]
"""Called after each batch written with ``(records in the batch, records in the file)``."""


@dataclass
class _Later:
    """What is written once every other record is: the ``policy`` and ``question`` of the
    ``project`` record, and the file's answers (which replace those its labels gave); and
    who imports (``caller``: whose answers the file's retractions may remove, and whether
    it may bring a reviewer's answers)."""

    marks: tuple[int, int]  # the project's newest answer id and label id before the file
    caller: Caller
    settings: dict[str, Any] = default(default_factory=dict)
    answers: list[AnswerRecord] = default(default_factory=list)
    disagreements: list[DisagreementRecord] = default(default_factory=list)
    deleted: list[DeletedRecord] = default(default_factory=list)
    exclusions: list[ExclusionRecord] = default(default_factory=list)
    reasks: list[ReaskRecord] = default(default_factory=list)

    @classmethod
    def at(cls, work: ProjectWork, caller: Caller) -> _Later:
        pid = work.state.project_id
        answer = work.session.scalar(select(func.max(Answer.id)).where(Answer.project_id == pid))
        label = work.session.scalar(select(func.max(AssertedLabel.id))
                                    .where(AssertedLabel.project_id == pid))
        return cls((int(answer or 0), int(label or 0)), caller)


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


def _store_disagreements(work: ProjectWork, later: _Later) -> None:
    """The file's disagreements as they were, each resolution linked to the reviewer's
    answer it names (the file's answers are stored already, in file order)."""
    state, session = work.state, work.session
    answer_ids = list(session.scalars(select(Answer.id).where(
        Answer.project_id == state.project_id, Answer.id > later.marks[0]).order_by(Answer.id)))
    live = {k: item.retracted_at is None for k, item in enumerate(later.answers, 1)}
    for item in later.disagreements:
        standing = [k for k in item.resolutions if live[k]]
        row = Disagreement(project_id=state.project_id, a_id=state.id_of[item.a],
                           b_id=state.id_of[item.b], opened_at=item.opened_at,
                           closed_at=item.closed_at, closed_reason=item.closed_reason,
                           reopened_at=item.reopened_at,
                           resolution_id=answer_ids[standing[-1] - 1] if standing else None)
        session.add(row)
        session.flush()
        session.add_all([DisagreementResolution(disagreement_id=row.id,
                                                answer_id=answer_ids[k - 1])
                         for k in item.resolutions])
    session.flush()


def _store_team_actions(work: ProjectWork, later: _Later) -> None:
    """The file's excluded annotators and re-asked pairs, those not kept already."""
    session, state = work.session, work.state
    pid = state.project_id
    excluded = excluded_annotators(session, pid)
    session.add_all([AnnotatorExclusion(project_id=pid, annotator=item.annotator,
                                        role=item.role, excluded_at=item.excluded_at)
                     for item in later.exclusions if item.annotator not in excluded])
    asked = {(a, b) for a, b in session.execute(
        select(ReaskedPair.a_id, ReaskedPair.b_id).where(ReaskedPair.project_id == pid))}
    for item in later.reasks:
        pair = (state.id_of[item.a], state.id_of[item.b])
        if pair not in asked:
            asked.add(pair)
            session.add(ReaskedPair(project_id=pid, a_id=pair[0], b_id=pair[1],
                                    annotator=item.annotator, asked_at=item.asked_at))
    session.flush()


# ------------------------------------------------- the file's policy (read in these two only)
def _stored_as_set(name: str, value: Any) -> bool:
    """Whether a setting of the ``project`` record is stored as it is: a policy that draws
    the labels from the answers is not (its :meth:`~LabelPolicy.adopt` sets it, with the
    labels the answers give)."""
    return name != "policy" or POLICIES[value].refuses


def _adopted(work: ProjectWork, later: _Later) -> LabelPolicy | None:
    """The policy whose labels follow the answers once the file is written, as a change of
    policy makes them: the file switches to a policy that draws labels from the answers, or
    brings answers to a project under one; else None."""
    final = POLICIES[later.settings.get("policy", work.project.policy)]
    moved = "policy" in later.settings or bool(later.answers or later.exclusions)
    return final if moved and not final.refuses else None


def _finish(work: ProjectWork, later: _Later, summary: ImportSummary) -> None:
    """Write what waited for every other record (:class:`_Later`)."""
    if not (later.answers or later.settings or later.disagreements or later.deleted
            or later.exclusions or later.reasks):
        return

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        if later.answers:
            work.session.execute(delete(Answer).where(Answer.project_id == project.id,
                                                      Answer.id > later.marks[0]))
            work.session.execute(insert(Answer), _answer_rows(work, later))
            summary.answers_created += len(later.answers)
        if later.disagreements:
            _store_disagreements(work, later)
            summary.disagreements_created += len(later.disagreements)
        _store_team_actions(work, later)
        for name, value in later.settings.items():
            if _stored_as_set(name, value):
                setattr(project, name, value)
        project.version += 1

    work.write(lambda work: None, store)
    for item in later.deleted:  # the history on them is written: tombstones again
        delete_concept(work, item.name, deleted_at=item.deleted_at)
        summary.concepts_deleted += 1
    adopted = _adopted(work, later)
    if adopted is not None:
        adopted.adopt(work)  # the labels follow the answers, as a change of policy does


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


# ---------------------------------------------------------------------------- writers by kind
def _write_settings(work: ProjectWork, items: list[Any], summary: ImportSummary,
                    later: _Later) -> None:
    for item in items:
        _apply_settings(work, item)
        later.settings.update(item.model_dump(include={"policy", "question"},
                                              exclude_none=True))


def _keep_answers(work: ProjectWork, items: list[Any], summary: ImportSummary,
                  later: _Later) -> None:
    if any(item.role == "reviewer" for item in items) and not (
            later.caller.admin or later.caller.reviewer):
        raise Forbidden("importing answers with the role \"reviewer\" needs the project's "
                        "reviewer key or the admin key")
    later.answers += items


def _keep_disagreements(work: ProjectWork, items: list[Any], summary: ImportSummary,
                        later: _Later) -> None:
    later.disagreements += items


def _keep_deleted(work: ProjectWork, items: list[Any], summary: ImportSummary,
                  later: _Later) -> None:
    later.deleted += items


def _keep_exclusions(work: ProjectWork, items: list[Any], summary: ImportSummary,
                     later: _Later) -> None:
    later.exclusions += items


def _keep_reasks(work: ProjectWork, items: list[Any], summary: ImportSummary,
                 later: _Later) -> None:
    later.reasks += items


def _skip(work: ProjectWork, items: list[Any], summary: ImportSummary, later: _Later) -> None:
    """A record an import does not read (``quality``: computed again from the file)."""


def _write_concepts(work: ProjectWork, items: list[Any], summary: ImportSummary,
                    later: _Later) -> None:
    created, stored = add_concepts(work, items)
    summary.concepts_created += created
    summary.concepts_known += len(stored) - created


def _write_pairs(work: ProjectWork, items: list[Any], summary: ImportSummary,
                 later: _Later) -> None:
    pairs = add_pairs(work, items)
    summary.pairs_created += pairs.created
    summary.pairs_unchanged += pairs.unchanged


def _write_texts(work: ProjectWork, items: list[Any], summary: ImportSummary,
                 later: _Later) -> None:
    summary.texts_set += set_texts(work, {item.name: item.text for item in items})


def _write_links(work: ProjectWork, items: list[Any], summary: ImportSummary,
                 later: _Later) -> None:
    plan, _ = change_corpus(work, add_links=[(item.source, item.target) for item in items])
    summary.links_created += len(plan.links_added)


def _write_labels(work: ProjectWork, items: list[Any], summary: ImportSummary,
                  later: _Later) -> None:
    # a run has no length limit: no request made it (validated record by record)
    written = post_bulk(work, BulkLabels.model_construct(labels=items), source="import")
    if isinstance(written, Refused):  # validated, unless labels changed since
        raise written.error
    summary.labels_created += written.answer.created
    summary.labels_unchanged += written.answer.unchanged


def _write_retractions(work: ProjectWork, items: list[Any], summary: ImportSummary,
                       later: _Later) -> None:
    state = work.state
    for item in items:
        live = state.labels[(state.id_of[item.a], state.id_of[item.b])]
        retract_label(work, live.id, later.caller)
        summary.labels_retracted += 1


_WRITERS: dict[Kind, Callable[[ProjectWork, list[Any], ImportSummary, _Later], None]] = {
    "project": _write_settings, "concept": _write_concepts, "pair": _write_pairs,
    "label": _write_labels, "retract": _write_retractions, "text": _write_texts,
    "link": _write_links, "answer": _keep_answers, "disagreement": _keep_disagreements,
    "deleted": _keep_deleted,
    "exclusion": _keep_exclusions, "reask": _keep_reasks, "quality": _skip,
}
"""How a batch of each kind is written (``project``, ``answer``, ``disagreement``,
``deleted``, ``exclusion`` and ``reask`` partly at the end)."""


def _batch(item: Any) -> int | None:
    return item.batch if isinstance(item, LabelRecord) else None


def _write(work: ProjectWork, records: Iterable[Record], total: int,
           progress: Progress | None, caller: Caller,
           summary: ImportSummary | None = None) -> ImportSummary:
    """Write ``records`` in file order, through the services, batch by batch."""
    summary = summary or ImportSummary()
    later = _Later.at(work, caller)
    kind: Kind | None = None
    batch: list[Any] = []
    for record in records:
        summary.records += 1
        if batch and (record.kind != kind or (len(batch) >= BATCH and kind != "label")
                      or (kind == "label" and _batch(record.item) != _batch(batch[0]))):
            assert kind is not None
            _WRITERS[kind](work, batch, summary, later)
            if progress is not None:
                progress(len(batch), total)
            batch = []
        kind = record.kind
        batch.append(record.item)
    if batch and kind is not None:
        _WRITERS[kind](work, batch, summary, later)
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
                   policy: StagePolicy, caller: Caller) -> ImportSummary:
    """The labels staged in short writes, then switched in with the rest of the file."""
    summary = ImportSummary()

    def write_others(work: ProjectWork) -> None:  # in the switch's write transaction
        others = itertools.takewhile(lambda r: r.kind != "label", _records(source))
        _write(work, others, total, progress, caller, summary)

    stage = LabelStage.open(work, policy)
    try:
        _stage_labels(stage, source, summary, total, progress)
        stage.switch(write_others)
    finally:
        stage.close(policy.timeout)
    return summary


def _team_file(source: Source) -> tuple[list[str], list[Any]] | None:
    """The concepts and the labels of a file whose labels can all be planned before its write
    transaction as one bulk of answers: one run of labels, and no record that moves the
    consensus otherwise (the project's policy, an exclusion, a re-ask); else None."""
    names: list[str] = []
    labels: list[Any] = []
    for record in _records(source):
        item = record.item
        if record.kind in ("exclusion", "reask") or (
                isinstance(item, ProjectSettings) and item.policy is not None):
            return None
        if isinstance(item, ConceptIn):
            names.append(item.name)
        elif record.kind == "label":
            if labels and _batch(item) != _batch(labels[0]):
                return None
            labels.append(item)
    return names, labels


def _plan_team(work: ProjectWork, names: list[str], items: list[Any]
               ) -> tuple[list[str], TeamChange, TeamBulk]:
    """The file's new concepts, and its labels as one bulk of answers planned on the project
    as the file's concepts will make it (no lock held, unless inside the switch)."""
    new = list(dict.fromkeys(name for name in names if name not in work.state.id_of))
    planner = provisional(work, new) if new else work
    key = planner.state.id_of
    change = TeamChange(add=tuple(NewAnswer(key[item.a], key[item.b], item.positive,
                                            item.annotator, item.source or "import")
                                  for item in items))
    return new, change, prepare(planner, change)


def _import_team_staged(work: ProjectWork, source: Source, total: int,
                        progress: Progress | None, caller: Caller) -> ImportSummary | None:
    """A consensus file's labels planned before its write transaction, then written with its
    other records in one short one; None when the file does not allow it (:func:`_team_file`).
    A project that moved since the plan (another process wrote) is planned again, locked."""
    found = _team_file(source)
    if found is None:
        return None
    names, items = found
    version = work.project.version
    new, change, bulk = _plan_team(work, names, items)
    work.end_read()
    summary = ImportSummary()
    with work.atomically() as locked:
        if locked.version != version:
            new, change, bulk = _plan_team(work, names, items)
        before = {pair: live.positive for pair, live in work.state.labels.items()}
        others = itertools.takewhile(lambda r: r.kind != "label", _records(source))
        _write(work, others, total, progress, caller, summary)
        if any(name not in work.state.id_of for name in new):
            raise ConcurrentChange("the project's concepts changed while its import was "
                                   "planned; nothing of the file was stored, retry")
        concepts = {PROVISIONAL + k: work.state.id_of[name] for k, name in enumerate(new)}
        stored = switch(work, locked, bulk, concepts)
    if new:  # the plan named them provisionally: the cache is read again
        work.state.invalidate()
        work.refresh()
    summary.labels_created += len(stored.label_ids)
    summary.labels_unchanged += sum(1 for n in change.add
                                    if before.get((n.a_id, n.b_id)) == n.positive)
    summary.records += len(items)
    if progress is not None:
        progress(len(items), total)
    return summary


def import_source(work: ProjectWork, source: Source, *, caller: Caller,
                  progress: Progress | None = None,
                  policy: StagePolicy | None = None) -> ImportSummary:
    """Validate every record of ``source``, then write them all in file order, atomically.

    ``caller`` imports: a retraction that removes answers it may not remove, or an answer
    with the role ``reviewer`` from anyone but the reviewer or the admin, is
    :class:`~app.errors.Forbidden`, and nothing is stored.

    Raises :class:`InvalidItems` (every bad line) before anything is written. A file whose
    labels come last (no retraction) and number at least ``policy.min_labels`` has them
    staged in short transactions and switched in with its other records in one
    (:mod:`app.services.staging`); under ``consensus`` (every label an answer) they are
    planned before that one transaction instead (:func:`_import_team_staged`); any other
    file is written in one transaction. Either way a failure part-way (a crash, a
    concurrent change) stores nothing.
    """
    checker = validated(work, source)
    policy = policy or StagePolicy()
    records = checker.records
    staged = (checker.labels >= policy.min_labels and checker.labels_last
              and not (checker.retracts or checker.answers or checker.deletions))
    team = checker.consensus  # every label an answer
    del checker  # its copy of the closure: the writes make their own
    if staged and team:
        summary = _import_team_staged(work, source, records, progress, caller)
        if summary is not None:
            return summary
    elif staged:
        return _import_staged(work, source, records, progress, policy, caller)
    with work.atomically():  # all of the file or none of it
        return _write(work, _records(source), records, progress, caller)
