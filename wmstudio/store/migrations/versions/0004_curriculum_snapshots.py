"""Curriculum versions keep the rollouts as they were saved: a JSON snapshot per member rollout.

Revision ID: 0004
Revises: 0003

A version is what a model is trained on, so later edits to its rollouts (a step appended, a response edited)
must not change what it exports. Versions saved before this revision get a snapshot of their rollouts as they
are when the database is upgraded: the best that can be known about them."""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("curriculum_rollout") as batch:
        batch.add_column(sa.Column("snapshot", sa.Text(), nullable=True))
    connection = op.get_bind()
    members = connection.execute(sa.text("SELECT curriculum_id, rollout_id FROM curriculum_rollout")).fetchall()
    for curriculum_id, rollout_id in members:
        connection.execute(sa.text("UPDATE curriculum_rollout SET snapshot = :snapshot WHERE curriculum_id = :c "
                                   "AND rollout_id = :r"),
                           {"snapshot": json.dumps(_snapshot(connection, rollout_id)), "c": curriculum_id,
                            "r": rollout_id})


def downgrade() -> None:
    with op.batch_alter_table("curriculum_rollout") as batch:
        batch.drop_column("snapshot")


def _snapshot(connection, rollout_id: int) -> dict:
    world_id, title, status = connection.execute(
        sa.text("SELECT world_id, title, status FROM rollout WHERE id = :r"), {"r": rollout_id}).one()
    tags = [t for (t,) in connection.execute(sa.text("SELECT tag FROM rollout_tag WHERE rollout_id = :r ORDER BY tag"),
                                             {"r": rollout_id})]
    steps = connection.execute(sa.text('SELECT call, response, check_report, made_by FROM step WHERE rollout_id = :r '
                                       'ORDER BY "index"'), {"r": rollout_id}).fetchall()
    return {"world_id": world_id, "title": title, "status": status, "tags": tags,
            "steps": [{"call": _json(call), "response": response, "check_report": _json(report),
                       "made_by": _json(made_by)} for call, response, report, made_by in steps]}


def _json(value):
    return json.loads(value) if isinstance(value, str) else value
