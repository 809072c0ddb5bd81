"""Curriculum versions hold scenarios: a world, the agent's task, steering and a success condition in CEL.

Revision ID: 0006
Revises: 0005

Scenarios were code only (the demo curriculum's); stored, their success conditions and steering are edited in
the studio and travel with curriculum exports. Existing curricula get none here: the demo curriculum's are saved
the next time it is asked for."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scenario",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("curriculum_id", sa.Integer(), sa.ForeignKey("curriculum.id"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("split", sa.String(), nullable=False),
        sa.Column("world", sa.Text(), nullable=False),
        sa.Column("task", sa.String(), nullable=False),
        sa.Column("success", sa.Text(), nullable=False),
        sa.Column("target", sa.JSON(), nullable=True),
        sa.Column("feasible", sa.Boolean(), nullable=False),
        sa.Column("steering", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("curriculum_id", "position", name="uq_scenario_curriculum_position"),
        sa.UniqueConstraint("curriculum_id", "key", name="uq_scenario_curriculum_key"),
        sa.CheckConstraint("split IN ('train', 'heldout')", name="ck_scenario_split"),
    )


def downgrade() -> None:
    op.drop_table("scenario")
