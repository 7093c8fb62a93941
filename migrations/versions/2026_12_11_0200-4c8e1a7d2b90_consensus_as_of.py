"""How current a ``consensus`` project's labels are: the last full fit and the pending pairs.

``projects.consensus_as_of``: the project version of the last full consensus (null: none
yet, or ``strict``); ``projects.consensus_pending``: the pairs repaired locally since, as a
JSON list of ``[a_id, b_id]`` (null: none), each waiting for the background refit
(``docs/consensus.md``, "Incremental consensus"). The downgrade drops both columns: every
contested answer takes the full path again, nothing is lost (the refit recomputes the labels
from the answers).

Revision ID: 4c8e1a7d2b90
Revises: 6a1c3e5b7d92
Create Date: 2026-12-11 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4c8e1a7d2b90"
down_revision: str | None = "6a1c3e5b7d92"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.add_column(sa.Column("consensus_as_of", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("consensus_pending", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects", recreate="never") as batch:
        batch.drop_column("consensus_pending")
        batch.drop_column("consensus_as_of")
