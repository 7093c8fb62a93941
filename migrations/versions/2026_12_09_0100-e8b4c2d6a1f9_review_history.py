"""Review a lead can follow: why and when each disagreement closed, every resolution kept.

``disagreements.closed_reason`` (``answers``, ``reviewer``, ``retraction``, ``policy`` or
``merge``) and ``disagreements.reopened_at`` (a reviewer reopened it); the table
``disagreement_resolutions`` links each disagreement to every reviewer's answer that resolved
it. The upgrade gives every closed disagreement a reason (``reviewer`` where a resolution is
linked, else ``answers``) and keeps its resolution as its first resolution; the downgrade drops
the table and the columns (``resolution_id`` still names the latest resolution).

Revision ID: e8b4c2d6a1f9
Revises: c4d2f1a7e9b3
Create Date: 2026-12-09 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "e8b4c2d6a1f9"
down_revision: str | None = "c4d2f1a7e9b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("disagreements") as batch:
        batch.add_column(sa.Column("closed_reason", sa.String(16), nullable=True))
        batch.add_column(sa.Column("reopened_at", UTCDateTime(), nullable=True))
    op.create_table(
        "disagreement_resolutions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("disagreement_id", sa.Integer(),
                  sa.ForeignKey("disagreements.id", ondelete="CASCADE"), nullable=False),
        sa.Column("answer_id", sa.Integer(),
                  sa.ForeignKey("answers.id", ondelete="CASCADE"), nullable=False),
    )
    op.create_index("ix_disagreement_resolutions_disagreement_id",
                    "disagreement_resolutions", ["disagreement_id"])
    op.execute("UPDATE disagreements SET closed_reason = CASE WHEN resolution_id IS NULL "
               "THEN 'answers' ELSE 'reviewer' END WHERE closed_at IS NOT NULL")
    op.execute("INSERT INTO disagreement_resolutions (disagreement_id, answer_id) "
               "SELECT d.id, d.resolution_id FROM disagreements d "
               "JOIN answers a ON a.id = d.resolution_id ORDER BY d.id")


def downgrade() -> None:
    op.drop_index("ix_disagreement_resolutions_disagreement_id",
                  table_name="disagreement_resolutions")
    op.drop_table("disagreement_resolutions")
    with op.batch_alter_table("disagreements") as batch:
        batch.drop_column("reopened_at")
        batch.drop_column("closed_reason")
