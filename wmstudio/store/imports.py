"""Bulk imports: many rollouts with their steps and worlds written in one transaction, once per file content.

A crash (or SIGKILL) mid-import leaves nothing, since SQLite commits the whole transaction or none of it; the
file's fingerprint is written in that same transaction, so importing the same content again returns the rollouts
the first import made instead of copies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store.database import Store
from wmstudio.store.provenance import MadeBy
from wmstudio.store.rollouts import _status, _step_fields, _tags, _title
from wmstudio.store.tables import DatasetImport, Rollout, RolloutTag, Step
from wmstudio.store.worlds import world_version_in
from wmstudio.world.spec import Call, WorldSpec


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
    """Write `rollouts` (worlds saved as versions, steps, tags, status) and the `fingerprint` of their source in one
    transaction; when that fingerprint was imported before, write nothing and return what that import made."""
    if not isinstance(fingerprint, str) or not fingerprint:
        raise InvalidInput(Problem("fingerprint", "give the SHA-256 of the imported content"))
    rows = [_checked(rollout, f"rollouts[{i}]") for i, rollout in enumerate(rollouts)]
    with store.write() as session:
        earlier = session.exec(select(DatasetImport).where(DatasetImport.fingerprint == fingerprint)).first()
        if earlier is not None:
            return Imported(list(earlier.rollout_ids), earlier.steps, repeated=True)
        worlds: dict[str, int] = {}
        created: list[int] = []
        for rollout, (title, status, tags, steps) in zip(rollouts, rows, strict=True):
            text = rollout.world.dumps()
            if text not in worlds:
                worlds[text] = world_version_in(session, rollout.world).id
            row = Rollout(world_id=worlds[text], title=title, status=status)
            session.add(row)
            session.flush()
            session.add_all(RolloutTag(rollout_id=row.id, tag=tag) for tag in tags)
            session.add_all(Step(rollout_id=row.id, index=index, **fields) for index, fields in enumerate(steps))
            created.append(row.id)
        total = sum(len(steps) for *_, steps in rows)
        session.add(DatasetImport(fingerprint=fingerprint, rollout_ids=created, steps=total))
    return Imported(created, total)


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
