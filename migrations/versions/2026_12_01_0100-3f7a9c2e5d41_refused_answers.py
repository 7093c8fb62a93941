"""Refused answers: each 409 contradiction, counted per annotator by GET .../annotators.

Revision ID: 3f7a9c2e5d41
Revises: 8c1d2f3a9b10
Create Date: 2026-12-01 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "3f7a9c2e5d41"
down_revision: str | None = "8c1d2f3a9b10"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "refused_answers",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_refused_answers_project_id_annotator", "refused_answers",
                    ["project_id", "annotator"])


def downgrade() -> None:
    op.drop_index("ix_refused_answers_project_id_annotator", table_name="refused_answers")
    op.drop_table("refused_answers")
