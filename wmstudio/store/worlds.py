"""Saved worlds: every save of a world becomes a new numbered version, so rollouts keep the world they ran in.

Versions are never overwritten; saving a world whose text equals its latest version returns that version."""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlalchemy as sa
from sqlmodel import Session, select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.tables import World
from wmstudio.world.spec import WorldSpec, normal_world_name, world_name_problem


@dataclass
class WorldSummary:
    """A world name with its latest saved version and how many versions exist."""

    name: str
    latest: World
    versions: int


def save_world_version(store: Store, world: WorldSpec) -> World:
    """Save `world` as the next version of its name (v1 for a new name); unchanged text keeps the latest version."""
    if not isinstance(world, WorldSpec):
        raise InvalidInput(Problem("world", f"expected a WorldSpec (load or parse the world first), got "
                                            f"{type(world).__name__}"))
    with store.write() as session:
        return world_version_in(session, world)


def world_version_in(session: Session, world: WorldSpec) -> World:
    """`save_world_version` inside a write session the caller holds (a bulk import saves its worlds with its rows).
    The name is saved normalised (NFKC), so look-alike names are one world; one with hidden characters is refused."""
    if (why := world_name_problem(world.name)) is not None:
        raise InvalidInput(Problem("name", why))
    if world.name != normal_world_name(world.name):
        world = replace(world, name=normal_world_name(world.name))
    text = world.dumps()
    latest = session.exec(
        select(World).where(World.name == world.name).order_by(World.version.desc()).limit(1)
    ).first()
    if latest is not None and latest.text == text:
        return latest
    row = World(name=world.name, version=(latest.version + 1) if latest else 1, text=text)
    session.add(row)
    session.flush()
    return row


def list_worlds(store: Store) -> list[WorldSummary]:
    """Every world name, alphabetically, with its latest version."""
    versions = (
        select(World.name, sa.func.max(World.version).label("latest"), sa.func.count().label("versions"))
        .group_by(World.name)
        .subquery()
    )
    query = (
        select(World, versions.c.versions)
        .join(versions, sa.and_(World.name == versions.c.name, World.version == versions.c.latest))
        .order_by(World.name)
    )
    with store.read() as session:
        return [WorldSummary(name=row.name, latest=row, versions=count) for row, count in session.exec(query)]


def world_versions(store: Store, name: str) -> list[World]:
    """All saved versions of the world called `name`, newest first (empty when there are none)."""
    with store.read() as session:
        return list(session.exec(select(World).where(World.name == name).order_by(World.version.desc())))


def latest_world(store: Store, name: str) -> World | None:
    """The newest saved version of `name`, or None."""
    with store.read() as session:
        return session.exec(
            select(World).where(World.name == name).order_by(World.version.desc()).limit(1)
        ).first()


def get_world(store: Store, world_id: int) -> World:
    """The world version with this id; InvalidInput when there is none."""
    with store.read() as session:
        return fetch_row(session, World, world_id, "world_id")
