"""Authoring a scenario for a curriculum: the worlds it can use, a success condition tried on an episode (a saved
rollout, one the world's simulator plays, or the episode before any call), and the scenario added as the
curriculum's next version (its rollouts and earlier scenarios kept).

The Train tab's *New scenario* form calls these; a built-in curriculum (`demo`, `adversarial`) is seeded first, so a
scenario added to it is version 2 of it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import (
    Curriculum,
    NewScenario,
    Store,
    create_curriculum_version,
    curriculum_rollouts,
    filter_rollouts,
    get_world,
    rollout_steps,
)
from wmstudio.store.scenarios import scenario_problems, success_problem
from wmstudio.studio.curricula import curriculum_row, export_scenarios
from wmstudio.train.agent.environments import SIMULATOR, run_episode
from wmstudio.train.agent.scenarios import TRAIN, Scenario, Step, Trajectory, demo_scenarios
from wmstudio.train.agent.scripted_policies import expert
from wmstudio.world.rules.cel import evaluate_check
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call, WorldSpec

EPISODES_SHOWN = 30  # saved rollouts offered to try a condition on


@dataclass
class Tried:
    """A success condition tried on a saved episode: whether it holds, and in words."""

    holds: bool
    text: str


def curriculum_worlds(store: Store, name: str) -> dict[str, WorldSpec]:
    """The worlds a new scenario of curriculum `name` can use, by name: those of its latest version's scenarios and
    rollouts (the last seen of a name wins)."""
    curriculum = curriculum_row(store, name)
    worlds = {s.world.name: s.world for s in export_scenarios(store, curriculum.id)}
    for rollout in curriculum_rollouts(store, curriculum.id):
        spec = get_world(store, rollout.world_id).spec()
        worlds[spec.name] = spec
    return dict(sorted(worlds.items()))


NO_CALLS = 0  # the episode before the agent acts: always offered, so a condition can be tried with none saved
PLAYED = "played:"  # an episode the world's simulator plays (the expert on a built-in task): PLAYED + scenario id
PLAYED_SHOWN = 4  # of a demo world's built-in tasks, those offered to try a condition on


def saved_episodes(store: Store, world: str) -> list[tuple[str, Any]]:
    """The episodes to try a condition on, as (label, value): the newest saved rollouts of `world` (any version), the
    episodes its simulator plays (the expert on a few of the built-in `demo` tasks, done and refused, where `world`
    is a demo world), then the episode before any call (NO_CALLS): a condition that holds there rewards an agent
    that does nothing."""
    page = filter_rollouts(store, world=world, page_size=EPISODES_SHOWN)
    played = [(f"played by the simulator: the expert on \"{s.task}\" ({'done' if s.feasible else 'the world refuses'})",
               PLAYED + s.id) for s in _played(world)]
    return [(f"#{r.id} {r.title or 'untitled'} · {r.step_count} step(s)", r.id) for r in page.items] + played + \
        [("before any call (the initial state, no calls)", NO_CALLS)]


def try_success(store: Store, condition: str, world: WorldSpec, episode: Any) -> Tried:
    """Evaluate `condition` on an episode of `world`: a saved rollout's calls and answers (no final answer: a
    rollout has none), one the simulator plays (PLAYED + a built-in task's id, on that task's state) or NO_CALLS;
    InvalidInput naming the field when the condition is not one a scenario can hold (checked as a saved one is) or
    no episode is picked."""
    problem = success_problem(condition, world)
    if problem is not None:
        raise InvalidInput(problem)
    if isinstance(episode, str) and episode.startswith(PLAYED):
        return _try_played(condition, world, episode.removeprefix(PLAYED))
    try:
        rollout = int(episode)
    except (TypeError, ValueError):
        raise InvalidInput(Problem("episode", "pick a saved episode to try the condition on")) from None
    steps = [] if rollout == NO_CALLS else [Step(Call.from_json(s.call, f"rollout {rollout}.call"), s.response)
                                            for s in rollout_steps(store, rollout)]
    trajectory = Trajectory(steps)
    holds, why = evaluate_check(condition.strip(), {"state": world.initial_state, "trajectory": trajectory.to_json()},
                                names=("state", "trajectory"))
    if rollout == NO_CALLS:
        return Tried(bool(holds), "Holds before any call: a run would reward an agent that does nothing." if holds
                     else f"Does not hold before any call (the agent has to act): {why}.")
    if holds:
        return Tried(True, f"Holds on rollout #{rollout} ({len(steps)} call(s)).")
    return Tried(False, f"Does not hold on rollout #{rollout} ({len(steps)} call(s)): {why}.")


@lru_cache(maxsize=16)
def _played(world: str) -> tuple[Scenario, ...]:
    """A few built-in tasks of demo world `world`, those the world does and those it refuses alternating (none for
    a world with no simulator of its own)."""
    if world not in SIMULATORS:
        return ()
    own = [s for s in demo_scenarios() if s.world.name == world]
    done, refused = [s for s in own if s.feasible], [s for s in own if not s.feasible]
    mixed = [s for pair in zip(done, refused) for s in pair] + done[len(refused):] + refused[len(done):]
    return tuple(mixed[:PLAYED_SHOWN])


def _try_played(condition: str, world: WorldSpec, scenario_id: str) -> Tried:
    scenario = next((s for s in _played(world.name) if s.id == scenario_id), None)
    if scenario is None:
        raise InvalidInput(Problem("episode", f"{world.name} has no built-in task {scenario_id!r} to play: pick "
                                              "another episode"))
    trajectory, _ = run_episode(expert, scenario, SIMULATOR)
    holds, why = evaluate_check(condition.strip(), {"state": scenario.world.initial_state,
                                                    "trajectory": trajectory.to_json()}, names=("state", "trajectory"))
    played = f"the simulator's episode ({len(trajectory.steps)} call(s), answered {trajectory.final_answer!r})"
    return Tried(True, f"Holds on {played}.") if holds else Tried(False, f"Does not hold on {played}: {why}.")


def add_scenario(store: Store, curriculum: str, world: WorldSpec, task: str, success: str,
                 steering: dict[str, list[str]], split: str = TRAIN, key: str = "") -> Curriculum:
    """Save the next version of `curriculum` with its rollouts and scenarios and this new one (key: the world's name,
    the split and the next free number when none is given); InvalidInput naming each bad field, nothing saved."""
    latest = curriculum_row(store, curriculum)
    existing = export_scenarios(store, latest.id)
    taken = {s.key for s in existing}
    key = (key or "").strip() or _free_key(taken, f"{world.name}-{split}")
    scenario = NewScenario(key=key, split=split, world=world, task=str(task or "").strip(),
                           success=str(success or "").strip(), steering=steering)
    problems = scenario_problems(scenario)
    if key in taken:
        problems.append(Problem("key", f"{key!r} is already a scenario of {latest.name}: give another key"))
    if problems:
        raise InvalidInput(problems)
    rollouts = [r.id for r in curriculum_rollouts(store, latest.id)]
    return create_curriculum_version(store, latest.name, rollouts, latest.description, accepted_only=False,
                                     scenarios=[*existing, scenario])


def _free_key(taken: set[str], stem: str) -> str:
    number = 0
    while f"{stem}-{number}" in taken:
        number += 1
    return f"{stem}-{number}"
