"""The model's probability of each new pair ``next`` served, kept with its suggestion.

``suggestions.p_positive``: for a new pair the strategy chose with a model, that model's
P(positive) of it then, before any answer on it. An answer's probability of being wrong reads
it (the model term of the team's second opinions and of ``GET quality``); it was kept in each
process's memory, so that a restart, or another server, read the answers without it.
``ix_suggestions_pair_id``: an answered pair's probability is looked up by its pool pair.

The downgrade drops the index and the column (altered in place): the probabilities are
forgotten, as the older schema never kept them.

Revision ID: 6a1c3e5b7d92
Revises: 9d6b2e4f7a15
Create Date: 2026-12-11 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6a1c3e5b7d92"
down_revision: str | None = "9d6b2e4f7a15"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("suggestions", recreate="never") as batch:
        batch.add_column(sa.Column("p_positive", sa.Float(), nullable=True))
    op.create_index("ix_suggestions_pair_id", "suggestions", ["pair_id"])


def downgrade() -> None:
    op.drop_index("ix_suggestions_pair_id", table_name="suggestions")
    with op.batch_alter_table("suggestions", recreate="never") as batch:
        batch.drop_column("p_positive")
