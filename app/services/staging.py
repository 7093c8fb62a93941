"""Staged imports: a long run of labels written in short transactions, switched in at once.

An import whose labels come after all its other records (no retraction) and number at least
``SPORAL_IMPORT_STAGE_LABELS`` is written this way (:func:`app.services.importing.import_source`):

1. a stage row is made (``import_stages``, state ``staging``);
2. each run of labels is planned as ``POST .../labels/bulk`` plans it (the canonical order for
   a large run into a project without labels, else the order given), on a copy of the
   project's closure with the file's new concepts appended; its labels and closure lines go
   to ``staged_labels`` / ``staged_effects`` (concepts by ordinal, labels by ``seq``, the
   write's number as ``run``) in transactions of :data:`STAGE_BATCH` labels that touch no
   table a reader reads, each also stamping the stage's ``heartbeat_at``;
3. one write transaction, on the project's write lock, checks that the project did not move
   since step 2 began (else 409 ``conflict``, nothing stored), writes the file's other records
   through the services, maps the ordinals to the concept ids, and copies the staged rows into
   ``asserted_labels`` and ``closure_effects`` (ids ``seq`` plus the largest id stored, versions
   ``run`` plus the project's), then marks the stage ``switched``;
4. the staged rows are deleted in short transactions (:func:`sweep`).

Readers only ever read the live tables, so they see the project as before until step 3
commits, and all of the file after. A failure before then marks the stage ``failed``; a
process killed part-way leaves its stage ``staging`` with an old heartbeat: either is swept by
the next staged import (of any project) once ``SPORAL_IMPORT_STAGE_TIMEOUT`` has passed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, delete, select, text, update
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import ConcurrentChange
from app.services.annotators import record_label_answers
from app.services.labels.shared import CANONICAL_MIN, canonical_run, within_budget
from app.services.labels.store import cause_in_store, causes_in, decode, encode
from app.services.state import LiveLabel
from app.services.unit import ProjectWork
from app.settings import Settings
from models import AssertedLabel, Project, utcnow
from models.tables import ImportStage, StagedConcept, StagedEffect, StagedLabel
from reasoning.closure import Closure, ContradictionError, Label, Update

__all__ = ["STAGE_BATCH", "LabelStage", "StagePolicy", "StagedLine", "sweep"]

logger = logging.getLogger(__name__)

STAGE_BATCH = 5_000
"""Labels staged per write transaction (with their closure lines)."""

StagedLine = tuple[Label, str | None]
"""A label of the file as the stage keeps it (:meth:`LabelStage.label`), and its annotator."""

_staged_labels = cast(Table, StagedLabel.__table__)
_staged_effects = cast(Table, StagedEffect.__table__)


@dataclass(frozen=True)
class StagePolicy:
    """When an import stages its labels, and when a stage left behind counts as dead."""

    min_labels: int = 10_000
    timeout: float = 600.0

    @classmethod
    def of(cls, settings: Settings) -> StagePolicy:
        return cls(settings.import_stage_labels, settings.import_stage_timeout)


@dataclass
class _Planned:
    """A run's new labels in the order stored: ``(position in the run, update, was_decided)``."""

    new: list[tuple[int, Update, bool]] = field(default_factory=list)


def _executemany(session: Session, table: str, columns: Sequence[str],
                 rows: Sequence[tuple[Any, ...]]) -> None:
    if rows:
        connection = session.connection()
        mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"VALUES ({', '.join([mark] * len(columns))})", list(rows))


class LabelStage:
    """The staged labels of one import into ``work``'s project (see the module docstring)."""

    def __init__(self, work: ProjectWork, stage_id: int) -> None:
        state = work.state
        self.work, self.id = work, stage_id
        self.version = work.project.version  # the switch checks nobody wrote since
        self.closure = state.closure.copy()  # concepts: ids, then the file's new names
        self.n_stored = len(self.closure.concepts)
        self.new_names: list[str] = []
        self._keys: dict[str, Any] = dict(state.id_of)  # one object per name, shared
        self._annotators: dict[str | None, str | None] = {}
        self.live = bool(state.labels)  # a run is canonical only into a project without
        self.seq = 0
        self.runs = 0

    @classmethod
    def open(cls, work: ProjectWork, policy: StagePolicy) -> LabelStage:
        """Sweep dead stages, then start a stage for ``work``'s project (in short writes)."""
        sweep(work.session, policy.timeout)
        with write_transaction(work.session):
            stage = ImportStage(project_id=work.state.project_id, state="staging")
            work.session.add(stage)
            work.session.flush()
            stage_id = stage.id
        return cls(work, stage_id)

    def add_concept(self, name: str) -> None:
        """A concept record of the file: a new name takes the next ordinal."""
        if name not in self._keys:
            self._keys[name] = name
            self.closure.add_concept(name)
            self.new_names.append(name)

    def label(self, a: str, b: str, positive: bool, annotator: str | None
              ) -> tuple[Label, str | None]:
        """A label of the file as staged: the concepts' keys (ids, or the file's new names)."""
        return (Label(self._keys[a], self._keys[b], positive),
                self._annotators.setdefault(annotator, annotator))

    # ------------------------------------------------------------------ one run
    def stage_run(self, labels: list[StagedLine],
                  progress: Callable[[int], None] | None = None) -> int:
        """Plan one run of labels (one bulk import) and stage it; the labels created.

        ``labels`` holds each pair once (a repeat in the run is unchanged, as in the bulk
        import), in the order of their first lines.
        """
        items = [lab for lab, _ in labels]
        planned = self._plan(items)
        if not planned.new:
            return 0
        self.runs += 1
        first = self.seq + 1
        self.seq += len(planned.new)
        causes = causes_in([(first + n, items[k]) for n, (k, _, _) in enumerate(planned.new)],
                           [u for _, u, _ in planned.new], self.closure, missing_ok=True)
        self.work.session.rollback()
        now = utcnow()
        for start in range(0, len(planned.new), STAGE_BATCH):
            chunk = planned.new[start:start + STAGE_BATCH]
            rows = [(first + start + n, items[k], labels[k][1], update, was_decided)
                    for n, (k, update, was_decided) in enumerate(chunk)]
            self._write_chunk(rows, causes, now)
            planned.new[start:start + STAGE_BATCH] = [None] * len(chunk)  # type: ignore[list-item]
            if progress is not None:
                progress(len(chunk))
        return len(planned.new)

    def _plan(self, items: list[Label]) -> _Planned:
        """As ``POST .../labels/bulk`` plans it: canonical into no labels, else in order."""
        if not self.live and len(items) >= CANONICAL_MIN:
            run = canonical_run(self.closure, items, self.work.limits.decided_pairs)
            if run is not None:
                self.closure, self.live = run.closure, True
                return _Planned([(k, u, not u.own_new) for k, u in
                                 zip(run.order, run.updates, strict=True) if u.recorded])
        planned = _Planned()
        for k, lab in enumerate(items):
            status = self.closure.status(lab.a, lab.b)
            if status.asserted and status.value == lab.positive:
                continue
            within_budget(self.work, self.closure, lab.a, lab.b,  # type: ignore[arg-type]
                          lab.positive, f"label {k} of a run of the import")
            try:
                update_ = self.closure.add_label(lab.a, lab.b, lab.positive)
            except ContradictionError:
                raise ConcurrentChange("the project's labels changed since the file was "
                                       "validated; retry") from None
            planned.new.append((k, update_, status.value is not None))
        self.live = self.live or bool(planned.new)
        return planned

    def _cause(self, seq: int, lab: Label, causes: dict[int, int]) -> tuple[int | None, ...]:
        """``(cause_seq, cause_id)``: a label of this import, or one stored before it."""
        found = causes.get(seq)
        if found is not None:
            return found, None
        i, j = self.closure.index(lab.a), self.closure.index(lab.b)
        staged = self._cause_staged(i, j, lab.positive)
        if staged is not None:
            return staged, None
        assert isinstance(lab.a, int) and isinstance(lab.b, int), "staged pairs have causes"
        stored = cause_in_store(self.work.session, self.closure, self.work.state.project_id,
                                lab.a, lab.b, lab.positive)
        assert stored is not None, "a decided pair lies in one stored line"
        return None, stored

    def _cause_staged(self, i: int, j: int, positive: bool) -> int | None:
        """The staged label whose line holds the pair of ordinals ``(i, j)``, if any."""
        e = StagedEffect
        rows = self.work.session.execute(
            select(e.label_seq, e.by_row, e.bits).where(
                e.stage_id == self.id, e.positive.is_(positive),
                ((e.by_row.is_(True) & (e.line_ord == i))
                 | (e.by_row.is_(False) & (e.line_ord == j)))).order_by(e.label_seq))
        for label_seq, by_row, blob in rows:
            if decode(blob) >> (j if by_row else i) & 1:
                return int(label_seq)
        return None

    def _write_chunk(self, rows: list[tuple[int, Label, str | None, Update, bool]],
                     causes: dict[int, int], now: Any) -> None:
        """Stage labels ``(seq, label, annotator, update, was_decided)`` in one short write."""
        session, index = self.work.session, self.closure.index
        found = {seq: (self._cause(seq, lab, causes) if was_decided
                       else (causes.get(seq, seq), None))
                 for seq, lab, _, _, was_decided in rows}
        session.rollback()
        stamp = _staged_labels.c.created_at.type._cached_bind_processor(  # naive UTC
            session.get_bind().dialect)
        created = stamp(now) if stamp else now
        labels = [(self.id, seq, self.runs, index(lab.a), index(lab.b), lab.positive, annotator,
                   created, *found[seq]) for seq, lab, annotator, _, _ in rows]
        effects = [(self.id, seq, positive, by_row, line, encode(bits), bits.bit_count())
                   for seq, _, _, update_, _ in rows
                   for positive, lines in ((True, update_.lines[0]), (False, update_.lines[1]))
                   for by_row, line, bits in lines]
        with write_transaction(session):
            _executemany(session, "staged_labels", (
                "stage_id", "seq", "run", "a_ord", "b_ord", "positive", "annotator",
                "created_at", "cause_seq", "cause_id"), labels)
            for start in range(0, len(effects), STAGE_BATCH):
                _executemany(session, "staged_effects", (
                    "stage_id", "label_seq", "positive", "by_row", "line_ord", "bits", "count"),
                    effects[start:start + STAGE_BATCH])
            self.beat(session)

    def beat(self, session: Session) -> None:
        """Stamp the stage alive (inside a write transaction)."""
        session.execute(update(ImportStage).where(ImportStage.id == self.id)
                        .values(heartbeat_at=utcnow()))

    # ------------------------------------------------------------------ the switch
    def switch(self, write_others: Callable[[ProjectWork], None]) -> None:
        """Write the file's other records and every staged label in one write transaction."""
        work = self.work
        with work.atomically() as locked:
            alive = work.session.scalar(select(ImportStage.state).where(
                ImportStage.id == self.id)) == "staging"
            if locked.version != self.version or not alive:
                raise ConcurrentChange("the project changed while its import was staged; "
                                       "nothing of the file was stored, retry")
            write_others(work)
            if self.seq:
                self._map_concepts()
                self._copy_in(locked)
            work.session.execute(update(ImportStage).where(ImportStage.id == self.id)
                                 .values(state="switched"))
        if self.seq:
            self._catch_up(work.state.version)

    def _catch_up(self, version: int) -> None:
        """Bring the cache to ``version`` with the switched-in labels, read back as plain rows
        (the stage's own closure, keyed by the file's names, is dropped first)."""
        state, session = self.work.state, self.work.session
        self.closure = Closure()
        try:
            a = AssertedLabel
            rows = session.execute(
                select(a.id, a.a_id, a.b_id, a.positive, a.annotator, a.created_at)
                .where(a.project_id == state.project_id, a.retracted_at.is_(None),
                       a.version <= version).order_by(a.id)).all()
            session.rollback()
            state.replace_closure(Closure.from_labels(
                [Label(row[1], row[2], row[3]) for row in rows], state.closure.concepts))
            for label_id, a_id, b_id, positive, annotator, created_at in rows:
                live = state.labels.get((a_id, b_id))
                if live is None or live.id != label_id:
                    state.remember((a_id, b_id), LiveLabel(label_id, positive, annotator,
                                                           created_at))
        except Exception:  # the file is stored: the next request rebuilds the cache
            logger.warning("the cache of project %d is rebuilt after its import",
                           state.project_id, exc_info=True)
            state.invalidate()

    def _map_concepts(self) -> None:
        """Write the concept id of every ordinal (the file's concepts are stored now)."""
        concepts = self.work.state.closure.concepts
        id_of = self.work.state.id_of
        if len(concepts) != self.n_stored + len(self.new_names) or any(
                id_of.get(name) != concepts[self.n_stored + k]
                for k, name in enumerate(self.new_names)):
            raise ConcurrentChange("the project's concepts changed while its import was "
                                   "staged; nothing of the file was stored, retry")
        rows = [(self.id, k, concept) for k, concept in enumerate(concepts)]
        for start in range(0, len(rows), STAGE_BATCH):
            _executemany(self.work.session, "staged_concepts", ("stage_id", "ord", "concept_id"),
                         rows[start:start + STAGE_BATCH])

    def _copy_in(self, project: Project) -> None:
        """Copy the staged rows into the live tables; the project's version moves past them."""
        session = self.work.session
        postgres = session.get_bind().dialect.name == "postgresql"
        if postgres:  # the ids are chosen here: no other writer may take one meanwhile
            session.execute(text("LOCK TABLE asserted_labels IN EXCLUSIVE MODE"))
        delta = session.scalar(select(AssertedLabel.id).order_by(AssertedLabel.id.desc())
                               .limit(1)) or 0
        if postgres:
            delta = max(delta, session.scalar(text(
                "SELECT last_value FROM pg_sequences WHERE sequencename = "
                "'asserted_labels_id_seq'")) or 0)
        params = {"stage": self.id, "pid": project.id, "delta": delta,
                  "version": project.version}
        session.execute(text(_COPY_LABELS), params)
        session.execute(text(_COPY_EFFECTS), params)
        record_label_answers(session, project.id, since_version=project.version,
                             source="import")
        session.execute(text(_RELEASE), params)
        if postgres:
            session.execute(text("SELECT setval('asserted_labels_id_seq', :top)"),
                            {"top": delta + self.seq})
        project.version += self.runs
        self.work.state.version = project.version

    def close(self, timeout: float) -> None:
        """Delete the stage and its rows (switched in, or not); quietly, since this runs on
        the way out of an error too: a stage left over is swept by a later import."""
        try:
            sweep(self.work.session, timeout, self.id)
        except Exception:  # noqa: BLE001 - the stage's heartbeat then ages and it is swept
            logger.warning("import stage %d left for a later sweep", self.id, exc_info=True)


_COPY_LABELS = """
INSERT INTO asserted_labels (id, project_id, a_id, b_id, positive, annotator, created_at,
                             version, caused_by)
SELECT s.seq + :delta, :pid, ca.concept_id, cb.concept_id, s.positive, s.annotator,
       s.created_at, s.run + :version, COALESCE(s.cause_seq + :delta, s.cause_id)
FROM staged_labels s
JOIN staged_concepts ca ON ca.stage_id = s.stage_id AND ca.ord = s.a_ord
JOIN staged_concepts cb ON cb.stage_id = s.stage_id AND cb.ord = s.b_ord
WHERE s.stage_id = :stage ORDER BY s.seq
"""

_COPY_EFFECTS = """
INSERT INTO closure_effects (project_id, label_id, positive, by_row, line_id, bits, count)
SELECT :pid, e.label_seq + :delta, e.positive, e.by_row, c.concept_id, e.bits, e.count
FROM staged_effects e
JOIN staged_concepts c ON c.stage_id = e.stage_id AND c.ord = e.line_ord
WHERE e.stage_id = :stage
"""

_RELEASE = """
DELETE FROM reservations WHERE project_id = :pid AND pair_id IN (
    SELECT p.id FROM pool_pairs p JOIN asserted_labels l
      ON l.project_id = p.project_id AND l.a_id = p.a_id AND l.b_id = p.b_id
    WHERE p.project_id = :pid AND l.version > :version)
"""


def _sweep_rows(session: Session, stage_id: int) -> None:
    """Delete one stage's staged rows, :data:`STAGE_BATCH` at a time, then the stage.

    The stage is marked failed first, so that an import still running cannot switch in a
    stage swept from under it.
    """
    with write_transaction(session):
        session.execute(update(ImportStage).where(ImportStage.id == stage_id)
                        .values(state="failed"))
    for table, key in ((_staged_labels, "seq"), (_staged_effects, "id"),
                       (cast(Table, StagedConcept.__table__), "ord")):
        column = table.c[key]
        while True:
            with write_transaction(session):
                batch = select(column).where(table.c.stage_id == stage_id).limit(STAGE_BATCH)
                done = cast(Any, session.execute(delete(table).where(
                    table.c.stage_id == stage_id, column.in_(batch)))).rowcount
            if not done:
                break
    with write_transaction(session):
        session.execute(delete(ImportStage).where(ImportStage.id == stage_id))


def sweep(session: Session, timeout: float, stage_id: int | None = None) -> int:
    """Delete the staged rows of finished, failed and dead stages (or of ``stage_id``).

    Each delete is its own short write transaction; returns the number of stages swept.
    """
    if stage_id is None:
        dead = utcnow() - timedelta(seconds=timeout)
        ids = list(session.scalars(select(ImportStage.id).where(
            (ImportStage.state != "staging") | (ImportStage.heartbeat_at < dead))))
    else:
        ids = [stage_id]
    session.rollback()
    for found in ids:
        _sweep_rows(session, found)
    return len(ids)
