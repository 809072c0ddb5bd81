"""Initial schema: worlds, rollouts and tags, steps and their decode traces, annotators, ratings and skips, curricula, training runs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _id() -> sa.Column:
    return sa.Column("id", sa.Integer(), primary_key=True)


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "world",
        _id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        _created_at(),
        sa.UniqueConstraint("name", "version", name="uq_world_name_version"),
    )
    op.create_table(
        "rollout",
        _id(),
        sa.Column("world_id", sa.Integer(), sa.ForeignKey("world.id"), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("parent_rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), nullable=True),
        sa.Column("parent_step_index", sa.Integer(), nullable=True),
        _created_at(),
        sa.CheckConstraint("status IN ('pending', 'accepted', 'rejected')", name="ck_rollout_status"),
    )
    op.create_index("ix_rollout_created", "rollout", ["created_at"])
    op.create_index("ix_rollout_world_created", "rollout", ["world_id", "created_at"])
    op.create_index("ix_rollout_status_created", "rollout", ["status", "created_at"])
    op.create_table(
        "rollout_tag",
        sa.Column("rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), primary_key=True),
        sa.Column("tag", sa.String(), primary_key=True),
    )
    op.create_index("ix_rollout_tag_tag", "rollout_tag", ["tag"])
    op.create_table(
        "step",
        _id(),
        sa.Column("rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("call", sa.JSON(), nullable=False),
        sa.Column("response", sa.String(), nullable=False),
        sa.Column("made_by", sa.JSON(), nullable=False),
        sa.Column("check_report", sa.JSON(), nullable=True),
        sa.Column("check_ok", sa.Boolean(), nullable=True),
        sa.Column("copied_from_step_id", sa.Integer(), sa.ForeignKey("step.id", name="fk_step_copied_from"),
                  nullable=True),
        sa.Column("rating_count", sa.Integer(), nullable=False),
        _created_at(),
        sa.UniqueConstraint("rollout_id", "index", name="uq_step_rollout_index"),
    )
    op.create_index("ix_step_queue", "step", ["rating_count", "created_at"],
                    sqlite_where=sa.text("copied_from_step_id IS NULL"))
    op.create_index("ix_step_rollout_check", "step", ["rollout_id", "check_ok"])
    op.create_table(
        "step_trace",
        sa.Column("step_id", sa.Integer(), sa.ForeignKey("step.id"), primary_key=True),
        sa.Column("trace", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "annotator",
        _id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        _created_at(),
        sa.UniqueConstraint("name", name="uq_annotator_name"),
        sa.CheckConstraint("source IN ('local', 'hf', 'auth')", name="ck_annotator_source"),
    )
    op.create_table(
        "rating",
        _id(),
        sa.Column("step_id", sa.Integer(), sa.ForeignKey("step.id"), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotator.id"), nullable=False),
        sa.Column("realism", sa.Integer(), nullable=False),
        sa.Column("outcome_correctness", sa.Integer(), nullable=False),
        sa.Column("training_utility", sa.Integer(), nullable=False),
        sa.Column("failure_tags", sa.JSON(), nullable=False),
        sa.Column("note", sa.String(), nullable=False),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("annotator_id", "step_id", name="uq_rating_annotator_step"),
        sa.CheckConstraint("realism BETWEEN 1 AND 5", name="ck_rating_realism"),
        sa.CheckConstraint("outcome_correctness BETWEEN 1 AND 5", name="ck_rating_outcome_correctness"),
        sa.CheckConstraint("training_utility BETWEEN 1 AND 5", name="ck_rating_training_utility"),
    )
    op.create_index("ix_rating_step", "rating", ["step_id"])
    op.create_table(
        "skip",
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotator.id"), primary_key=True),
        sa.Column("step_id", sa.Integer(), sa.ForeignKey("step.id"), primary_key=True),
        _created_at(),
    )
    op.create_table(
        "curriculum",
        _id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        _created_at(),
        sa.UniqueConstraint("name", "version", name="uq_curriculum_name_version"),
    )
    op.create_table(
        "curriculum_rollout",
        sa.Column("curriculum_id", sa.Integer(), sa.ForeignKey("curriculum.id"), primary_key=True),
        sa.Column("rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False),
    )
    op.create_table(
        "training_run",
        _id(),
        sa.Column("curriculum_id", sa.Integer(), sa.ForeignKey("curriculum.id"), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("log_path", sa.String(), nullable=True),
        sa.Column("error", sa.String(), nullable=False),
        _created_at(),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'finished', 'failed', 'cancelled')",
                           name="ck_training_run_status"),
    )
    op.create_index("ix_training_run_curriculum", "training_run", ["curriculum_id"])
    op.create_table(
        "run_metric",
        _id(),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("training_run.id"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
    )
    op.create_index("ix_run_metric_run_name_step", "run_metric", ["run_id", "name", "step"])


def downgrade() -> None:
    for table in ("run_metric", "training_run", "curriculum_rollout", "curriculum", "skip", "rating", "annotator",
                  "step_trace", "step", "rollout_tag", "rollout", "world"):
        op.drop_table(table)
