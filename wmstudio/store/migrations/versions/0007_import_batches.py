"""Dataset imports commit in short batches: their record says whether the import finished.

Revision ID: 0007
Revises: 0006

An import of thousands of rollouts held the write lock for its whole length, so the running studio's saves failed
with "database is locked". Now it writes a batch at a time, its record listing the rollouts made so far; an import
cut short is `finished = false` and importing the same file again goes on from where it stopped. Earlier records
were written whole: finished."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dataset_import") as batch:
        batch.add_column(sa.Column("finished", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("dataset_import") as batch:
        batch.drop_column("finished")
