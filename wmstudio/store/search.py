"""Finding rollouts: filter by world, status, tag, text in calls/responses and check verdicts, newest first, paged.

Text search goes through the rollout text index (`text_index.py`). Each page comes with the total and the count
per status, so the UI can show both without a second call."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.store.database import Store
from wmstudio.store.tables import ROLLOUT_STATUSES, Rollout, RolloutTag, Step, World
from wmstudio.store.text_index import (
    STALE_BATCH,
    refresh_search_index,
    rollouts_containing,
)

MAX_PAGE_SIZE = 200


@dataclass
class RolloutSummary:
    """What a list of rollouts shows: the rollout, its world, tags, and how many steps failed their checks."""

    id: int
    world_id: int
    world_name: str
    world_version: int
    title: str
    status: str
    tags: list[str]
    parent_rollout_id: int | None
    parent_step_index: int | None
    created_at: datetime
    step_count: int
    failed_steps: int


@dataclass
class RolloutPage:
    """One page of matching rollouts (newest first), the number matching in all, and per status."""

    items: list[RolloutSummary]
    total: int
    page: int
    page_size: int
    status_counts: dict[str, int] = field(default_factory=dict)  # every status -> matches (status filter aside)

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.page_size))


def filter_rollouts(
    store: Store,
    *,
    world: str | None = None,
    world_id: int | None = None,
    status: str | None = None,
    tag: str | None = None,
    text: str | None = None,
    check_ok: bool | None = None,
    page: int = 1,
    page_size: int = 20,
) -> RolloutPage:
    """Rollouts matching every given filter, newest first: `world` (a name, any version) or `world_id` (one
    version), `status`, `tag`, `text` (in a step's call or response, or the title, ignoring case) and
    `check_ok` (True: every step was checked and passed; False: some step failed; unchecked steps are in
    neither). `page` counts from 1."""
    if status is not None and status not in ROLLOUT_STATUSES:
        raise InvalidInput(Problem("status", f"{status!r} is not a status: use {', '.join(ROLLOUT_STATUSES)}"))
    for name, value in (("page", page), ("page_size", page_size)):
        if not whole_in(value, 1):
            raise InvalidInput(Problem(name, f"must be a whole number from 1, got {value!r}"))
    if text is not None and not isinstance(text, str):
        raise InvalidInput(Problem("text", "must be the text to search for"))
    if page_size > MAX_PAGE_SIZE:
        raise InvalidInput(Problem("page_size", f"{page_size} is over {MAX_PAGE_SIZE}: ask for smaller pages"))

    conditions = _conditions(world, world_id, tag, check_ok)
    text = text.strip() if text else ""
    if text:
        refresh_search_index(store, min_stale=STALE_BATCH)
    with store.read() as session:
        if text:  # found once and passed on as a JSON list, so the counts and the page do not search again
            matching = sa.func.json_each(json.dumps(rollouts_containing(session, text))).table_valued("value")
            conditions.append(Rollout.id.in_(select(matching.c.value)))
        counts = dict.fromkeys(ROLLOUT_STATUSES, 0)
        counted = select(Rollout.status, sa.func.count()).where(*conditions).group_by(Rollout.status)
        counts.update({name: n for name, n in session.exec(counted)})
        total = counts[status] if status is not None else sum(counts.values())
        if status is not None:
            conditions.append(Rollout.status == status)
        query = (
            select(Rollout, World.name, World.version)
            .join(World, World.id == Rollout.world_id)
            .where(*conditions)
            .order_by(Rollout.created_at.desc(), Rollout.id.desc())
            .limit(page_size)
            .offset((page - 1) * page_size)
        )
        rows = list(session.exec(query))
        items = _summaries(session, rows)
    return RolloutPage(items=items, total=total, page=page, page_size=page_size, status_counts=counts)


def _conditions(world: str | None, world_id: int | None, tag: str | None,
                check_ok: bool | None) -> list[sa.ColumnElement[bool]]:
    conditions: list[sa.ColumnElement[bool]] = []
    if world is not None:
        conditions.append(Rollout.world_id.in_(select(World.id).where(World.name == world)))
    if world_id is not None:
        conditions.append(Rollout.world_id == world_id)
    if tag is not None:
        tagged = select(RolloutTag.rollout_id).where(RolloutTag.tag == tag.strip())
        conditions.append(Rollout.id.in_(tagged))
    if check_ok is not None:
        if check_ok:  # checked and passed, every step (at least one)
            unverified = sa.exists().where(Step.rollout_id == Rollout.id, Step.check_ok.is_not(True))
            conditions += [sa.exists().where(Step.rollout_id == Rollout.id), sa.not_(unverified)]
        else:
            conditions.append(sa.exists().where(Step.rollout_id == Rollout.id, Step.check_ok.is_(False)))
    return conditions


def _summaries(session: Session, rows: list[tuple[Rollout, str, int]]) -> list[RolloutSummary]:
    """Step counts and tags for one page of rollouts, in two grouped queries."""
    ids = [rollout.id for rollout, _, _ in rows]
    if not ids:
        return []
    counts = {
        rollout_id: (steps, failed or 0)
        for rollout_id, steps, failed in session.exec(
            select(Step.rollout_id, sa.func.count(), sa.func.sum(sa.case((Step.check_ok == sa.false(), 1), else_=0)))
            .where(Step.rollout_id.in_(ids))
            .group_by(Step.rollout_id)
        )
    }
    tags: dict[int, list[str]] = {}
    for rollout_id, tag in session.exec(
        select(RolloutTag.rollout_id, RolloutTag.tag).where(RolloutTag.rollout_id.in_(ids)).order_by(RolloutTag.tag)
    ):
        tags.setdefault(rollout_id, []).append(tag)
    return [
        RolloutSummary(
            id=rollout.id,
            world_id=rollout.world_id,
            world_name=world_name,
            world_version=world_version,
            title=rollout.title,
            status=rollout.status,
            tags=tags.get(rollout.id, []),
            parent_rollout_id=rollout.parent_rollout_id,
            parent_step_index=rollout.parent_step_index,
            created_at=rollout.created_at,
            step_count=counts.get(rollout.id, (0, 0))[0],
            failed_steps=counts.get(rollout.id, (0, 0))[1],
        )
        for rollout, world_name, world_version in rows
    ]
