"""An OpenEnv environment (reset / step / state) whose tools are answered by the world model, over a saved
curriculum's scenarios, so OpenEnv-speaking trainers train against it with `openenv-core`'s own clients.

A scenario is one rollout of a curriculum version: its world, its task and its steering (the anchors its steps
pinned, per tool). `reset(curriculum=NAME, scenario=I)` starts one (a seeded random one without `scenario`);
`step` takes a tool call, or a final answer that ends the episode. Rewards are format terms only (1 for a call to a
known tool whose arguments fit its parameters, else 0): task-success conditions arrive with GRPO's scenarios."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from wmstudio.model.generation import generate
from wmstudio.model.sampler import SamplerSettings
from wmstudio.problems import InvalidInput
from wmstudio.serve.service import WorldModelService
from wmstudio.store.curricula import curriculum_snapshots, get_curriculum, list_curricula
from wmstudio.store.worlds import get_world
from wmstudio.world.anchors import Anchor
from wmstudio.world.checks import argument_problems
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec

MAX_TURNS = 8
MAX_SESSIONS = 16


class WorldAction(Action):
    """A tool call (`tool`, `arguments`) or, to end the episode, a `final_answer`."""

    tool: str = Field(default="", description="Name of the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's arguments")
    final_answer: Optional[str] = Field(default=None, description="The agent's answer; ends the episode")


class WorldObservation(Observation):
    """What the agent sees: at reset the task and the tools; after a call the world model's response and its
    deterministic checks, or why the call was refused."""

    task: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    response: Optional[str] = None
    checks: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    turn: int = 0


class WorldState(State):
    """The episode: which curriculum scenario, in which world, and the calls made so far."""

    curriculum: str = ""
    scenario: int = 0
    world: str = ""
    calls: list[dict[str, Any]] = Field(default_factory=list)


@dataclass
class Scenario:
    """One curriculum rollout as an episode: its world, the task, and the anchors pinned per tool."""

    world: WorldSpec
    task: str
    steering: dict[str, list[Anchor]] = field(default_factory=dict)


class WorldModelEnvironment(Environment[WorldAction, WorldObservation, WorldState]):
    """One episode at a time per session; sessions share the service's batched world model."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, service: WorldModelService, max_turns: int = MAX_TURNS):
        super().__init__()
        self.service, self.max_turns = service, max_turns
        self._scenario: Scenario | None = None
        self._history: list[HistoryStep] = []
        self._state = WorldState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, curriculum: Optional[str] = None,
              scenario: Optional[int] = None, **kwargs: Any) -> WorldObservation:
        name, scenarios = self._curriculum(curriculum)
        if scenario is None:
            scenario = random.Random(seed).randrange(len(scenarios))
        if not isinstance(scenario, int) or not 0 <= scenario < len(scenarios):
            raise InvalidInput(f"scenario: curriculum {name!r} has scenarios 0 to {len(scenarios) - 1}")
        self._scenario = scenarios[scenario]
        self._history = []
        self._state = WorldState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, curriculum=name,
                                 scenario=scenario, world=self._scenario.world.name)
        world = self._scenario.world
        return WorldObservation(task=self._scenario.task, tools=[t.to_json() for t in world.tools], done=False,
                                reward=None)

    def step(self, action: WorldAction, timeout_s: Optional[float] = None, **kwargs: Any) -> WorldObservation:
        if self._scenario is None:
            return WorldObservation(error="call reset first: no episode is running", done=True, reward=0.0)
        self._state.step_count += 1
        turn = self._state.step_count
        out_of_turns = turn >= self.max_turns
        if action.final_answer is not None:
            return WorldObservation(turn=turn, done=True, reward=0.0)
        world = self._scenario.world
        try:
            tool = world.tool(action.tool)
        except KeyError:
            known = ", ".join(t.name for t in world.tools)
            return WorldObservation(error=f"no tool {action.tool!r}: call one of {known}", turn=turn,
                                    done=out_of_turns, reward=0.0)
        call = Call(tool.name, dict(action.arguments))
        anchors = self._scenario.steering.get(tool.name, [])
        with self.service.session() as backend:
            generation = generate(backend, world, call, anchors, self._history, SamplerSettings())
        sample = generation.samples[0]
        self._history.append(HistoryStep(call=call, response=sample.response))
        self._state.calls.append({"call": call.to_json(), "response": sample.response})
        valid = not argument_problems(tool, call)
        return WorldObservation(response=sample.response, checks=sample.checks.to_json(), turn=turn,
                                done=out_of_turns, reward=1.0 if valid else 0.0)

    @property
    def state(self) -> WorldState:
        return self._state

    def _curriculum(self, name: Optional[str]) -> tuple[str, list[Scenario]]:
        store = self.service.store
        if name is None:
            summaries = list_curricula(store)
            if not summaries:
                raise InvalidInput("curriculum: none is saved yet: gather rollouts into one in the studio")
            name = summaries[0].curriculum.name
        curriculum = get_curriculum(store, name)
        scenarios = [scenario_of(get_world(store, snap.world_id).spec(), snap.title, snap.steps)
                     for snap in curriculum_snapshots(store, curriculum.id)]
        if not scenarios:
            raise InvalidInput(f"curriculum: {name!r} holds no rollouts")
        return name, scenarios


def scenario_of(world: WorldSpec, title: str, steps: list[dict[str, Any]]) -> Scenario:
    """A rollout as a scenario: the world's task (and the rollout's title), the first anchors pinned per tool."""
    steering: dict[str, list[Anchor]] = {}
    for step in steps:
        made_by = _json(step.get("made_by")) or {}
        call = _json(step.get("call")) or {}
        anchors = [Anchor(a["path"], a["value"]) for a in made_by.get("anchors") or []]
        if anchors and call.get("name") and call["name"] not in steering:
            steering[call["name"]] = anchors
    task = world.task if not title else f"{world.task}\n\nScenario: {title}"
    return Scenario(world, task, steering)


def openenv_app(service: WorldModelService, max_turns: int = MAX_TURNS):
    """The OpenEnv server (HTTP reset/step/state and the /ws sessions its clients use) for `service`."""
    return create_fastapi_app(lambda: WorldModelEnvironment(service, max_turns), WorldAction, WorldObservation,
                              max_concurrent_envs=MAX_SESSIONS)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value
