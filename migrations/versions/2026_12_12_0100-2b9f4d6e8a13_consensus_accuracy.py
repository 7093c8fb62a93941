"""The accuracies of a ``consensus`` project's last full fit, kept with the project.

``projects.consensus_accuracy``: JSON ``{"as_of": version, "accuracy": [[annotator, p],
...]}`` (``annotator`` null: anonymous), the per-annotator accuracies of the full consensus
stored at project version ``as_of`` (the ``consensus_as_of`` of that fit); null: none kept
(no full fit yet, or one stored before this revision). A process that holds no fit (after a
restart, or a second server) or an older one than ``consensus_as_of`` rebuilds the fit from
them and the answers with one E-step instead of a whole EM
(:func:`reasoning.consensus.rebuild`; ``docs/consensus.md``, "Incremental consensus").
Only the accuracies are kept: a few bytes per annotator, no per-pair data.

The downgrade drops the column: a process without a fit then computes the full consensus
again, as before; nothing is lost (the accuracies are refitted from the answers).

Revision ID: 2b9f4d6e8a13
Revises: 4c8e1a7d2b90
Create Date: 2026-12-12 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "2b9f4d6e8a13"
down_revision: str | None = "4c8e1a7d2b90"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.add_column(sa.Column("consensus_accuracy", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.drop_column("consensus_accuracy")
