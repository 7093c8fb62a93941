"""Import stages: the labels of a long import staged in short transactions, switched in at once.

``import_stages`` holds one row per staged import; ``staged_labels`` and ``staged_effects``
its labels and their closure lines, by concept ordinal (``staged_concepts`` maps them to
ids), until the import's last write transaction copies them into ``asserted_labels`` and
``closure_effects``. The staged tables
hold no data of a finished import, so the downgrade drops them as they are.

Revision ID: 7d4e1a9c3b52
Revises: 3e21b2dc0492
Create Date: 2026-12-05 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "7d4e1a9c3b52"
down_revision: str | None = "3e21b2dc0492"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "import_stages",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "staged_labels",
        sa.Column("stage_id", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("a_ord", sa.Integer(), nullable=False),
        sa.Column("b_ord", sa.Integer(), nullable=False),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("cause_seq", sa.Integer(), nullable=True),
        sa.Column("cause_id", sa.Integer(), nullable=True),
    )
    op.create_table(
        "staged_effects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("stage_id", sa.Integer(), nullable=False),
        sa.Column("label_seq", sa.Integer(), nullable=False),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("by_row", sa.Boolean(), nullable=False),
        sa.Column("line_ord", sa.Integer(), nullable=False),
        sa.Column("bits", sa.LargeBinary(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
    )
    op.create_index("ix_staged_effects_line", "staged_effects",
                    ["stage_id", "positive", "by_row", "line_ord"])
    op.create_table(
        "staged_concepts",
        sa.Column("stage_id", sa.Integer(), primary_key=True),
        sa.Column("ord", sa.Integer(), primary_key=True),
        sa.Column("concept_id", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("staged_concepts")
    op.drop_index("ix_staged_effects_line", table_name="staged_effects")
    op.drop_table("staged_effects")
    op.drop_table("staged_labels")
    op.drop_table("import_stages")
