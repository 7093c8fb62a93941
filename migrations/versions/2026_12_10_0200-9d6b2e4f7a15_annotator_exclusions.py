"""Team actions: excluded annotators and re-asked pairs.

``annotator_exclusions``: one row per annotator of a ``consensus`` project whose answers do
not count (who excluded them, when); including them again deletes the row.
``reasked_pairs``: pairs only one annotator had answered, served to the others as second
opinions until one of them answers. The downgrade drops both tables (nothing of the older
schema refers to them): every annotator counts again, and the re-asked pairs are forgotten.

Revision ID: 9d6b2e4f7a15
Revises: b7d3e9f1c2a4
Create Date: 2026-12-10 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "9d6b2e4f7a15"
down_revision: str | None = "b7d3e9f1c2a4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "annotator_exclusions",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        sa.Column("annotator", sa.String(512), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("excluded_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("project_id", "annotator"),
    )
    op.create_table(
        "reasked_pairs",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("annotator", sa.String(512), nullable=False),
        sa.Column("asked_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("project_id", "a_id", "b_id"),
    )


def downgrade() -> None:
    op.drop_table("reasked_pairs")
    op.drop_table("annotator_exclusions")
