"""The rollout text index: one FTS5 trigram document per rollout (title, calls, responses), kept fresh cheaply.

Writes only mark a rollout stale (triggers, revision 0003). A search reads the index for every other rollout and
scans the few stale ones directly, so it is exact at once; the stale rollouts are re-indexed in batches, since
every write to the index can cost a merge of its segments (a few hundred ms on a busy 2-core machine)."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlmodel import Session

from wmstudio.store.database import Store

MIN_INDEXED_QUERY = 3  # the trigram index matches substrings of at least three characters
SEPARATOR = "\x1e"  # char(30) joins the title, calls and responses of a rollout's text; dropped from queries
STALE_BATCH = 32  # re-index when this many rollouts changed; until then they are scanned

REFRESH_SQL = (
    "DELETE FROM rollout_text WHERE rowid IN (SELECT rollout_id FROM rollout_text_stale)",
    (
        "INSERT INTO rollout_text(rowid, body) "
        "SELECT rollout.id, rollout.title || char(30) || "
        "coalesce(group_concat(step.call || char(30) || step.response, char(30)), '') "
        "FROM rollout LEFT JOIN step ON step.rollout_id = rollout.id "
        "WHERE rollout.id IN (SELECT rollout_id FROM rollout_text_stale) GROUP BY rollout.id"
    ),
    "DELETE FROM rollout_text_stale",
)
STALE_SCAN_SQL = (
    "SELECT rollout.id FROM rollout WHERE rollout.id IN (SELECT value FROM json_each(:stale)) AND ("
    "rollout.title LIKE :pattern ESCAPE '\\' OR EXISTS (SELECT 1 FROM step WHERE step.rollout_id = rollout.id "
    "AND (step.call LIKE :pattern ESCAPE '\\' OR step.response LIKE :pattern ESCAPE '\\')))"
)


def refresh_search_index(store: Store, min_stale: int = 1) -> int:
    """Index the text of rollouts changed since they were last indexed, if at least `min_stale` did; returns how many.

    Call it after a bulk load (the first search would otherwise pay for it); searches call it with a batch size."""
    with store.read() as session:
        stale = session.execute(sa.text("SELECT count(*) FROM rollout_text_stale")).scalar_one()
    if stale < max(1, min_stale):
        return 0
    with store.write() as session:
        for sql in REFRESH_SQL:
            session.execute(sa.text(sql))
    return stale


def rollouts_containing(session: Session, text: str) -> list[int]:
    """Ids of rollouts whose title, or some step's call or response, contains `text` (ignoring ASCII case).

    Text of three characters or more is looked up in the trigram index; shorter text scans the indexed texts."""
    text = text.replace(SEPARATOR, "")
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    if len(text) >= MIN_INDEXED_QUERY:
        phrase = '"' + text.replace('"', '""') + '"'
        indexed = sa.text("SELECT rowid FROM rollout_text WHERE rollout_text MATCH :query").bindparams(query=phrase)
    else:
        indexed = sa.text("SELECT rowid FROM rollout_text WHERE body LIKE :query ESCAPE '\\'").bindparams(query=pattern)
    stale = set(session.execute(sa.text("SELECT rollout_id FROM rollout_text_stale")).scalars())
    found = {rollout_id for rollout_id in session.execute(indexed).scalars() if rollout_id not in stale}
    if stale:  # their indexed text may be old: read them as they are now
        scan = sa.text(STALE_SCAN_SQL).bindparams(stale=json.dumps(sorted(stale)), pattern=pattern)
        found.update(session.execute(scan).scalars())
    return sorted(found)
