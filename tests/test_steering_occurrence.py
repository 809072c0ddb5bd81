"""Steering per call occurrence: a scenario pins anchors to one call of a tool (`refund_order#1`), and the world
model and the simulator that scores the episode both keep them, so a transient error on the first refund lets the
retry through, while anchors on every call (`refund_order`) fail the retry too."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from wmstudio.model.serving.backends import load_backend
from wmstudio.studio.serving import scenario_of
from wmstudio.train.agent.environments import SIMULATOR, WORLD_MODEL, run_episode
from wmstudio.train.agent.scenarios import Scenario, Trajectory, demo_scenarios, succeeded
from wmstudio.ui.steering_lines import read_steering, steering_text
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.occurrence import SteeringKey, anchors_for, occurrence_of, parse_steering_key

pytestmark = pytest.mark.usefixtures("one_thread")
TRANSIENT = [Anchor("status", "error"), Anchor("error", "RATE_LIMITED")]


@pytest.fixture(scope="module")
def refund() -> Scenario:
    """A feasible retail scenario whose task is a refund (no login needed)."""
    return next(s for s in demo_scenarios() if s.world.name == "retail" and s.feasible
                and s.target.name == "refund_order")


def retrying(scenario: Scenario, trajectory: Trajectory):
    """The expert that retries: the task's call until it is answered ok (three tries at most), then done."""
    steps = trajectory.steps
    if steps and json.loads(steps[-1].response).get("status") == "ok":
        return "Done: refunded."
    return scenario.target if len(steps) < 3 else "Could not refund it."


def statuses(trajectory: Trajectory) -> list[tuple[str, str]]:
    answers = [json.loads(step.response) for step in trajectory.steps]
    return [(a.get("status"), a.get("error") or "") for a in answers]


def test_a_transient_error_on_the_first_call_lets_the_retry_through_in_the_simulator(refund):
    steered = replace(refund, steering={"refund_order#1": TRANSIENT})
    trajectory, world = run_episode(retrying, steered, SIMULATOR)
    assert statuses(trajectory) == [("error", "RATE_LIMITED"), ("ok", "")]
    assert succeeded(steered, trajectory)
    before = next(o for o in refund.world.initial_state["orders"] if o["id"] == refund.target.arguments["order_id"])
    after = next(o for o in world.state["orders"] if o["id"] == before["id"])  # refunded once, by the retry
    assert after["refunded_cents"] == before["refunded_cents"] + refund.target.arguments["amount_cents"]


def test_anchors_on_every_call_fail_each_retry_and_the_episode(refund):
    steered = replace(refund, steering={"refund_order": TRANSIENT})
    trajectory, world = run_episode(retrying, steered, SIMULATOR)
    assert statuses(trajectory) == [("error", "RATE_LIMITED")] * 3
    assert world.state == refund.world.initial_state and not succeeded(steered, trajectory)


def test_the_world_model_keeps_the_same_steering_call_by_call(refund):
    steered = replace(refund, steering={"refund_order#1": TRANSIENT})
    trajectory, world = run_episode(retrying, steered, WORLD_MODEL, load_backend())
    first, retry = statuses(trajectory)[:2]
    assert first == ("error", "RATE_LIMITED")  # pinned on the first call
    assert retry[0] == "ok"  # nothing pinned on the retry: the model answers the refund the state allows
    assert world.answered_by == {WORLD_MODEL: len(trajectory.steps), SIMULATOR: 0}
    assert succeeded(steered, trajectory)


def test_a_calls_anchors_win_over_those_for_every_call_of_its_tool():
    steering = {"refund_order": [Anchor("status", "ok"), Anchor("message", "Refunded.")],
                "refund_order#2": [Anchor("status", "error")]}
    assert anchors_for(steering, "refund_order", 1) == steering["refund_order"]
    assert anchors_for(steering, "refund_order", 2) == [Anchor("status", "error"), Anchor("message", "Refunded.")]
    assert anchors_for(steering, "get_order", 2) == []
    assert occurrence_of("refund_order", ["get_order", "refund_order", "get_order"]) == 2
    assert parse_steering_key("refund_order#12") == SteeringKey("refund_order", 12)
    assert str(parse_steering_key("refund_order")) == "refund_order"


def test_the_scenarios_form_reads_a_call_number_back_as_written():
    text = 'refund_order#1: status="error"\nrefund_order#1: error="RATE_LIMITED"\nget_order: status="ok"'
    steering = read_steering(text)
    assert steering == {"refund_order#1": ['status="error"', 'error="RATE_LIMITED"'], "get_order": ['status="ok"']}
    assert steering_text(steering) == text


def test_a_saved_rollout_pins_each_steps_anchors_to_that_call_of_its_tool(refund):
    def step(name: str, anchors: list[Anchor]) -> dict:
        made_by = {"anchors": [a.to_json() for a in anchors]}
        return {"call": json.dumps({"name": name, "arguments": {}}), "made_by": json.dumps(made_by)}

    steps = [step("get_order", []), step("refund_order", TRANSIENT), step("get_order", [Anchor("status", "ok")]),
             step("refund_order", [])]
    scenario = scenario_of("saved-0", refund.world, "a retried refund", steps)
    assert scenario.steering == {"refund_order#1": TRANSIENT, "get_order#2": [Anchor("status", "ok")]}
