"""The tables of the service: projects, their concepts, pool, asserted labels and closure.

The database is the source of truth. The asserted labels are an append-only log (a retraction
only stamps ``retracted_at``); the closure table holds, per asserted label, the lines (rows
or columns, as bitsets) of the pairs it decided when the live labels are replayed in
assertion order: a label writes what it changed, not one row per decided pair.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, UTCDateTime, utcnow

__all__ = [
    "NAME_LENGTH",
    "POLICIES",
    "AgreementView",
    "AnnotatorExclusion",
    "AnnotatorKey",
    "Answer",
    "AssertedLabel",
    "ClosureEffect",
    "Concept",
    "ConceptLink",
    "ConceptText",
    "CLOSED_REASONS",
    "CheckQuestion",
    "Disagreement",
    "DisagreementResolution",
    "IdempotencyRecord",
    "ImportStage",
    "Job",
    "PoolPair",
    "Project",
    "ReaskedPair",
    "Reservation",
    "StagedConcept",
    "StagedEffect",
    "StagedLabel",
    "Suggestion",
    "tombstone_name",
]

NAME_LENGTH = 512


class Project(Base):
    """One labeling project: a set of concepts, a pool of pairs and the labels on them.

    ``version`` grows with every change of the project (concepts, pool, labels) so that each
    process can tell that its cached reasoning state is stale; ``retraction_version`` is the
    version of the newest retraction, after which a cache must be rebuilt rather than extended.
    """

    __tablename__ = "projects"
    __table_args__ = (
        Index("uq_projects_reviewer_key_hash", "reviewer_key_hash", unique=True),
        {"sqlite_autoincrement": True},  # ids are never reused: caches key on them
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    retraction_version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    feature_length: Mapped[int | None] = mapped_column(Integer, nullable=True)
    api_key_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    prediction_model: Mapped[str] = mapped_column(
        String(64), nullable=False, default="random_forest"
    )
    # The pool's features are computed by sporal from the concept texts and links
    # (reasoning.features), not sent by the client; ``corpus_version`` grows with every change
    # of the texts, links or names they are computed from.
    features_computed: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=false())
    corpus_version: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default=text("0"))
    # How answers become asserted labels (POLICIES): ``strict``, the first answer on a pair
    # asserts it; ``consensus``, the labels that best explain every answer.
    policy: Mapped[str] = mapped_column(
        String(16), nullable=False, default="strict", server_default=text("'strict'"))
    # The question annotators are asked, with ``{a}`` and ``{b}``; None: the default wording.
    question: Mapped[str | None] = mapped_column(Text, nullable=True)
    reviewer_key_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # ``consensus``: the project version of the last full consensus (None: none yet, or
    # ``strict``), and the pairs repaired locally since, JSON ``[[a_id, b_id], ...]`` (None:
    # none), each waiting for the background refit (app.services.labels.incremental).
    consensus_as_of: Mapped[int | None] = mapped_column(Integer, nullable=True)
    consensus_pending: Mapped[str | None] = mapped_column(Text, nullable=True)
    # ``consensus``: the per-annotator accuracies of the last full consensus with the version
    # it was stored at, JSON ``{"as_of": v, "accuracy": [[annotator, p], ...]}`` (None: none
    # kept), from which a process holding no fit rebuilds one (app.services.team).
    consensus_accuracy: Mapped[str | None] = mapped_column(Text, nullable=True)


class Concept(Base):
    """A concept of a project, named uniquely within it.

    A deleted concept is a tombstone (``deleted_at`` set), so that the answers and
    disagreements on it stay in the history: it leaves every listing, the pairs, ``next``,
    the labels and the closure, and its name is free again (a concept of that name is a new
    one): the tombstone's ``name`` becomes :func:`tombstone_name` (which no concept's name
    can be: names hold no control characters) and ``deleted_name`` keeps the name it had.
    """

    __tablename__ = "concepts"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    deleted_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)


def tombstone_name(concept_id: int) -> str:
    """The stored ``name`` of a deleted concept: unit separator, then its id (unique in the
    project, and never a live concept's name)."""
    return f"\x1f{concept_id}"


class ConceptText(Base):
    """A concept's text (a wiki page, a syllabus entry): what text features are computed from."""

    __tablename__ = "concept_texts"

    concept_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, index=True
    )
    text: Mapped[str] = mapped_column(Text, nullable=False)


class ConceptLink(Base):
    """A directed link between two concepts: ``source``'s text refers to ``target``."""

    __tablename__ = "concept_links"
    __table_args__ = (UniqueConstraint("project_id", "source_id", "target_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    source_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    target_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )


class PoolPair(Base):
    """A candidate pair of the pool with its feature vector (float64, little-endian bytes)."""

    __tablename__ = "pool_pairs"
    __table_args__ = (UniqueConstraint("project_id", "a_id", "b_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    features: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class AssertedLabel(Base):
    """An asserted label: the append-only log of what annotators said.

    At most one live (not retracted) label per pair, enforced by a partial unique index that
    SQLite and PostgreSQL both understand.
    """

    __tablename__ = "asserted_labels"
    __table_args__ = (
        Index(
            "uq_asserted_labels_live_pair",
            "project_id",
            "a_id",
            "b_id",
            unique=True,
            sqlite_where=text("retracted_at IS NULL"),
            postgresql_where=text("retracted_at IS NULL"),
        ),
        Index("ix_asserted_labels_project_id_version", "project_id", "version"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    positive: Mapped[bool] = mapped_column(Boolean, nullable=False)
    annotator: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    retracted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    retracted_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The label whose effect decided this pair (itself when the pair was undecided before):
    # what the order of ``GET labels`` needs. None once retracted.
    caused_by: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ClosureEffect(Base):
    """One line of what an asserted label newly decided: the closure H, stored by cause.

    Replaying the live labels in the order they were asserted (their ids), each label decides
    a set of new pairs (closure.md); it is stored as *lines*: a row (``by_row``: the pairs
    ``(line, y)``) or a column (the pairs ``(x, line)``) of one relation (``positive``), with
    ``bits`` the other concepts as a bitset over the project's concept ordinals (a concept's
    rank by id in the project, from 0), little-endian and zlib-compressed. Each label takes
    the orientation with fewer lines, so a label writes in proportion to the lines it
    changed, never to the pairs it decided. Every decided pair lies in exactly one line, of
    its cause (``caused_by``); H is the union of every line.
    """

    __tablename__ = "closure_effects"

    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    label_id: Mapped[int] = mapped_column(
        ForeignKey("asserted_labels.id", ondelete="CASCADE"), primary_key=True
    )
    positive: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    by_row: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    line_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), primary_key=True
    )
    bits: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    count: Mapped[int] = mapped_column(Integer, nullable=False)


class Suggestion(Base):
    """A question the service suggested (the log behind ``GET .../next``).

    ``p_positive``: for a new pair the strategy chose with a model, that model's P(positive)
    of it then, before any answer on it (the model term of an answer's P(wrong),
    :func:`app.services.asking.answered`); None for a team question or without a model.
    """

    __tablename__ = "suggestions"
    __table_args__ = (Index("ix_suggestions_project_id_created_at", "project_id", "created_at"),
                      Index("ix_suggestions_pair_id", "pair_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    pair_id: Mapped[int] = mapped_column(
        ForeignKey("pool_pairs.id", ondelete="CASCADE"), nullable=False
    )
    strategy: Mapped[str] = mapped_column(String(16), nullable=False)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    gain_positive: Mapped[float | None] = mapped_column(Float, nullable=True)
    gain_negative: Mapped[float | None] = mapped_column(Float, nullable=True)
    annotator: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    p_positive: Mapped[float | None] = mapped_column(Float, nullable=True)


class Reservation(Base):
    """A lease on a pool pair handed to one annotator; other annotators are not asked it."""

    __tablename__ = "reservations"
    __table_args__ = (Index("ix_reservations_project_id_expires_at", "project_id", "expires_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    pair_id: Mapped[int] = mapped_column(
        ForeignKey("pool_pairs.id", ondelete="CASCADE"), nullable=False, unique=True
    )
    annotator: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


class IdempotencyRecord(Base):
    """The stored first response of a request sent with an ``Idempotency-Key``."""

    __tablename__ = "idempotency_records"
    __table_args__ = (
        UniqueConstraint("project_id", "key"),
        # The sweep of expired records reads a project's oldest records first.
        Index("ix_idempotency_records_project_id_created_at", "project_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    key: Mapped[str] = mapped_column(String(255), nullable=False)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False)
    response_body: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


POLICIES = ("strict", "consensus")


class Answer(Base):
    """One annotator's answer on a pair: the evidence the asserted labels are drawn from.

    Every label posted (single, bulk, imported, a reviewer's resolution) is kept here, whether
    it asserted its pair, agreed with what was decided, contradicted it (``refused``, in the
    ``strict`` policy) or disputed it (``contested``, in ``consensus``). ``label_id`` is the
    asserted label the answer created or agreed with; a retracted answer keeps its row with
    ``retracted_at`` set.
    """

    __tablename__ = "answers"
    __table_args__ = (
        Index("ix_answers_project_id_id", "project_id", "id"),
        Index("ix_answers_project_id_annotator", "project_id", "annotator"),
        Index("ix_answers_project_id_pair", "project_id", "a_id", "b_id"),
        # only retracted answers: the newest retraction is read from it, and it never
        # offers itself for the live answers (retracted_at IS NULL) that joins read
        Index("ix_answers_project_id_retracted_at", "project_id", "retracted_at",
              sqlite_where=text("retracted_at IS NOT NULL"),
              postgresql_where=text("retracted_at IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    positive: Mapped[bool] = mapped_column(Boolean, nullable=False)
    annotator: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    role: Mapped[str] = mapped_column(String(16), nullable=False, default="annotator")
    source: Mapped[str] = mapped_column(String(64), nullable=False, default="api")
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    check_question: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False,
                                        server_default=false())
    label_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    retracted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ImportStage(Base):
    """An import whose labels are staged (``staged_labels``, ``staged_effects``), not yet live.

    Nothing reads the staged rows but the import itself: they enter ``asserted_labels`` and
    ``closure_effects`` in the import's last, short write transaction, which also sets ``state``
    to ``"switched"``. A stage ``"failed"``, ``"switched"``, or ``"staging"`` with a
    ``heartbeat_at`` older than ``SPORAL_IMPORT_STAGE_TIMEOUT`` (its process died) is swept:
    its rows deleted in short transactions, then the stage itself. ``project_id`` is no
    foreign key, so that a stage outlives its project until it is swept.
    """

    __tablename__ = "import_stages"
    __table_args__ = {"sqlite_autoincrement": True}  # staged rows key on it: never reused

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default="staging")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class StagedLabel(Base):
    """A label of a staged import, in the order it will be stored (``seq`` from 1).

    Concepts are named by their ordinal in the project after the import's concepts were added
    (their rank by id); ``run`` numbers the import's writes (each becomes a project version);
    the cause is a staged label (``cause_seq``) or a stored one (``cause_id``).
    """

    __tablename__ = "staged_labels"

    stage_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    run: Mapped[int] = mapped_column(Integer, nullable=False)
    a_ord: Mapped[int] = mapped_column(Integer, nullable=False)
    b_ord: Mapped[int] = mapped_column(Integer, nullable=False)
    positive: Mapped[bool] = mapped_column(Boolean, nullable=False)
    annotator: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    cause_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cause_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


class StagedEffect(Base):
    """A line of what a staged label decided (:class:`ClosureEffect`, by concept ordinals)."""

    __tablename__ = "staged_effects"
    __table_args__ = (
        # the causes of later writes of the same import are looked up by line
        Index("ix_staged_effects_line", "stage_id", "positive", "by_row", "line_ord"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stage_id: Mapped[int] = mapped_column(Integer, nullable=False)
    label_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    positive: Mapped[bool] = mapped_column(Boolean, nullable=False)
    by_row: Mapped[bool] = mapped_column(Boolean, nullable=False)
    line_ord: Mapped[int] = mapped_column(Integer, nullable=False)
    bits: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    count: Mapped[int] = mapped_column(Integer, nullable=False)


class StagedConcept(Base):
    """The concept id of each ordinal of a staged import, written as it is switched in."""

    __tablename__ = "staged_concepts"

    stage_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ord: Mapped[int] = mapped_column(Integer, primary_key=True)
    concept_id: Mapped[int] = mapped_column(Integer, nullable=False)
class Job(Base):
    """Heavy work of a project run in the background (a feature recompute), and how it ended.

    ``state`` is ``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``; ``owner``
    names the process that runs it (``host:pid``), which touches ``updated_at`` while it holds
    the job, so that a job whose process died can be told from one still running.
    ``result`` (a success) and ``problem`` (a failure: an RFC 9457 object) are JSON text.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        # The queue rules read a project's queued and running jobs; the sweep, its oldest.
        Index("ix_jobs_project_id_state", "project_id", "state"),
        Index("ix_jobs_state_finished_at", "state", "finished_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    kind: Mapped[str] = mapped_column(String(64), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    progress: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False,
                                                   server_default=false())
    owner: Mapped[str] = mapped_column(String(255), nullable=False)
    result: Mapped[str | None] = mapped_column(Text, nullable=True)
    problem: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Disagreement(Base):
    """A pair in dispute in a ``consensus`` project: answered both ways and not settled, or
    answered against what stronger labels imply.

    Opened when the consensus first finds the pair contested, closed (``closed_at``,
    ``closed_reason``: one of :data:`CLOSED_REASONS`) when later answers settle it, a reviewer
    resolves it (``resolution_id``: the reviewer's answer of the latest live resolution; every
    resolution is a :class:`DisagreementResolution`), a retraction settles it or the project
    switches policy. ``reopened_at``: a reviewer reopened it, and it stays open until a
    reviewer resolves it again (or the policy switches), whatever the answers. At most one
    disagreement per pair is open at a time; a closed one keeps its id.
    """

    __tablename__ = "disagreements"
    __table_args__ = (
        Index("ix_disagreements_project_id_pair", "project_id", "a_id", "b_id"),
        Index("ix_disagreements_project_id_id", "project_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    resolution_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    closed_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reopened_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


CLOSED_REASONS = ("answers", "reviewer", "retraction", "policy", "merge", "deletion",
                  "exclusion")
"""Why a disagreement closed: later answers settled it, a reviewer's resolution (its own or
one whose refit settled it), a retraction (an answer or a resolution undone), a switch of
policy, a merge of concepts (the merged pairs' consensus computed again, or its pair merged
away), the deletion of one of its concepts, an annotator excluded or included again."""


class DisagreementResolution(Base):
    """One resolution of a disagreement: the reviewer's answer that resolved it (undone when
    that answer is retracted). Every resolution is kept, in order."""

    __tablename__ = "disagreement_resolutions"
    __table_args__ = (
        Index("ix_disagreement_resolutions_disagreement_id", "disagreement_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    disagreement_id: Mapped[int] = mapped_column(
        ForeignKey("disagreements.id", ondelete="CASCADE"), nullable=False
    )
    answer_id: Mapped[int] = mapped_column(
        ForeignKey("answers.id", ondelete="CASCADE"), nullable=False
    )


class CheckQuestion(Base):
    """A check question served to an annotator by ``next`` (a pair decided positive only
    through other concepts), so that their answer to it is marked as one
    (``answers.check_question``); ``answer_id`` is set once they answered it."""

    __tablename__ = "check_questions"
    __table_args__ = (
        Index("ix_check_questions_project_id_pair", "project_id", "a_id", "b_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    annotator: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    answer_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


class AnnotatorKey(Base):
    """A person's key to one project: whoever holds it answers as ``annotator``, and owns
    every answer by that name (earlier ones included).

    Only the key's SHA-256 is stored. A new key for the same name retires the one before
    (``retired_at``); revoking retires it too. A retired key opens nothing.
    """

    __tablename__ = "annotator_keys"
    __table_args__ = (
        Index("uq_annotator_keys_key_hash", "key_hash", unique=True),
        Index("ix_annotator_keys_project_id_annotator", "project_id", "annotator"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    annotator: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    key_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AnnotatorExclusion(Base):
    """An annotator of a ``consensus`` project whose answers do not count: kept (and their
    later answers stored) but left out of the consensus until they are included again
    (the row deleted). ``role``: the key that excluded them (``admin``, ``project`` or
    ``reviewer``)."""

    __tablename__ = "annotator_exclusions"
    __table_args__ = (
        UniqueConstraint("project_id", "annotator"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    annotator: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    excluded_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class ReaskedPair(Base):
    """A pair only ``annotator`` had answered, re-asked by a lead: ``next`` serves it to the
    other annotators as a second opinion until one of them answers it."""

    __tablename__ = "reasked_pairs"
    __table_args__ = (
        UniqueConstraint("project_id", "a_id", "b_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("concepts.id", ondelete="CASCADE"), nullable=False
    )
    annotator: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    asked_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class AgreementView(Base):
    """The last agreement view computed for a project (``GET agreement``), kept so that a
    large project's view is read, not recomputed, by a restarted process or another server:
    ``mark``, the fingerprint of the answers it was computed from (JSON list of integers);
    ``body``, the view and each annotator's minority answer ids (JSON). A cache of the
    answers: losing it costs one computation, never a fact."""

    __tablename__ = "agreement_views"

    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    mark: Mapped[str] = mapped_column(Text, nullable=False)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    body: Mapped[str] = mapped_column(Text, nullable=False)
