"""Idempotency records expire: an index to find a project's oldest records.

Revision ID: 88cf5d20d67e
Revises: 3f7a9c2e5d41
Create Date: 2026-12-02 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "88cf5d20d67e"
down_revision: str | None = "3f7a9c2e5d41"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_idempotency_records_project_id_created_at", "idempotency_records",
                    ["project_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_records_project_id_created_at",
                  table_name="idempotency_records")
