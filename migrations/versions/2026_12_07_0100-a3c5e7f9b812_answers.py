"""Answers: every annotator's answer kept; a policy, a question and a reviewer key per project.

The asserted labels become the answers that asserted them, the refused answers the answers
refused; ``refused_answers`` goes. The downgrade brings it back from the refused answers and
drops what has no place in the older schema (agreeing and contested answers, the policy).

Revision ID: a3c5e7f9b812
Revises: 7d4e1a9c2b60
Create Date: 2026-12-07 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.base import UTCDateTime

revision: str = "a3c5e7f9b812"
down_revision: str | None = "7d4e1a9c2b60"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(column: str, table: str) -> sa.Column:
    return sa.Column(column, sa.Integer(), sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.add_column(sa.Column("policy", sa.String(16), nullable=False,
                                   server_default=sa.text("'strict'")))
        batch.add_column(sa.Column("question", sa.Text(), nullable=True))
        batch.add_column(sa.Column("reviewer_key_hash", sa.String(64), nullable=True))
    op.create_index("uq_projects_reviewer_key_hash", "projects", ["reviewer_key_hash"],
                    unique=True)
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer(), primary_key=True),
        _fk("project_id", "projects"),
        _fk("a_id", "concepts"),
        _fk("b_id", "concepts"),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("annotator", sa.String(512), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("check_question", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("label_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("retracted_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_answers_project_id_id", "answers", ["project_id", "id"])
    op.create_index("ix_answers_project_id_annotator", "answers", ["project_id", "annotator"])
    op.create_index("ix_answers_project_id_pair", "answers", ["project_id", "a_id", "b_id"])
    # every label and refused answer, in the order given (labels first by time, then refusals:
    # an answer's id is its place in time where both are known)
    op.execute("""
        INSERT INTO answers (project_id, a_id, b_id, positive, annotator, role, source, outcome,
                             check_question, label_id, created_at, retracted_at)
        SELECT project_id, a_id, b_id, positive, annotator, role, source, outcome, ck,
               label_id, created_at, retracted_at FROM (
          SELECT project_id, a_id, b_id, positive, annotator, 'annotator' AS role,
                 'api' AS source, 'asserted' AS outcome, FALSE AS ck, id AS label_id,
                 created_at, retracted_at, 0 AS kind, id AS ord
          FROM asserted_labels
          UNION ALL
          SELECT project_id, a_id, b_id, positive, annotator, 'annotator', 'api', 'refused',
                 FALSE, NULL, created_at, NULL, 1, id
          FROM refused_answers) everything
        ORDER BY created_at, kind, ord
    """)
    op.drop_index("ix_refused_answers_project_id_annotator", table_name="refused_answers")
    op.drop_table("refused_answers")


def downgrade() -> None:
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
    op.execute("""
        INSERT INTO refused_answers (project_id, a_id, b_id, positive, annotator, created_at)
        SELECT project_id, a_id, b_id, positive, annotator, created_at FROM answers
        WHERE outcome = 'refused' ORDER BY id
    """)
    op.drop_index("ix_answers_project_id_pair", table_name="answers")
    op.drop_index("ix_answers_project_id_annotator", table_name="answers")
    op.drop_index("ix_answers_project_id_id", table_name="answers")
    op.drop_table("answers")
    op.drop_index("uq_projects_reviewer_key_hash", table_name="projects")
    # altered in place: rebuilding "projects" would drop it, and its rows cascade away
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.drop_column("reviewer_key_hash")
        batch.drop_column("question")
        batch.drop_column("policy")
