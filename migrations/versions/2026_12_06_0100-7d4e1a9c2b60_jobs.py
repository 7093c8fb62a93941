"""Jobs: heavy work of a project (a feature recompute) run in the background and read back.

Revision ID: 7d4e1a9c2b60
Revises: 7d4e1a9c3b52
Create Date: 2026-12-06 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "7d4e1a9c2b60"
down_revision: str | None = "7d4e1a9c3b52"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), sa.ForeignKey("projects.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_jobs_project_id_state", "jobs", ["project_id", "state"])
    op.create_index("ix_jobs_state_finished_at", "jobs", ["state", "finished_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_state_finished_at", table_name="jobs")
    op.drop_index("ix_jobs_project_id_state", table_name="jobs")
    op.drop_table("jobs")
