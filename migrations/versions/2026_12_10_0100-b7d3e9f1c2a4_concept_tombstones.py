"""Concept tombstones and disagreement pages.

``concepts.deleted_at`` and ``concepts.deleted_name``: a deleted (or merged-away) concept stays
as a tombstone so that the answers and disagreements on it stay in the history; its ``name``
becomes a placeholder that no concept's name can be (``models.tables.tombstone_name``), so the
name is free again, and ``deleted_name`` keeps it. ``ix_disagreements_project_id_id``: the
disagreements listing pages along it (keyset on the id).

The downgrade deletes the tombstones, as the older schema deleted a concept: the answers,
disagreements and retracted labels on them go with them (``ON DELETE CASCADE``), then drops the
index and the columns (altered in place: rebuilding "concepts" would drop it, and every row
that names a concept would cascade away).

Revision ID: b7d3e9f1c2a4
Revises: f1a2b3c4d5e6
Create Date: 2026-12-10 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "b7d3e9f1c2a4"
down_revision: str | None = "f1a2b3c4d5e6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("concepts", recreate="never") as batch:
        batch.add_column(sa.Column("deleted_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("deleted_name", sa.String(512), nullable=True))
    op.create_index("ix_disagreements_project_id_id", "disagreements", ["project_id", "id"])


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM concepts WHERE deleted_at IS NOT NULL"))
    op.drop_index("ix_disagreements_project_id_id", table_name="disagreements")
    with op.batch_alter_table("concepts", recreate="never") as batch:
        batch.drop_column("deleted_name")
        batch.drop_column("deleted_at")
