"""Full-text search over steps: an FTS5 trigram index of each step's call and response, kept by triggers.

Revision ID: 0002
Revises: 0001

Substring search ("refund_id", "café") then walks an index instead of reading every response. The index is
contentless (the text stays only in `step`) and its rowid is `rollout_id * 2**20 + index`, so a match names
its rollout without a lookup: a word found in most steps still answers in tens of milliseconds. Steps that
exist when this runs are indexed at once. Replaced by the per-rollout index of revision 0003."""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ROWID = '{row}.rollout_id * 1048576 + {row}."index"'  # 1048576 = 2**20 steps per rollout at most
INSERT = f"INSERT INTO step_fts(rowid, call, response) VALUES ({ROWID.format(row='new')}, new.call, new.response);"
DELETE = (f"INSERT INTO step_fts(step_fts, rowid, call, response) "
          f"VALUES ('delete', {ROWID.format(row='old')}, old.call, old.response);")
TRIGGERS = {
    "step_fts_after_insert": f"CREATE TRIGGER step_fts_after_insert AFTER INSERT ON step BEGIN {INSERT} END",
    "step_fts_after_delete": f"CREATE TRIGGER step_fts_after_delete AFTER DELETE ON step BEGIN {DELETE} END",
    "step_fts_after_update": (
        'CREATE TRIGGER step_fts_after_update AFTER UPDATE OF call, response, rollout_id, "index" ON step '
        f"BEGIN {DELETE} {INSERT} END"
    ),
}


def upgrade() -> None:
    op.execute("CREATE VIRTUAL TABLE step_fts USING fts5(call, response, content='', tokenize='trigram')")
    for sql in TRIGGERS.values():
        op.execute(sql)
    op.execute(f"INSERT INTO step_fts(rowid, call, response) SELECT {ROWID.format(row='step')}, call, response FROM step")


def downgrade() -> None:
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS step_fts")
