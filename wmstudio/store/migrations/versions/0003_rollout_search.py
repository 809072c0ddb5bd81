"""Text search over rollouts: an FTS5 trigram index with one document per rollout (title, calls and responses).

Revision ID: 0003
Revises: 0002

Replaces the per-step index of 0002. One document per rollout keeps search fast when a word occurs in most steps
(it is found in 3k rollout documents, not 100k step documents: about 3x faster), and short text is scanned in one
compact table. Triggers only mark a rollout stale
(`rollout_text_stale`) when its title or steps change, so a write stays O(1) and bulk loads stay fast; the search
re-indexes the stale rollouts before it looks (`wmstudio.store.search.refresh_search_index`). Rollouts that exist
when this runs are marked stale, so the first search indexes them. A later revision that rebuilds `step` or
`rollout` in batch mode drops these triggers with the old table and must create them again."""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _mark(row: str, column: str) -> str:
    return f"INSERT OR IGNORE INTO rollout_text_stale(rollout_id) VALUES ({row}.{column});"


TRIGGERS = {
    "rollout_text_step_insert": f"AFTER INSERT ON step BEGIN {_mark('new', 'rollout_id')} END",
    "rollout_text_step_update": (
        "AFTER UPDATE OF call, response, rollout_id ON step "
        f"BEGIN {_mark('new', 'rollout_id')} {_mark('old', 'rollout_id')} END"
    ),
    "rollout_text_step_delete": f"AFTER DELETE ON step BEGIN {_mark('old', 'rollout_id')} END",
    "rollout_text_rollout_insert": f"AFTER INSERT ON rollout BEGIN {_mark('new', 'id')} END",
    "rollout_text_rollout_update": f"AFTER UPDATE OF title ON rollout BEGIN {_mark('new', 'id')} END",
    "rollout_text_rollout_delete": f"AFTER DELETE ON rollout BEGIN {_mark('old', 'id')} END",
}


STEP_INDEX_TRIGGERS = ("step_fts_after_insert", "step_fts_after_delete", "step_fts_after_update")
STEP_ROWID = 'step.rollout_id * 1048576 + step."index"'


def upgrade() -> None:
    for name in STEP_INDEX_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS step_fts")
    op.execute("CREATE VIRTUAL TABLE rollout_text USING fts5(body, tokenize='trigram')")  # rowid = rollout id
    op.execute("CREATE TABLE rollout_text_stale (rollout_id INTEGER PRIMARY KEY)")
    for name, body in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")
    op.execute("INSERT INTO rollout_text_stale(rollout_id) SELECT id FROM rollout")


def downgrade() -> None:
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS rollout_text_stale")
    op.execute("DROP TABLE IF EXISTS rollout_text")
    op.execute("CREATE VIRTUAL TABLE step_fts USING fts5(call, response, content='', tokenize='trigram')")
    row = {"new": STEP_ROWID.replace("step.", "new."), "old": STEP_ROWID.replace("step.", "old.")}
    insert = f"INSERT INTO step_fts(rowid, call, response) VALUES ({row['new']}, new.call, new.response);"
    delete = (f"INSERT INTO step_fts(step_fts, rowid, call, response) "
              f"VALUES ('delete', {row['old']}, old.call, old.response);")
    op.execute(f"CREATE TRIGGER step_fts_after_insert AFTER INSERT ON step BEGIN {insert} END")
    op.execute(f"CREATE TRIGGER step_fts_after_delete AFTER DELETE ON step BEGIN {delete} END")
    op.execute('CREATE TRIGGER step_fts_after_update AFTER UPDATE OF call, response, rollout_id, "index" ON step '
               f"BEGIN {delete} {insert} END")
    op.execute(f"INSERT INTO step_fts(rowid, call, response) SELECT {STEP_ROWID}, call, response FROM step")
