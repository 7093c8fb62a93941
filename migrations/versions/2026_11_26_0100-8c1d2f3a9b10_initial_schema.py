"""Initial schema: projects, concepts, pool, asserted labels, closure, suggestions, leases, keys.

Revision ID: 8c1d2f3a9b10
Revises:
Create Date: 2026-11-26 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "8c1d2f3a9b10"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("retraction_version", sa.Integer(), nullable=False),
        sa.Column("feature_length", sa.Integer(), nullable=True),
        sa.Column("api_key_hash", sa.String(64), nullable=True),
        sa.Column("prediction_model", sa.String(64), nullable=False),
        sa.UniqueConstraint("api_key_hash"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "concepts",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.UniqueConstraint("project_id", "name"),
    )
    op.create_table(
        "pool_pairs",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("features", sa.LargeBinary(), nullable=False),
        sa.UniqueConstraint("project_id", "a_id", "b_id"),
    )
    op.create_table(
        "asserted_labels",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("retracted_at", UTCDateTime(), nullable=True),
        sa.Column("retracted_version", sa.Integer(), nullable=True),
    )
    op.create_index(
        "uq_asserted_labels_live_pair", "asserted_labels", ["project_id", "a_id", "b_id"],
        unique=True,
        sqlite_where=sa.text("retracted_at IS NULL"),
        postgresql_where=sa.text("retracted_at IS NULL"),
    )
    op.create_index("ix_asserted_labels_project_id_version", "asserted_labels",
                    ["project_id", "version"])
    op.create_table(
        "closure_pairs",
        sa.Column("project_id", sa.Integer(), sa.ForeignKey("projects.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("a_id", sa.Integer(), sa.ForeignKey("concepts.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("b_id", sa.Integer(), sa.ForeignKey("concepts.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("asserted", sa.Boolean(), nullable=False),
        sa.Column("label_id", sa.Integer(),
                  sa.ForeignKey("asserted_labels.id", ondelete="CASCADE"), nullable=True),
        _fk("caused_by", "asserted_labels"),
    )
    op.create_index("ix_closure_pairs_project_id_caused_by", "closure_pairs",
                    ["project_id", "caused_by"])
    op.create_table(
        "suggestions",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("pair_id", "pool_pairs"),
        sa.Column("strategy", sa.String(16), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("gain_positive", sa.Float(), nullable=True),
        sa.Column("gain_negative", sa.Float(), nullable=True),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_suggestions_project_id_created_at", "suggestions",
                    ["project_id", "created_at"])
    op.create_table(
        "reservations",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("pair_id", "pool_pairs"),
        sa.Column("annotator", sa.String(512), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("pair_id"),
    )
    op.create_index("ix_reservations_project_id_expires_at", "reservations",
                    ["project_id", "expires_at"])
    op.create_table(
        "idempotency_records",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response_body", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("project_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("idempotency_records")
    op.drop_index("ix_reservations_project_id_expires_at", table_name="reservations")
    op.drop_table("reservations")
    op.drop_index("ix_suggestions_project_id_created_at", table_name="suggestions")
    op.drop_table("suggestions")
    op.drop_index("ix_closure_pairs_project_id_caused_by", table_name="closure_pairs")
    op.drop_table("closure_pairs")
    op.drop_index("ix_asserted_labels_project_id_version", table_name="asserted_labels")
    op.drop_index("uq_asserted_labels_live_pair", table_name="asserted_labels")
    op.drop_table("asserted_labels")
    op.drop_table("pool_pairs")
    op.drop_table("concepts")
    op.drop_table("projects")
