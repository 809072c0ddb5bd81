"""The environments an episode is played in: one module each (adding one is adding a file), every place that offers
a choice of environment reads the same registry, and the echo world (no model) answers a steered call with its pins
and every other call with a plain ok."""

from __future__ import annotations

import json
import pkgutil

from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.settings import setting_specs
from wmstudio.train.agent import environment_kinds
from wmstudio.train.agent.adversarial import adversarial_scenarios, scenario_family
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.environment_kinds import ENVIRONMENTS, KINDS
from wmstudio.train.agent.environments import EpisodeWorld, run_episode
from wmstudio.train.agent.scenarios import succeeded
from wmstudio.train.agent.scripted_policies import tries_twice


def test_every_module_of_the_registry_folder_is_an_environment_offered_everywhere():
    files = {module.name.replace("_", "-") for module in pkgutil.iter_modules(environment_kinds.__path__)}
    assert set(KINDS) == files == {"world-model", "simulator", "hybrid", "echo"}
    assert ENVIRONMENTS[0] == "world-model"  # the default comes first
    choices = next(spec for spec in setting_specs(GrpoSettings) if spec.name == "env").choices
    assert tuple(choices) == ENVIRONMENTS
    shown = CliRunner().invoke(app, ["train-grpo", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert shown.exit_code == 0 and all(name in shown.output for name in ENVIRONMENTS)


def test_the_echo_world_answers_a_steered_call_with_its_pins_and_every_other_call_ok():
    scenario = next(s for s in adversarial_scenarios() if scenario_family(s) == "transient")
    trajectory, world = run_episode(tries_twice, scenario, "echo")
    first, second = (json.loads(step.response) for step in trajectory.steps[-2:])
    assert first["status"] == "error" and first["error"]  # the pinned failure of the task's first call, as pinned
    assert second == {"status": "ok"}  # the retry: nothing but ok, no model behind it
    assert world.answered_by == {"world-model": 0, "echo": len(trajectory.steps)}
    assert succeeded(scenario, trajectory)  # judged by the simulator that stepped along


def test_the_echo_world_needs_neither_a_model_nor_a_simulator():
    scenario = adversarial_scenarios()[0]
    world = EpisodeWorld(scenario, "echo")
    assert world.backend is None and KINDS["echo"].needs_model is False
