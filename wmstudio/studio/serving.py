"""What the HTTP servers serve beyond one world-model step: the scenarios an OpenEnv episode plays (a curriculum's,
or the demo's), the pieces of an episode (its trajectory, the world model's answer, the success condition), and a
snapshot of the studio's database for a Space to keep.

serve/ speaks HTTP and OpenEnv; the episodes' content comes from here, as the tabs' from the other studio modules."""

from __future__ import annotations

from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import (
    Store,
    count_scenarios,
    curriculum_snapshots,
    get_curriculum,
    get_world,
    list_curricula,
)
from wmstudio.store.database import backup_database  # noqa: F401 - re-exported: a Space's snapshot
from wmstudio.train.agent.curriculum_scenarios import curriculum_scenarios
from wmstudio.train.agent.environments import model_answer  # noqa: F401 - re-exported: an episode's answer
from wmstudio.train.agent.scenarios import (  # noqa: F401 - re-exported: an episode's pieces
    TRAIN,
    Scenario,
    Step,
    Trajectory,
    demo_scenarios,
    split_of,
    succeeded,
)
from wmstudio.world.json_types import json_or
from wmstudio.world.spec import WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.occurrence import SteeringKey, occurrence_of

DEMO = "demo"  # the demo curriculum's name: its scenarios are made, not saved


def episode_scenarios(store: Store | None, name: str | None, split: str) -> tuple[str, list[Scenario]]:
    """The named curriculum's scenarios in `split`: `demo`, else a saved one (by default the newest saved, else
    demo): its stored scenarios, or its rollouts replayed as scenarios without a success condition."""
    if name is None:
        summaries = list_curricula(store) if store is not None else []
        name = summaries[0].curriculum.name if summaries else DEMO
    if name == DEMO or not name:  # as edited in the studio's Train tab when the server has a store
        return name, split_of(curriculum_scenarios(store) if store is not None else demo_scenarios(), split)
    if store is None:
        raise InvalidInput(Problem("curriculum", f"this server has no saved curricula: use {DEMO!r}"))
    curriculum = get_curriculum(store, name)
    if count_scenarios(store, curriculum.id):  # saved scenarios carry their own success conditions
        return name, split_of(curriculum_scenarios(store, name), split)
    scenarios = [scenario_of(f"{name}-{i}", get_world(store, snap.world_id).spec(), snap.title, snap.steps)
                 for i, snap in enumerate(curriculum_snapshots(store, curriculum.id))]
    if not scenarios:
        raise InvalidInput(Problem("curriculum", f"{name!r} holds no rollouts: add rollouts to it, or use {DEMO!r}"))
    return name, scenarios


def scenario_of(scenario_id: str, world: WorldSpec, title: str, steps: list[dict[str, Any]]) -> Scenario:
    """A saved rollout as a scenario: the world's task (and the rollout's title), each step's anchors pinned to that
    call of its tool (`get_order#2`: the second get_order), no success condition."""
    steering: dict[str, list[Anchor]] = {}
    earlier: list[str] = []
    for step in steps:
        made_by = json_or(step.get("made_by"), None) or {}
        call = json_or(step.get("call"), None) or {}
        name = call.get("name")
        if not isinstance(name, str) or not name:
            continue
        key = SteeringKey(name, occurrence_of(name, earlier))
        earlier.append(name)
        anchors = [Anchor(a["path"], a["value"]) for a in made_by.get("anchors") or []]
        if anchors:
            steering[str(key)] = anchors
    task = world.task if not title else f"{world.task}\n\nScenario: {title}"
    return Scenario(scenario_id, TRAIN, world, task, steering=steering)
