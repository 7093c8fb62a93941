"""Agreement views kept: the last ``GET agreement`` view computed for each project; answers
indexed by retraction time.

``agreement_views``: one row per project, the view's JSON with the fingerprint of the answers
it was computed from, so that a large project's view is read by a restarted process or another
server instead of computed again in the request (``docs/consensus.md``, "Agreement"). A cache:
the downgrade drops the table, and the next read computes the view again.
``ix_answers_project_id_retracted_at``: the newest retraction of a project's answers is read
from the index (the answers' fingerprint, ``app.services.team.answers_fingerprint``), not by
counting every answer; the downgrade drops it. Partial, over retracted answers only: a full
index on ``(project_id, retracted_at)`` offered itself for every read of the live answers
(``retracted_at IS NULL``), and PostgreSQL, its statistics not yet caught up after a large
import, joined 100,000 answers to the labels by a nested loop that never finished.

Revision ID: e2b4d6f8a1c3
Revises: 2b9f4d6e8a13
Create Date: 2026-12-12 02:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "e2b4d6f8a1c3"
down_revision: str | None = "2b9f4d6e8a13"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agreement_views",
        sa.Column("project_id", sa.Integer(),
                  sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("mark", sa.Text(), nullable=False),
        sa.Column("computed_at", UTCDateTime(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index("ix_answers_project_id_retracted_at", "answers",
                    ["project_id", "retracted_at"],
                    sqlite_where=sa.text("retracted_at IS NOT NULL"),
                    postgresql_where=sa.text("retracted_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_answers_project_id_retracted_at", table_name="answers")
    op.drop_table("agreement_views")
