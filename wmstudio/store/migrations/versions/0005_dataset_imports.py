"""Dataset imports are recorded by the SHA-256 of the imported file, with the rollouts they made.

Revision ID: 0005
Revises: 0004

An import writes all its rollouts and this record in one transaction: a crash leaves nothing, and the same file
imported again (a retry after a crash or a lost reply) finds its record and returns the rollouts it already made."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_import",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("rollout_ids", sa.JSON(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("fingerprint", name="uq_dataset_import_fingerprint"),
    )


def downgrade() -> None:
    op.drop_table("dataset_import")
