"""Bulk imports: many rollouts with their steps and worlds, once per file content, in short write transactions.

Every rollout is checked before anything is written. Then the import writes a batch at a time (about
BATCH_SECONDS of writing each, a pause between them), so the studio's own saves are never kept waiting longer
than that: one transaction for 5,000 rollouts once held the lock long enough for the studio's saves to fail with
"database is locked". The import's record (the file's fingerprint) lists the rollouts written so far in the same
transaction as each batch: a crash (or SIGKILL) leaves whole batches and a record saying so, and importing the
same content again goes on from where it stopped; once finished, it returns the rollouts the first import made
instead of copies."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store.database import Store
from wmstudio.store.provenance import MadeBy
from wmstudio.store.rollouts import _status, _step_fields, _tags, _title
from wmstudio.store.tables import DatasetImport, Rollout, RolloutTag, Step
from wmstudio.store.worlds import world_version_in
from wmstudio.world.spec import Call, WorldSpec

BATCH_SECONDS = 0.25  # of writing per transaction: the longest the studio's own saves wait on an import
BATCH_PAUSE_S = 0.12  # between batches: longer than SQLite's longest busy-wait sleep (100 ms), so a waiting write gets in


@dataclass
class NewStep:
    """One step to import: the call, the response text, how it was made and its check report (if any)."""

    call: Call
    response: str
    made_by: MadeBy
    check_report: dict[str, Any] | None = None


@dataclass
class NewRollout:
    """One rollout to import into (a new version of) `world`, with its steps in order."""

    world: WorldSpec
    steps: list[NewStep]
    title: str = ""
    status: str = "pending"
    tags: list[str] = field(default_factory=list)


@dataclass
class Imported:
    """The rollouts an import made (or made before, when `repeated`) and how many steps they hold."""

    rollout_ids: list[int]
    steps: int
    repeated: bool = False


def import_rollouts(store: Store, rollouts: Sequence[NewRollout], fingerprint: str) -> Imported:
    """Write `rollouts` (worlds saved as versions, steps, tags, status) under the `fingerprint` of their source, in
    batches; when that fingerprint was imported before, write nothing and return what that import made (or finish
    it, when it was cut short)."""
    if not isinstance(fingerprint, str) or not fingerprint:
        raise InvalidInput(Problem("fingerprint", "give the SHA-256 of the imported content"))
    rows = [_checked(rollout, f"rollouts[{i}]") for i, rollout in enumerate(rollouts)]
    total = sum(len(steps) for *_, steps in rows)
    with store.write() as session:
        record = session.exec(select(DatasetImport).where(DatasetImport.fingerprint == fingerprint)).first()
        if record is not None and record.finished:
            return Imported(list(record.rollout_ids), record.steps, repeated=True)
        if record is None:
            record = DatasetImport(fingerprint=fingerprint, rollout_ids=[], steps=total, finished=False)
            session.add(record)
            session.flush()
        record_id, created = record.id, list(record.rollout_ids)  # a cut-short import goes on after its last batch
    worlds: dict[str, int] = {}
    while len(created) < len(rollouts):
        if created and BATCH_PAUSE_S:
            time.sleep(BATCH_PAUSE_S)  # the studio's writes waiting on the lock go first
        started = time.monotonic()
        with store.write() as session:
            while len(created) < len(rollouts) and (time.monotonic() - started < BATCH_SECONDS or not created):
                created.append(_write_rollout(session, rollouts[len(created)], rows[len(created)], worlds))
            record = session.get(DatasetImport, record_id)
            record.rollout_ids = list(created)
            session.add(record)
    with store.write() as session:
        record = session.get(DatasetImport, record_id)
        record.finished = True
        session.add(record)
    return Imported(created, total)


def _write_rollout(session: Session, rollout: NewRollout, row: tuple[str, str, list[str], list[dict[str, Any]]],
                   worlds: dict[str, int]) -> int:
    """Add one checked rollout (its world saved once per text) in the caller's write session; its id."""
    title, status, tags, steps = row
    text = rollout.world.dumps()
    if text not in worlds:
        worlds[text] = world_version_in(session, rollout.world).id
    made = Rollout(world_id=worlds[text], title=title, status=status)
    session.add(made)
    session.flush()
    session.add_all(RolloutTag(rollout_id=made.id, tag=tag) for tag in tags)
    session.add_all(Step(rollout_id=made.id, index=index, **fields) for index, fields in enumerate(steps))
    return made.id


def _checked(rollout: Any, path: str) -> tuple[str, str, list[str], list[dict[str, Any]]]:
    """(title, status, tags, step fields) of one rollout, validated before the write lock is taken."""
    if not isinstance(rollout, NewRollout) or not isinstance(rollout.world, WorldSpec):
        raise InvalidInput(Problem(path, "expected a NewRollout with a WorldSpec"))
    try:
        steps = [_step_fields(s.call, s.response, s.made_by, s.check_report) for s in rollout.steps]
        return _title(rollout.title), _status(rollout.status), _tags(rollout.tags), steps
    except InvalidInput as err:
        raise InvalidInput([Problem(f"{path}.{p.path}" if p.path else path, p.message) for p in err.problems]) \
            from None
