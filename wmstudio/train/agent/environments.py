"""Where an agent's calls are answered during an episode: by the environment it is played in, one module each in
train/agent/environment_kinds/ (the world model, the simulator, both, or an echo with no model).

The simulator steps along in every mode where the world has one, under the same steering and the world's
directives, as the ground truth that scores the episode; the world model never reads it: its prompt holds the
scenario's initial state and the episode's history as the agent saw it (grounding `none`, unless the settings ask
for `oracle` by name)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from wmstudio.locations import DEFAULT_MODEL
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.answer_cache import AnswerCache, CachedAnswer
from wmstudio.model.generation.generation import Generation, Sample, generate
from wmstudio.model.serving.backends import Backend, load_backend
from wmstudio.model.serving.remote_world_model import RemoteWorldModel
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.environment_kind import SIMULATOR, WORLD_MODEL, CallToAnswer  # noqa: F401 - the names
from wmstudio.train.agent.environment_kinds import ENVIRONMENTS, environment_kind
from wmstudio.train.agent.scenarios import Scenario, Step, Trajectory
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.occurrence import anchors_for, occurrence_of, steered_step

HYBRID = "hybrid"  # WORLD_MODEL, SIMULATOR and HYBRID: the environments other modules name
MODES = ENVIRONMENTS
MAX_TURNS = 6  # a login, the task's call, a retry or two (after an error, a partial page), the answer

Action = Call | str  # a tool call, or the agent's final answer
Policy = Callable[[Scenario, Trajectory], Action]


@dataclass
class Turn:
    """One reply a trained policy wrote in an episode: its token ids and their log-probabilities (what GRPO
    scores), the action it parses as (None: malformed) and its text (for transcripts)."""

    ids: list[int]
    logprobs: list[float]
    action: Action | None
    text: str


class EpisodeWorld:
    """Answers one episode's calls in `mode`; `answered_by` counts who answered (for the hybrid share). A `cache`
    shared between episodes answers a greedy world-model call it has seen (the same world, call, anchors, history
    and settings) without generating it again."""

    def __init__(self, scenario: Scenario, mode: str, backend: Backend | RemoteWorldModel | None = None,
                 settings: SamplerSettings = SamplerSettings(), cache: AnswerCache | None = None):
        self.kind = environment_kind(mode)
        if self.kind.needs_model and backend is None:
            raise InvalidInput(Problem("env", f"the {mode} environment needs a world model"))
        if self.kind.needs_simulator and not scenario.world.simulator:
            raise InvalidInput(Problem("env", f"world {scenario.world.name!r} has no simulator: use {WORLD_MODEL}"))
        self.scenario, self.mode, self.backend, self.settings, self.cache = scenario, mode, backend, settings, cache
        self.simulator = get_simulator(scenario.world.simulator) if scenario.world.simulator else None
        self.state = scenario.world.initial_state
        self.history: list[HistoryStep] = []
        self.answered_by = dict.fromkeys((WORLD_MODEL, self.kind.source), 0)  # who answered the episode's calls
        self.prompts: list[str] = []  # what the world model read for each call it answered (its grounding's)

    def answer(self, call: Call) -> str:
        """The response to `call` as the agent sees it (JSON text)."""
        truth = None
        anchors = episode_anchors(self.scenario, call, self.history)
        if self.simulator is not None:
            self.state, truth = steered_step(self.simulator, self.state, call, anchors, self.scenario.world.directives)
        asked = []

        def model() -> str:
            asked.append(True)
            return self._world_model_answer(call, anchors)

        text = self.kind.answer(CallToAnswer(call, anchors, truth, model))
        self.answered_by[WORLD_MODEL if asked else self.kind.source] += 1
        self.history.append(HistoryStep(call=call, response=text))
        return text

    def _world_model_answer(self, call: Call, anchors: list[Anchor]) -> str:
        try:
            if isinstance(self.backend, RemoteWorldModel):  # a shared server answers (serve-wm)
                return self.backend.answer(self.scenario.world, call, anchors, self.history).response
            return self._model_answer(call, anchors)
        except InvalidInput as err:  # an unknown tool, say: the world answers as an API would
            return json.dumps({"error": "INVALID_CALL", "message": str(err), "status": "error"})

    def _model_answer(self, call: Call, anchors: list[Anchor]) -> str:
        """The local world model's answer to `call` under `anchors` (from the cache when it holds it), its prompt
        kept."""
        key = None
        if self.cache is not None:
            key = self.cache.key(self.backend.name, self.scenario.world, call, anchors, self.history, self.settings)
            cached = self.cache.get(key)
            if cached is not None:
                self.prompts.append(cached.prompt)
                return cached.response
        generation = model_generation(self.backend, self.scenario, call, self.history, self.settings)
        self.prompts.append(generation.prompt)
        text = generation.samples[0].response
        if self.cache is not None:
            self.cache.put(key, CachedAnswer(text, generation.prompt))
        return text


def world_model_for(env: str, model: str | None = None, url: str | None = None) -> Backend | RemoteWorldModel | None:
    """Who answers an episode's world-model calls in `env`: nobody in the simulator, a `serve-wm` server at `url`
    (its key from WMSTUDIO_API_KEY), else the model loaded here (the embedded one by default)."""
    if not environment_kind(env).needs_model:
        return None
    if url:
        return RemoteWorldModel(url, os.environ.get("WMSTUDIO_API_KEY") or None)
    return load_backend(model or DEFAULT_MODEL)


def episode_anchors(scenario: Scenario, call: Call, history: list[HistoryStep]) -> list[Anchor]:
    """The scenario's anchors for `call`, counted among the earlier calls of its tool in the episode (`history`)."""
    return anchors_for(scenario.steering, call.name, occurrence_of(call.name, (step.call.name for step in history)))


def model_generation(backend: Backend, scenario: Scenario, call: Call, history: list[HistoryStep],
                     settings: SamplerSettings = SamplerSettings()) -> Generation:
    """The world model's answer to an episode's call, checked, under the scenario's anchors for that call of that
    tool, with the prompt it read (InvalidInput for a call it cannot lay out, such as an unknown tool). `history` is
    the episode as the agent saw it; with grounding `none` (the default) nothing of the simulator reaches the prompt."""
    return generate(backend, scenario.world, call, episode_anchors(scenario, call, history), history, settings)


def model_answer(backend: Backend, scenario: Scenario, call: Call, history: list[HistoryStep],
                 settings: SamplerSettings = SamplerSettings()) -> Sample:
    """The first sample of model_generation."""
    return model_generation(backend, scenario, call, history, settings).samples[0]


def run_episode(policy: Policy, scenario: Scenario, mode: str, backend: Backend | RemoteWorldModel | None = None,
                max_turns: int = MAX_TURNS, settings: SamplerSettings = SamplerSettings()
                ) -> tuple[Trajectory, EpisodeWorld]:
    """Let `policy` act until it answers or runs out of turns; every call answered in `mode` (the world model
    under `settings`: grounding `none` by default)."""
    world = EpisodeWorld(scenario, mode, backend, settings)
    trajectory = Trajectory()
    for _ in range(max_turns):
        action = policy(scenario, trajectory)
        if isinstance(action, str):
            trajectory.final_answer = action
            break
        trajectory.steps.append(Step(action, world.answer(action)))
    return trajectory, world
