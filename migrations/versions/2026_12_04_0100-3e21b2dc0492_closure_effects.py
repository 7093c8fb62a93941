"""The closure stored by cause as lines of bits (closure_effects), not one row per decided pair.

``closure_pairs`` held one row per decided pair with its cause; ``closure_effects`` holds, per
asserted label, the lines (here rows: the pairs ``(line, y)``) of the pairs it decided, each a
zlib-compressed little-endian bitset over the project's concept ordinals (a concept's rank by
id in its project, from 0). A live label's own cause moves to ``asserted_labels.caused_by``.

The data is moved exactly, one project at a time, with plain SQL (no service code: the
migration must keep working when the models change). The upgrade writes every line as a row
(``by_row``); the downgrade expands rows and columns alike back into pairs.

On SQLite the column is added and dropped in place (``ALTER TABLE ... ADD/DROP COLUMN``, the
latter needs SQLite 3.35): rebuilding ``asserted_labels`` the batch way would drop the table,
and with foreign keys on, SQLite's implicit ``DELETE`` would cascade to every row that refers
to a label (the closure itself).

Revision ID: 3e21b2dc0492
Revises: 5b2e8d1c7a93
Create Date: 2026-12-04 01:00:00
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "3e21b2dc0492"
down_revision: str | None = "5b2e8d1c7a93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000  # rows per executemany and per fetch

_projects = sa.table("projects", sa.column("id", sa.Integer()))
_concepts = sa.table("concepts", sa.column("id", sa.Integer()),
                     sa.column("project_id", sa.Integer()))
_labels = sa.table(
    "asserted_labels",
    sa.column("id", sa.Integer()), sa.column("project_id", sa.Integer()),
    sa.column("a_id", sa.Integer()), sa.column("b_id", sa.Integer()),
    sa.column("retracted_at", sa.DateTime()), sa.column("caused_by", sa.Integer()),
)
_pairs = sa.table(
    "closure_pairs",
    sa.column("project_id", sa.Integer()), sa.column("a_id", sa.Integer()),
    sa.column("b_id", sa.Integer()), sa.column("positive", sa.Boolean()),
    sa.column("asserted", sa.Boolean()), sa.column("label_id", sa.Integer()),
    sa.column("caused_by", sa.Integer()),
)
_effects = sa.table(
    "closure_effects",
    sa.column("project_id", sa.Integer()), sa.column("label_id", sa.Integer()),
    sa.column("positive", sa.Boolean()), sa.column("by_row", sa.Boolean()),
    sa.column("line_id", sa.Integer()), sa.column("bits", sa.LargeBinary()),
    sa.column("count", sa.Integer()),
)


# -- bitsets -------------------------------------------------------------------------------

def _encode(ordinals: list[int]) -> tuple[bytes, int]:
    """The stored bits and count of a line holding the concepts of these ordinals."""
    buffer = bytearray(max(ordinals) // 8 + 1)
    for k in ordinals:
        buffer[k >> 3] |= 1 << (k & 7)
    n = int.from_bytes(buffer, "little")
    raw = n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little")
    return zlib.compress(raw, 1), n.bit_count()


def _decode(bits: bytes) -> Iterator[int]:
    """The ordinals of the set bits of a stored line, in increasing order."""
    for i, byte in enumerate(zlib.decompress(bits)):
        if byte:
            base = i * 8
            for j in range(8):
                if byte >> j & 1:
                    yield base + j


# -- helpers -------------------------------------------------------------------------------

def _project_ids(conn: sa.Connection) -> list[int]:
    return list(conn.scalars(sa.select(_projects.c.id).order_by(_projects.c.id)))


def _concept_ids(conn: sa.Connection, project_id: int) -> list[int]:
    """The project's concept ids by ordinal (their rank by id)."""
    return list(conn.scalars(sa.select(_concepts.c.id)
                             .where(_concepts.c.project_id == project_id)
                             .order_by(_concepts.c.id)))


def _stream(conn: sa.Connection, statement: sa.Select) -> Iterator[sa.Row]:
    """The rows of ``statement``, fetched ``BATCH`` at a time (a server-side cursor on PG)."""
    result = conn.execute(statement.execution_options(yield_per=BATCH))
    for partition in result.partitions():
        yield from partition


def _online() -> sa.Connection:
    """The connection to move the data on; the data cannot be moved in ``--sql`` mode."""
    if op.get_context().as_sql:
        raise RuntimeError(f"revision {revision} moves the closure's data: it must run on a "
                           "database, not as SQL (alembic --sql)")
    return op.get_bind()


def _flush(conn: sa.Connection, statement: Any, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(statement, rows)
        rows.clear()


# -- upgrade -------------------------------------------------------------------------------

def upgrade() -> None:
    conn = _online()
    op.create_table(
        "closure_effects",
        sa.Column("project_id", sa.Integer(),
                  sa.ForeignKey("projects.id", ondelete="CASCADE",
                                name="fk_closure_effects_project_id_projects"),
                  nullable=False),
        sa.Column("label_id", sa.Integer(),
                  sa.ForeignKey("asserted_labels.id", ondelete="CASCADE",
                                name="fk_closure_effects_label_id_asserted_labels"),
                  nullable=False),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("by_row", sa.Boolean(), nullable=False),
        sa.Column("line_id", sa.Integer(),
                  sa.ForeignKey("concepts.id", ondelete="CASCADE",
                                name="fk_closure_effects_line_id_concepts"),
                  nullable=False),
        sa.Column("bits", sa.LargeBinary(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "label_id", "positive", "by_row", "line_id",
                                name="pk_closure_effects"),
    )
    # In place, never a rebuild (see the module docstring).
    with op.batch_alter_table("asserted_labels", recreate="never") as batch:
        batch.add_column(sa.Column("caused_by", sa.Integer(), nullable=True))

    for project_id in _project_ids(conn):
        _upgrade_project(conn, project_id)

    op.drop_index("ix_closure_pairs_project_id_caused_by", table_name="closure_pairs")
    op.drop_table("closure_pairs")


_SET_CAUSE = (sa.update(_labels).where(_labels.c.id == sa.bindparam("l_id"))
              .values(caused_by=sa.bindparam("l_caused_by")))


def _upgrade_project(conn: sa.Connection, project_id: int) -> None:
    """Group the project's pairs into the rows of their causes; each live label its cause."""
    ordinal = {concept_id: k for k, concept_id in enumerate(_concept_ids(conn, project_id))}
    rows = (sa.select(_pairs.c.caused_by, _pairs.c.positive, _pairs.c.a_id, _pairs.c.b_id,
                      _pairs.c.label_id)
            .where(_pairs.c.project_id == project_id)
            .order_by(_pairs.c.caused_by, _pairs.c.positive, _pairs.c.a_id))
    effects: list[dict[str, Any]] = []
    causes: list[dict[str, Any]] = []
    line: tuple[int, bool, int] | None = None
    members: list[int] = []

    def close_line() -> None:
        if line is None:
            return
        bits, count = _encode(members)
        effects.append({"project_id": project_id, "label_id": line[0], "positive": line[1],
                        "by_row": True, "line_id": line[2], "bits": bits, "count": count})
        if len(effects) >= BATCH:
            _flush(conn, _effects.insert(), effects)

    for caused_by, positive, a_id, b_id, label_id in _stream(conn, rows):
        key = (caused_by, bool(positive), a_id)
        if key != line:
            close_line()
            line, members = key, []
        members.append(ordinal[b_id])
        if label_id is not None:
            causes.append({"l_id": label_id, "l_caused_by": caused_by})
            if len(causes) >= BATCH:
                _flush(conn, _SET_CAUSE, causes)
    close_line()
    _flush(conn, _effects.insert(), effects)
    _flush(conn, _SET_CAUSE, causes)


# -- downgrade -----------------------------------------------------------------------------

def downgrade() -> None:
    conn = _online()
    # closure_pairs exactly as the initial schema (8c1d2f3a9b10) made it.
    op.create_table(
        "closure_pairs",
        sa.Column("project_id", sa.Integer(),
                  sa.ForeignKey("projects.id", ondelete="CASCADE",
                                name="fk_closure_pairs_project_id_projects"),
                  nullable=False),
        sa.Column("a_id", sa.Integer(),
                  sa.ForeignKey("concepts.id", ondelete="CASCADE",
                                name="fk_closure_pairs_a_id_concepts"),
                  nullable=False),
        sa.Column("b_id", sa.Integer(),
                  sa.ForeignKey("concepts.id", ondelete="CASCADE",
                                name="fk_closure_pairs_b_id_concepts"),
                  nullable=False),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("asserted", sa.Boolean(), nullable=False),
        sa.Column("label_id", sa.Integer(),
                  sa.ForeignKey("asserted_labels.id", ondelete="CASCADE",
                                name="fk_closure_pairs_label_id_asserted_labels"),
                  nullable=True),
        sa.Column("caused_by", sa.Integer(),
                  sa.ForeignKey("asserted_labels.id", ondelete="CASCADE",
                                name="fk_closure_pairs_caused_by_asserted_labels"),
                  nullable=False),
        sa.PrimaryKeyConstraint("project_id", "a_id", "b_id", name="pk_closure_pairs"),
    )
    op.create_index("ix_closure_pairs_project_id_caused_by", "closure_pairs",
                    ["project_id", "caused_by"])

    for project_id in _project_ids(conn):
        _downgrade_project(conn, project_id)

    op.drop_table("closure_effects")
    with op.batch_alter_table("asserted_labels", recreate="never") as batch:
        batch.drop_column("caused_by")


def _downgrade_project(conn: sa.Connection, project_id: int) -> None:
    """Expand the project's lines into one row per pair, asserted where a live label is."""
    concept_of = _concept_ids(conn, project_id)
    live = {(a, b): label_id for label_id, a, b in conn.execute(
        sa.select(_labels.c.id, _labels.c.a_id, _labels.c.b_id)
        .where(_labels.c.project_id == project_id, _labels.c.retracted_at.is_(None)))}
    lines = (sa.select(_effects.c.label_id, _effects.c.positive, _effects.c.by_row,
                       _effects.c.line_id, _effects.c.bits)
             .where(_effects.c.project_id == project_id)
             .order_by(_effects.c.label_id, _effects.c.positive, _effects.c.by_row,
                       _effects.c.line_id))
    rows: list[dict[str, Any]] = []
    for label_id, positive, by_row, line_id, bits in _stream(conn, lines):
        for k in _decode(bits):
            other = concept_of[k]
            a, b = (line_id, other) if by_row else (other, line_id)
            asserted_by = live.get((a, b))
            rows.append({"project_id": project_id, "a_id": a, "b_id": b,
                         "positive": bool(positive), "asserted": asserted_by is not None,
                         "label_id": asserted_by, "caused_by": label_id})
            if len(rows) >= BATCH:
                _flush(conn, _pairs.insert(), rows)
    _flush(conn, _pairs.insert(), rows)
