"""A trained agent policy proposes a rollout's next call: the shipped SFT policy on a real retail world in a real
store copies the order id of the task whole, then says Done once the world answered the cancel ok.

Also which policies are offered (the shipped one, then finished runs'), the policy cache, and each bad input
named by its field."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.problems import InvalidInput
from wmstudio.store import MadeBy, append_step, create_rollout, create_run, open_store, save_world_version
from wmstudio.studio import policy_proposals
from wmstudio.studio.policy_proposals import SHIPPED_POLICY, policy_choices, propose_next_call
from wmstudio.train.agent.jobs import demo_curriculum
from wmstudio.train.agent.run_files import POLICY_DIR, run_folder
from wmstudio.ui.rollouts_tab import propose_call
from wmstudio.world.checks.report import check_step
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world

RETAIL = load_world(DEMO_WORLDS_DIR / "retail.json")
CANCELLABLE = next(o["id"] for o in RETAIL.initial_state["orders"] if o["status"] in ("pending", "processing"))
TASK = f"The customer wants to cancel order {CANCELLABLE}."


@pytest.fixture
def store(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))  # run folders live here
    return open_store(tmp_path / "studio.db")


@pytest.fixture
def rollout(store) -> int:
    """An empty rollout in the retail world saved with the cancel task as its own."""
    saved = save_world_version(store, dataclasses.replace(RETAIL, task=TASK))
    return create_rollout(store, saved.id, "cancel").id


def answer_truly(store, rollout_id: int, call: Call) -> dict:
    """Append `call` answered by the retail simulator (from the initial state) as a step; the answer."""
    _, truth = get_simulator("retail").step(RETAIL.initial_state, call)
    text = json.dumps(truth)
    append_step(store, rollout_id, call, text, MadeBy.by_hand("tester"), check_step(RETAIL, call, text))
    return truth


def test_the_shipped_policy_cancels_the_tasks_order_then_says_done(store, rollout):
    proposal = propose_next_call(store, rollout, str(SHIPPED_POLICY), "")
    assert proposal.task == TASK  # no typed task: the world's own
    assert proposal.call == Call("cancel_order", {"order_id": CANCELLABLE})  # the id copied whole
    assert json.loads(proposal.call_text) == {"name": "cancel_order", "arguments": {"order_id": CANCELLABLE}}
    assert proposal.final_answer == ""

    assert answer_truly(store, rollout, proposal.call)["status"] == "ok"
    done = propose_next_call(store, rollout, str(SHIPPED_POLICY), None)
    assert done.call is None and done.call_text == ""
    assert done.final_answer.startswith("Done")


def test_a_typed_task_replaces_the_worlds(store, rollout):
    other = next(o["id"] for o in RETAIL.initial_state["orders"] if o["id"] != CANCELLABLE)
    typed = f"The customer wants to cancel order {other}."
    proposal = propose_next_call(store, rollout, str(SHIPPED_POLICY), f"  {typed} ")
    assert proposal.task == typed
    assert proposal.call == Call("cancel_order", {"order_id": other})


def test_the_tab_fills_the_call_box_or_says_the_final_answer(store, rollout):
    text, message = propose_call(store, rollout, str(SHIPPED_POLICY), "")
    assert json.loads(text)["arguments"] == {"order_id": CANCELLABLE}
    assert "cancel_order" in message and "Generate and append" in message
    answer_truly(store, rollout, Call("cancel_order", {"order_id": CANCELLABLE}))
    text, message = propose_call(store, float(rollout), str(SHIPPED_POLICY), "")  # gr.Number gives floats
    assert text is None and "Done" in message


def test_the_shipped_policy_then_finished_runs_are_offered(store, rollout):
    assert policy_choices(store) == [("agent-small · shipped SFT policy", str(SHIPPED_POLICY))]
    curriculum = demo_curriculum(store)
    trained = create_run(store, curriculum.id, {"curriculum": "demo", "env": "world-model", "max_steps": 2})
    create_run(store, curriculum.id, {"curriculum": "demo", "env": "simulator", "max_steps": 2})  # no policy yet
    folder = run_folder(trained.id, store.path) / POLICY_DIR
    shutil.copytree(SHIPPED_POLICY, folder)  # what a finished run leaves
    choices = policy_choices(store)
    assert choices == [("agent-small · shipped SFT policy", str(SHIPPED_POLICY)),
                       (f"run #{trained.id} · world-model · GRPO", str(folder))]
    assert propose_next_call(store, rollout, choices[1][1], "").call.name == "cancel_order"


def test_a_policy_loads_once(store, rollout, monkeypatch):
    loads = []
    real = policy_proposals.load_policy
    monkeypatch.setattr(policy_proposals, "_LOADED", {})
    monkeypatch.setattr(policy_proposals, "load_policy", lambda path: loads.append(path) or real(path))
    for _ in range(3):
        propose_next_call(store, rollout, str(SHIPPED_POLICY), "")
    assert loads == [SHIPPED_POLICY.resolve()]


def field_of(err: pytest.ExceptionInfo[InvalidInput]) -> str:
    return err.value.problems[0].path


def test_bad_input_names_the_field_and_the_fix(store, rollout, tmp_path):
    with pytest.raises(InvalidInput) as err:
        propose_next_call(store, None, str(SHIPPED_POLICY), TASK)
    assert field_of(err) == "rollout" and "open a rollout" in str(err.value)
    with pytest.raises(InvalidInput) as err:
        propose_call(store, None, str(SHIPPED_POLICY), TASK)
    assert field_of(err) == "rollout"
    with pytest.raises(InvalidInput):
        propose_next_call(store, rollout + 100, str(SHIPPED_POLICY), TASK)  # no such rollout
    for empty in (None, "", "  "):
        with pytest.raises(InvalidInput) as err:
            propose_next_call(store, rollout, empty, TASK)
        assert field_of(err) == "policy" and "choose a policy" in str(err.value)
    (tmp_path / "not-a-policy").mkdir()
    with pytest.raises(InvalidInput) as err:
        propose_next_call(store, rollout, str(tmp_path / "not-a-policy"), TASK)
    assert field_of(err) == "policy" and "policy.json" in str(err.value)

    taskless = save_world_version(store, dataclasses.replace(RETAIL, name="retail-taskless", task=""))
    bare = create_rollout(store, taskless.id, "no task").id
    with pytest.raises(InvalidInput) as err:
        propose_next_call(store, bare, str(SHIPPED_POLICY), "   ")
    assert field_of(err) == "task" and "type the task" in str(err.value)
    assert propose_next_call(store, bare, str(SHIPPED_POLICY), TASK).call.name == "cancel_order"
