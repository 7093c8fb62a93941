"""Annotator keys: a person's key to one project, stored hashed.

``annotator_keys``: one row per key issued (the project, the annotator's name, the key's
SHA-256, when it was made and when it was retired: a new key for the name, or a revocation).
The downgrade drops the table (nothing of the older schema refers to it); the keys are gone
with it, and the people who held them use the project key again.

Revision ID: f1a2b3c4d5e6
Revises: e8b4c2d6a1f9
Create Date: 2026-12-09 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "f1a2b3c4d5e6"
down_revision: str | None = "e8b4c2d6a1f9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "annotator_keys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(),
                  sa.ForeignKey("projects.id", ondelete="CASCADE"), nullable=False),
        sa.Column("annotator", sa.String(512), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("retired_at", UTCDateTime(), nullable=True),
    )
    op.create_index("uq_annotator_keys_key_hash", "annotator_keys", ["key_hash"], unique=True)
    op.create_index("ix_annotator_keys_project_id_annotator", "annotator_keys",
                    ["project_id", "annotator"])


def downgrade() -> None:
    op.drop_index("ix_annotator_keys_project_id_annotator", table_name="annotator_keys")
    op.drop_index("uq_annotator_keys_key_hash", table_name="annotator_keys")
    op.drop_table("annotator_keys")
