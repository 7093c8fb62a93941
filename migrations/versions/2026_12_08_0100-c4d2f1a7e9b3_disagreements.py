"""Disagreements and check questions of ``consensus`` projects.

``disagreements``: a pair in dispute, open until answers settle it or a reviewer resolves it.
``check_questions``: which pairs ``next`` served to whom as check questions, so that their
answers are marked. The downgrade drops both (nothing of the older schema refers to them).

Revision ID: c4d2f1a7e9b3
Revises: a3c5e7f9b812
Create Date: 2026-12-08 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "c4d2f1a7e9b3"
down_revision: str | None = "a3c5e7f9b812"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "disagreements",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("opened_at", UTCDateTime(), nullable=False),
        sa.Column("closed_at", UTCDateTime(), nullable=True),
        sa.Column("resolution_id", sa.Integer(), nullable=True),
    )
    op.create_index("ix_disagreements_project_id_pair", "disagreements",
                    ["project_id", "a_id", "b_id"])
    op.create_table(
        "check_questions",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("answer_id", sa.Integer(), nullable=True),
    )
    op.create_index("ix_check_questions_project_id_pair", "check_questions",
                    ["project_id", "a_id", "b_id"])


def downgrade() -> None:
    op.drop_index("ix_check_questions_project_id_pair", table_name="check_questions")
    op.drop_table("check_questions")
    op.drop_index("ix_disagreements_project_id_pair", table_name="disagreements")
    op.drop_table("disagreements")
