"""Grounding `none` everywhere the world model stands in for an environment: no prompt rendered for a Simulate run,
an HTTP step or a world-model episode holds a simulator's state or retrieval unless `oracle` is asked for by name.

Each path runs for real with the shipped model, after an earlier refund the simulator would replay into the state
(`refunded_cents` grows): with `none` the prompt shows the order as the initial state has it and no oracle label;
with `oracle` it shows the simulator's state, labelled as the oracle's."""

from __future__ import annotations

import json

import pytest

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.serving.backends import load_backend
from wmstudio.store import open_store
from wmstudio.store.seeding import seed_first_run
from wmstudio.store.worlds import list_worlds
from wmstudio.studio.context import StudioContext
from wmstudio.studio.simulation import run_simulation
from wmstudio.studio.world_step import read_step_request, world_step
from wmstudio.train.agent.environments import WORLD_MODEL, EpisodeWorld
from wmstudio.train.agent.scenarios import Scenario
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import ORACLE_QUERY_LABEL, ORACLE_STATE_LABEL
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def refunded():
    """A retail world, a delivered order, a refund of 100 cents answered by the simulator, and the order after it."""
    simulator = get_simulator("retail")
    world = simulator.world()
    order = next(o for o in world.initial_state["orders"] if o["status"] == "delivered")
    refund = Call("refund_order", {"order_id": order["id"], "amount_cents": 100})
    after, response = simulator.step(world.initial_state, refund)
    replayed = next(o for o in after["orders"] if o["id"] == order["id"])
    assert replayed["refunded_cents"] == order["refunded_cents"] + 100
    return world, order, replayed, [HistoryStep(refund, response)]


def assert_no_oracle(prompt: str, order: dict, replayed: dict) -> None:
    assert prompt and ORACLE_STATE_LABEL not in prompt and ORACLE_QUERY_LABEL not in prompt
    assert "oracle" not in prompt.lower()
    state_line = next(line for line in prompt.splitlines() if line.startswith("State: "))
    assert f'"id":"{order["id"]}"' in state_line and f'"refunded_cents":{order["refunded_cents"]},' in state_line
    assert f'"refunded_cents":{replayed["refunded_cents"]},' not in state_line  # the order as the initial state has it


@pytest.fixture(scope="module")
def model():
    return load_backend()


def test_a_simulate_run_reads_no_simulator_unless_oracle_is_asked_for(tmp_path_factory, refunded):
    world, order, replayed, history = refunded
    store = open_store(tmp_path_factory.mktemp("studio") / "studio.db")
    seed_first_run(store)
    ctx = StudioContext(store=store)
    world_id = next(w.latest.id for w in list_worlds(store) if w.name == "retail")
    call = Call("get_order", {"order_id": order["id"]})
    last = list(run_simulation(ctx, world_id, call, history=history))[-1]
    assert last.generation.grounding == "none" and last.generation.to_json()["grounding"] == "none"
    assert_no_oracle(last.generation.prompt, order, replayed)
    oracle = list(run_simulation(ctx, world_id, call, settings=SamplerSettings(grounding="oracle"),
                                 history=history))[-1].generation
    assert oracle.grounding == "oracle" and ORACLE_STATE_LABEL in oracle.prompt
    assert f'"refunded_cents":{replayed["refunded_cents"]}' in oracle.prompt


def test_an_http_world_step_reads_no_simulator_unless_oracle_is_asked_for(model, refunded):
    world, order, replayed, history = refunded
    body = {"world": world.to_json(), "call": {"name": "get_order", "arguments": {"order_id": order["id"]}},
            "history": [step.to_json() for step in history]}
    request = read_step_request(json.loads(json.dumps(body)), None)
    assert request.settings.grounding == "none"
    from wmstudio.model.generation.generation import generate

    generation = generate(model, request.world, request.call, request.anchors, request.history, request.settings)
    assert_no_oracle(generation.prompt, order, replayed)
    assert world_step(model, request)["grounding"] == "none"
    asked = read_step_request({**body, "sampler": {"grounding": "oracle"}}, None)
    assert world_step(model, asked)["grounding"] == "oracle"


def test_a_world_model_episode_reads_only_what_the_world_model_answered(model, refunded):
    world, order, replayed, history = refunded
    scenario = Scenario(id="refund-then-look", split="heldout", world=world,
                        task="Refund 100 cents, then look at the order.")
    episode = EpisodeWorld(scenario, WORLD_MODEL, model)
    episode.answer(history[0].call)
    episode.answer(Call("get_order", {"order_id": order["id"]}))
    assert len(episode.prompts) == 2
    for prompt in episode.prompts:
        assert_no_oracle(prompt, order, replayed)
    assert episode.history[0].response in episode.prompts[1]  # the world model's own answer, not the simulator's
    assert episode.state != world.initial_state  # the simulator still steps along, as the ground truth
