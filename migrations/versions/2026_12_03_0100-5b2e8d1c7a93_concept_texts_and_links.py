"""Concept texts and links, and projects whose pool features sporal computes from them.

Revision ID: 5b2e8d1c7a93
Revises: 88cf5d20d67e
Create Date: 2026-12-03 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5b2e8d1c7a93"
down_revision: str | None = "88cf5d20d67e"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str, **kwargs: object) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False, **kwargs)


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("features_computed", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("corpus_version", sa.Integer(), nullable=False,
                                   server_default=sa.text("0")))
    op.create_table(
        "concept_texts",
        _fk("concept_id", "concepts", primary_key=True),
        _fk("project_id", "projects"),
        sa.Column("text", sa.Text(), nullable=False),
    )
    op.create_index("ix_concept_texts_project_id", "concept_texts", ["project_id"])
    op.create_table(
        "concept_links",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("source_id", "concepts"),
        _fk("target_id", "concepts"),
        sa.UniqueConstraint("project_id", "source_id", "target_id",
                            name="uq_concept_links_project_id_source_id_target_id"),
    )


def downgrade() -> None:
    op.drop_table("concept_links")
    op.drop_index("ix_concept_texts_project_id", table_name="concept_texts")
    op.drop_table("concept_texts")
    # altered in place: rebuilding "projects" would drop it, and its rows cascade away
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.drop_column("corpus_version")
        batch.drop_column("features_computed")
