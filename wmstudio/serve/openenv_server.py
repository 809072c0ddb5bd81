"""An OpenEnv environment (reset / step / state) whose tools are answered by the world model, over a curriculum's
scenarios, so OpenEnv-speaking trainers train against it with `openenv-core`'s own clients.

`reset(curriculum=NAME, scenario=I, split=...)` starts one scenario (a seeded random one without `scenario`):
`demo` is the demo curriculum of the five simulated worlds (train/agent/scenarios.py, with success conditions); a saved
curriculum's rollouts are scenarios too (their world, task, and the anchors their steps pinned as steering).
`step` takes a tool call, or a final answer that ends the episode. Each call earns a format reward (1 for a known
tool with arguments that fit its parameters, else 0); the final answer earns 1 when the scenario's success
condition holds over the episode (a saved rollout has none: 0). An episode that is done answers no more steps
(an error, reward 0) until the next reset. A bad reset is a 422 naming the field over HTTP (an error message over
the WebSocket)."""

from __future__ import annotations

import random
import uuid
from typing import Any, Optional

from fastapi import HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.serve.guard import log_refusal, problems_response
from wmstudio.serve.service import WorldModelService
from wmstudio.settings import is_whole, whole_in
from wmstudio.studio.serving import TRAIN, Scenario, Step, Trajectory, episode_scenarios, model_answer, succeeded
from wmstudio.world.checks.report import argument_problems
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call

MAX_TURNS = 8
MAX_SESSIONS = 16
OVER = "the episode is over: reset to start another"


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
    grounding: Optional[str] = None  # of a world-model answer: "none", the world model standing in for the world


class WorldState(State):
    """The episode: which curriculum scenario, in which world, and the calls made so far."""

    curriculum: str = ""
    scenario: int = 0
    world: str = ""
    calls: list[dict[str, Any]] = Field(default_factory=list)


class WorldModelEnvironment(Environment[WorldAction, WorldObservation, WorldState]):
    """One episode at a time per session; sessions share the service's batched world model."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, service: WorldModelService, max_turns: int = MAX_TURNS):
        super().__init__()
        self.service, self.max_turns = service, max_turns
        self._scenario: Scenario | None = None
        self._trajectory = Trajectory()
        self._state = WorldState()
        self._done = False

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, curriculum: Optional[str] = None,
              scenario: Optional[int] = None, split: str = TRAIN, **kwargs: Any) -> WorldObservation:
        problems = []
        if curriculum is not None and not isinstance(curriculum, str):
            problems.append(Problem("curriculum", "must be the name of a curriculum (text)"))
        if not isinstance(split, str):
            problems.append(Problem("split", f"must be {TRAIN!r} or 'heldout'"))
        if seed is not None and not is_whole(seed):
            problems.append(Problem("seed", "must be a whole number"))
        if problems:
            raise InvalidInput(problems)
        name, scenarios = episode_scenarios(self.service.store, curriculum, split)
        if scenario is None:
            scenario = random.Random(seed).randrange(len(scenarios))
        if not whole_in(scenario, 0, len(scenarios) - 1):
            raise InvalidInput(Problem("scenario", f"curriculum {name!r} ({split}) has scenarios 0 to "
                                                   f"{len(scenarios) - 1}: give one of those numbers"))
        self._scenario = scenarios[scenario]
        self._trajectory = Trajectory()
        self._done = False
        self._state = WorldState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, curriculum=name,
                                 scenario=scenario, world=self._scenario.world.name)
        world = self._scenario.world
        return WorldObservation(task=self._scenario.task, tools=[t.to_json() for t in world.tools], done=False,
                                reward=None)

    def step(self, action: WorldAction, timeout_s: Optional[float] = None, **kwargs: Any) -> WorldObservation:
        if self._scenario is None:
            return WorldObservation(error="call reset first: no episode is running", done=True, reward=0.0)
        if self._done:
            return WorldObservation(error=OVER, turn=self._state.step_count, done=True, reward=0.0)
        self._state.step_count += 1
        turn = self._state.step_count
        out_of_turns = turn >= self.max_turns
        self._done = out_of_turns
        if action.final_answer is not None:
            self._done = True
            self._trajectory.final_answer = action.final_answer
            success = succeeded(self._scenario, self._trajectory)
            return WorldObservation(turn=turn, done=True, reward=1.0 if success else 0.0)
        world = self._scenario.world
        try:
            tool = world.tool(action.tool)
        except KeyError:
            known = ", ".join(t.name for t in world.tools)
            return WorldObservation(error=f"no tool {action.tool!r}: call one of {known}", turn=turn,
                                    done=out_of_turns, reward=0.0)
        call = Call(tool.name, dict(action.arguments))
        history = [HistoryStep(call=step.call, response=step.response) for step in self._trajectory.steps]
        settings = SamplerSettings()  # grounding none: nothing from a simulator in the prompt
        with self.service.session() as backend:
            sample = model_answer(backend, self._scenario, call, history, settings)
        self._trajectory.steps.append(Step(call, sample.response))
        self._state.calls.append({"call": call.to_json(), "response": sample.response})
        valid = not argument_problems(tool, call)
        return WorldObservation(response=sample.response, checks=sample.checks.to_json(), turn=turn,
                                done=out_of_turns, reward=1.0 if valid else 0.0, grounding=settings.grounding)

    @property
    def state(self) -> WorldState:
        return self._state


def openenv_app(service: WorldModelService, max_turns: int = MAX_TURNS):
    """The OpenEnv server (HTTP reset/step/state and the /ws sessions its clients use) for `service`; a bad
    reset or step over HTTP is a 422 naming the field (as the `/v1` routes answer)."""
    app = create_fastapi_app(lambda: WorldModelEnvironment(service, max_turns), WorldAction, WorldObservation,
                             max_concurrent_envs=MAX_SESSIONS)
    app.add_exception_handler(InvalidInput, lambda request, err: problems_response(err, request.method,
                                                                                   request.url.path))
    app.add_exception_handler(HTTPException, _action_locs)
    return app


async def _action_locs(request: Request, err: HTTPException) -> JSONResponse:
    """OpenEnv's step answers a bad action 422 with `loc` inside the action (["arguments"]); name it from the body
    (["body", "action", "arguments"]), as every other 422 here does."""
    detail = err.detail
    if err.status_code == 422 and isinstance(detail, list):
        detail = [{**item, "loc": ["body", "action", *item["loc"]]} if isinstance(item, dict) and isinstance(
            item.get("loc"), (list, tuple)) and (not item["loc"] or item["loc"][0] != "body") else item
                  for item in detail]
        log_refusal(request.method, request.url.path, 422, [item for item in detail if isinstance(item, dict)])
    return JSONResponse({"detail": jsonable_encoder(detail)}, status_code=err.status_code, headers=err.headers)
