"""Curricula: named, versioned sets of rollouts to train on; each change of the set is saved as a new version.

A training run names the exact version it used, so a result can always be traced to its rollouts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlmodel import select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import is_whole
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.scenarios import NewScenario, add_scenarios, carry_scenarios, check_scenarios
from wmstudio.store.tables import Curriculum, CurriculumRollout, CurriculumScenario, Rollout, RolloutTag, Step

MAX_NAME_CHARS = 100


@dataclass
class CurriculumSummary:
    """A curriculum version and how many rollouts and scenarios it holds."""

    curriculum: Curriculum
    rollout_count: int
    scenario_count: int = 0


def create_curriculum_version(store: Store, name: str, rollout_ids: Sequence[int], description: str = "",
                              accepted_only: bool = True,
                              scenarios: Sequence[NewScenario] | None = None) -> Curriculum:
    """Save the next version of curriculum `name` holding these rollouts (in this order, duplicates dropped).

    By default every rollout must be accepted: a curriculum is what the model is trained on. The new version holds
    `scenarios` when given (saved in the same transaction), else the scenarios of the version before; with
    scenarios it may hold no rollout."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(Problem("name", "give the curriculum a name"))
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInput(Problem("name", f"is {len(name)} characters; keep it under {MAX_NAME_CHARS}"))
    if not isinstance(description, str):
        raise InvalidInput(Problem("description", "must be text"))
    ids = list(dict.fromkeys(rollout_ids))
    bad = [i for i, rid in enumerate(ids) if not is_whole(rid)]
    if bad:
        raise InvalidInput(Problem(f"rollout_ids[{bad[0]}]", f"must be a rollout id (a whole number), got {ids[bad[0]]!r}"))
    if not ids and not scenarios:  # a version of scenarios alone trains as well (the built-in curricula are such)
        raise InvalidInput(Problem("rollout_ids", "pick at least one rollout for the curriculum"))
    if scenarios is not None:
        check_scenarios(scenarios)
    with store.write() as session:
        found = dict(session.exec(select(Rollout.id, Rollout.status).where(Rollout.id.in_(ids))).all())
        missing = [rid for rid in ids if rid not in found]
        if missing:
            raise InvalidInput(Problem("rollout_ids", f"no rollouts with ids {_listed(missing)}: remove them"))
        if accepted_only:
            unaccepted = [rid for rid in ids if found[rid] != "accepted"]
            if unaccepted:
                raise InvalidInput(Problem("rollout_ids", f"rollouts {_listed(unaccepted)} are not accepted: "
                                                          "accept them first, or leave them out"))
        latest = session.exec(select(Curriculum).where(Curriculum.name == name)
                              .order_by(Curriculum.version.desc()).limit(1)).first()
        curriculum = Curriculum(name=name, version=(latest.version if latest else 0) + 1,
                                description=description.strip())
        session.add(curriculum)
        session.flush()
        if scenarios is not None:
            add_scenarios(session, curriculum.id, scenarios)
        elif latest is not None:
            carry_scenarios(session, latest.id, curriculum.id)
        session.add_all(CurriculumRollout(curriculum_id=curriculum.id, rollout_id=rid, position=position,
                                          snapshot=json.dumps(_snapshot(session, rid), ensure_ascii=False))
                        for position, rid in enumerate(ids))
        return curriculum


def ensure_curriculum(store: Store, name: str, description: str) -> Curriculum:
    """The latest version of curriculum `name`, created empty (version 1, this description) when there is none.

    For built-in curricula whose episodes come from code, not rollouts (the GRPO demo): runs still need a row."""
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME_CHARS:
        raise InvalidInput(Problem("name", f"give the curriculum a name of 1 to {MAX_NAME_CHARS} characters"))
    with store.write() as session:  # under the write lock: two processes asking at once create it once
        found = session.exec(select(Curriculum).where(Curriculum.name == name.strip())
                             .order_by(Curriculum.version.desc()).limit(1)).first()
        if found is None:
            found = Curriculum(name=name.strip(), version=1, description=description)
            session.add(found)
            session.flush()
        return found


def list_curricula(store: Store) -> list[CurriculumSummary]:
    """Every curriculum version: by name, newest version first."""
    members = (
        select(CurriculumRollout.curriculum_id, sa.func.count().label("n"))
        .group_by(CurriculumRollout.curriculum_id)
        .subquery()
    )
    scenarios = (
        select(CurriculumScenario.curriculum_id, sa.func.count().label("n"))
        .group_by(CurriculumScenario.curriculum_id)
        .subquery()
    )
    query = (
        select(Curriculum, sa.func.coalesce(members.c.n, 0), sa.func.coalesce(scenarios.c.n, 0))
        .outerjoin(members, members.c.curriculum_id == Curriculum.id)
        .outerjoin(scenarios, scenarios.c.curriculum_id == Curriculum.id)
        .order_by(Curriculum.name, Curriculum.version.desc())
    )
    with store.read() as session:
        return [CurriculumSummary(curriculum=row, rollout_count=n, scenario_count=m)
                for row, n, m in session.exec(query)]


def get_curriculum(store: Store, name: str, version: int | None = None) -> Curriculum:
    """A curriculum by name, the latest version unless `version` is given; InvalidInput when it does not exist."""
    query = select(Curriculum).where(Curriculum.name == name)
    query = query.where(Curriculum.version == version) if version is not None else query
    with store.read() as session:
        found = session.exec(query.order_by(Curriculum.version.desc()).limit(1)).first()
    if found is None:
        which = f"{name!r} version {version}" if version is not None else repr(name)
        raise InvalidInput(Problem("curriculum", f"no curriculum {which}: create it from rollouts first"))
    return found


def curriculum_rollouts(store: Store, curriculum_id: int) -> list[Rollout]:
    """The rollouts of a curriculum version, in the order they were given."""
    with store.read() as session:
        fetch_row(session, Curriculum, curriculum_id, "curriculum_id")
        return list(session.exec(
            select(Rollout)
            .join(CurriculumRollout, CurriculumRollout.rollout_id == Rollout.id)
            .where(CurriculumRollout.curriculum_id == curriculum_id)
            .order_by(CurriculumRollout.position)
        ))


@dataclass
class RolloutSnapshot:
    """A rollout as a curriculum version saved it: its id, world version, title, status, tags and steps
    (`{"call", "response", "check_report", "made_by"}` each), whatever happened to the rollout since."""

    rollout_id: int
    world_id: int
    title: str
    status: str
    tags: list[str]
    steps: list[dict]


def curriculum_snapshots(store: Store, curriculum_id: int) -> list[RolloutSnapshot]:
    """The rollouts of a curriculum version as they were when it was saved, in order (what it exports)."""
    with store.read() as session:
        fetch_row(session, Curriculum, curriculum_id, "curriculum_id")
        members = session.exec(select(CurriculumRollout).where(CurriculumRollout.curriculum_id == curriculum_id)
                               .order_by(CurriculumRollout.position)).all()
        found = []
        for member in members:
            data = json.loads(member.snapshot) if member.snapshot else _snapshot(session, member.rollout_id)
            found.append(RolloutSnapshot(member.rollout_id, data["world_id"], data["title"], data["status"],
                                         data["tags"], data["steps"]))
        return found


def _snapshot(session, rollout_id: int) -> dict:
    """A rollout's world version, title, status, tags and steps as plain JSON."""
    rollout = session.get(Rollout, rollout_id)
    tags = sorted(session.exec(select(RolloutTag.tag).where(RolloutTag.rollout_id == rollout_id)).all())
    steps = session.exec(select(Step).where(Step.rollout_id == rollout_id).order_by(Step.index)).all()
    return {"world_id": rollout.world_id, "title": rollout.title, "status": rollout.status, "tags": list(tags),
            "steps": [{"call": s.call, "response": s.response, "check_report": s.check_report,
                       "made_by": s.made_by} for s in steps]}


def _listed(ids: list[int], most: int = 10) -> str:
    shown = ", ".join(str(i) for i in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")
