"""First-run content: the demo worlds as v1 and a few example rollouts played by each world's simulator.

So the Rollouts and Annotate tabs have something to show the first time the studio opens; a database that
already holds a world is never touched, and the whole seed is one transaction (all of it or nothing)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlmodel import select

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store.database import Store
from wmstudio.store.provenance import MadeBy
from wmstudio.store.tables import Rollout, RolloutTag, Step, World, utcnow
from wmstudio.world.checks.report import CheckReport, check_step
from wmstudio.world.history import HistoryStep, compact_json
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call, WorldSpec, load_world

EXAMPLE_TAG = "example"
EXAMPLE_ROLLOUTS = (  # (seed, steps, which steps are agent mistakes): one clean run and one with an error
    (1, 3, ()),
    (2, 3, (1,)),
)


@dataclass
class SeedStep:
    """One step of an example rollout: the scripted agent's call, the simulator's response and its checks."""

    call: Call
    response: str
    checks: CheckReport
    made_by: MadeBy


def demo_worlds(folder: Path = DEMO_WORLDS_DIR) -> list[WorldSpec]:
    """The shipped demo worlds, by file name (an empty list when the folder is missing)."""
    return [load_world(path) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def simulated_rollout(world: WorldSpec, seed: int, steps: int, mistakes: tuple[int, ...] = ()) -> list[SeedStep]:
    """Play `steps` calls of the world's scripted agent against its simulator (from the world's initial state).

    Steps listed in `mistakes` are deliberate agent errors, so the examples show error responses too. A world
    without a known simulator gives no steps."""
    simulator = SIMULATORS.get(world.simulator or "")
    if simulator is None:
        return []
    rng = random.Random(seed)
    state = world.initial_state
    played: list[SeedStep] = []
    history: list[HistoryStep] = []
    for index in range(steps):
        call = simulator.agent_call(state, rng, invalid=index in mistakes)
        state, response = simulator.step(state, call)
        text = compact_json(response)
        checks = check_step(world, call, text, history=history)
        made_by = MadeBy.by_model(f"simulator:{simulator.name}", sampler={"simulator": simulator.name}, seed=seed)
        played.append(SeedStep(call, text, checks, made_by))
        history.append(HistoryStep(call=call, response=text))
    return played


def seed_first_run(store: Store, folder: Path = DEMO_WORLDS_DIR) -> bool:
    """On a database without worlds, save the demo worlds as v1 with example rollouts; True when it seeded
    (False when the database already has worlds or there are no demo worlds to seed).

    Idempotent and safe against a second process starting at the same time: the emptiness check and every
    insert share one write transaction (the examples are played before it, only when the file looks empty)."""
    if _has_worlds(store):
        return False
    worlds = demo_worlds(folder)
    if not worlds:
        return False
    examples = {world.name: [simulated_rollout(world, seed, steps, mistakes)
                             for seed, steps, mistakes in EXAMPLE_ROLLOUTS] for world in worlds}
    with store.write() as session:
        if session.exec(select(sa.func.count()).select_from(World)).one() > 0:
            return False
        for world in worlds:
            row = World(name=world.name, version=1, text=world.dumps())
            session.add(row)
            session.flush()
            for number, steps in enumerate(examples[world.name], start=1):
                if steps:
                    _add_rollout(session, row.id, f"Example {number}: {world.name} ({len(steps)} steps)", steps)
    return True


def _has_worlds(store: Store) -> bool:
    with store.read() as session:
        return session.exec(select(World.id).limit(1)).first() is not None


def _add_rollout(session, world_id: int, title: str, steps: list[SeedStep]) -> None:
    rollout = Rollout(world_id=world_id, title=title, status="pending")
    session.add(rollout)
    session.flush()
    session.add(RolloutTag(rollout_id=rollout.id, tag=EXAMPLE_TAG))
    for index, step in enumerate(steps):
        report = step.checks.to_json()
        session.add(Step(rollout_id=rollout.id, index=index, call=step.call.to_json(), response=step.response,
                         made_by=step.made_by.to_json(), check_report=report, check_ok=report["ok"],
                         created_at=utcnow()))
    session.flush()
