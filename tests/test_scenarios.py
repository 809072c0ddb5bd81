"""Scenarios, environments and off-policy evaluation (train/agent/scenarios.py, environments.py, off_policy.py): the
demo curriculum's tasks are what the simulators say they are, success conditions judge trajectories, and the
world-model estimate of a scripted policy stands beside the simulators' ground truth."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.agent.environments import HYBRID, SIMULATOR, WORLD_MODEL, run_episode
from wmstudio.train.agent.off_policy import evaluate_policy, wilson_interval
from wmstudio.train.agent.scenarios import (
    HELDOUT,
    TRAIN,
    Step,
    Trajectory,
    _logged_in,
    demo_scenarios,
    split_of,
    succeeded,
)
from wmstudio.train.agent.scripted_policies import expert, noisy, random_agent
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

SCENARIOS = demo_scenarios()


def test_the_demo_curriculum_has_enough_scenarios_in_every_world_and_unseen_held_out_states():
    train, heldout = split_of(SCENARIOS, TRAIN), split_of(SCENARIOS, HELDOUT)
    assert len(train) >= 40 and len(heldout) >= 20
    assert {s.world.name for s in heldout} == {"airline", "filesystem", "payments", "records", "retail"}
    assert [s.world.name for s in heldout[:5]] == sorted({s.world.name for s in heldout})  # worlds take turns
    seen = {json.dumps(s.world.initial_state, sort_keys=True) for s in train}
    assert not any(json.dumps(s.world.initial_state, sort_keys=True) in seen for s in heldout)
    assert [s.task for s in demo_scenarios()] == [s.task for s in SCENARIOS]  # seeded: the same every run
    assert 0 < sum(not s.feasible for s in SCENARIOS) < len(SCENARIOS) / 2


@pytest.mark.parametrize("scenario", SCENARIOS[::7], ids=lambda s: s.id)
def test_each_task_is_accepted_or_refused_by_the_simulator_as_the_scenario_says(scenario):
    simulator = get_simulator(scenario.world.name)
    ready = _logged_in(scenario.world.name, scenario.world.initial_state)
    _, response = simulator.step(ready, scenario.target)
    assert (response["status"] == "ok") == scenario.feasible
    trajectory, _ = run_episode(expert, scenario, SIMULATOR)
    assert succeeded(scenario, trajectory)  # the expert always succeeds against the ground truth


def test_success_conditions_read_the_answer_and_the_final_answer():
    feasible = next(s for s in SCENARIOS if s.feasible and s.world.name == "retail")
    refused = next(s for s in SCENARIOS if not s.feasible and s.world.name == "retail")
    answered = lambda status: json.dumps({"status": status})  # noqa: E731
    assert succeeded(feasible, Trajectory([Step(feasible.target, answered("ok"))], "Done"))
    assert not succeeded(feasible, Trajectory([Step(feasible.target, answered("error"))], "Done"))
    other = Call(feasible.target.name, {**feasible.target.arguments, "order_id": "ORD-00000"})
    assert not succeeded(feasible, Trajectory([Step(other, answered("ok"))], "Done"))  # the wrong order
    assert succeeded(refused, Trajectory([Step(refused.target, answered("error"))], "Could not: refund"))
    assert not succeeded(refused, Trajectory([Step(refused.target, answered("error"))], "Done"))
    assert not succeeded(refused, Trajectory([Step(refused.target, answered("ok"))], "Could not"))


def test_wilson_intervals_match_published_values():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)


@pytest.fixture(scope="module")
def backend(one_thread):
    return load_backend()


def test_the_world_model_estimate_stands_beside_the_truth_and_ranks_the_policies(backend):
    heldout = split_of(SCENARIOS, HELDOUT)[:10]
    truths = {}
    for name, policy in (("expert", expert), ("noisy", noisy(share=0.5)), ("random", random_agent())):
        estimate = evaluate_policy(policy, heldout, backend, WORLD_MODEL).summary()
        low, high = estimate["ci95"]
        assert low <= estimate["estimate"] <= high and estimate["episodes"] == 10
        truths[name] = estimate["ground_truth"]
    assert truths["expert"] == 1.0 and truths["expert"] > truths["noisy"] > truths["random"]


def test_the_hybrid_environment_lets_the_model_answer_only_the_calls_a_task_turns_on(backend):
    scenario = next(s for s in SCENARIOS if s.world.name == "payments" and s.feasible)
    trajectory, world = run_episode(expert, scenario, HYBRID, backend)
    assert [step.call.name for step in trajectory.steps] == ["login", scenario.target.name]
    assert world.answered_by == {WORLD_MODEL: 1, SIMULATOR: 1}  # the simulator logs in, the model decides the task
    token = json.loads(trajectory.steps[0].response)["session_token"]
    assert trajectory.steps[1].call.arguments["session_token"] == token  # the expert uses what it was answered
    lookup = Call("get_order", {"order_id": "ORD-00000"})
    retail = next(s for s in SCENARIOS if s.world.name == "retail")
    _, world = run_episode(lambda s, t: lookup if not t.steps else "Done", retail, HYBRID, backend)
    assert world.answered_by == {WORLD_MODEL: 0, SIMULATOR: 1}  # a lookup the simulator computes exactly


def test_evaluate_prints_the_estimate_its_interval_and_the_ground_truth(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--policy", "expert", "--env", "simulator", "--episodes", "5",
                                      "--db", str(tmp_path / "studio.db"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"policy", "curriculum", "episodes", "estimate", "ci95", "ground_truth"} <= set(data)
    assert data["estimate"] == data["ground_truth"] == 1.0 and data["episodes"] == 5
    refused = CliRunner().invoke(app, ["evaluate", "--policy", "genius"])
    assert refused.exit_code == 2 and "expert, recovering, tries-twice, retry-once, noisy, random" in refused.output


def test_evaluate_judges_by_the_success_condition_saved_in_the_studio(tmp_path, monkeypatch):
    from wmstudio.store import list_scenarios, open_store, update_scenario
    from wmstudio.train.agent.jobs import demo_curriculum

    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    db = tmp_path / "studio.db"
    store = open_store(db)
    first = split_of(SCENARIOS, HELDOUT)[0]
    row = next(r for r in list_scenarios(store, demo_curriculum(store).id) if r.key == first.id)
    update_scenario(store, row.id, success="size(trajectory.calls) > 5")  # the expert makes one or two calls
    store.close()
    result = CliRunner().invoke(app, ["evaluate", "--policy", "expert", "--env", "simulator", "--episodes", "2",
                                      "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ground_truth"] == 0.5  # the edited scenario now fails, the other succeeds
