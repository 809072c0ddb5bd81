"""The Patronus paper's prompt format: what a checkpoint fine-tuned on that corpus was trained to read.

Its user turn is `State: <the agent's messages as JSON>\\n\\nAction: <[assistant tool call] as JSON>`; a row we
write must read back (history, call, response) through the same parser that imports the paper's rows."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.patronus import patronus_chat
from wmstudio.world.spec import Call, load_world
from wmstudio.world.trajectories import chat_row_step, messages_from_steps, steps_from_messages

RETAIL = DEMO_WORLDS_DIR / "retail.json"
HISTORY = [HistoryStep(Call("list_orders", {"page": 1}), {"status": "ok", "orders": [{"order_id": "ORD-22930"}]}),
           HistoryStep(Call("get_order", {"order_id": "ORD-22930"}), "plain text answer")]
CALL = Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 1999, "reason": "damaged"})


def test_a_patronus_row_has_the_papers_user_turn_and_headings():
    row = patronus_chat(load_world(RETAIL), CALL, HISTORY, response={"status": "ok"})
    system, user, assistant = (m["content"] for m in row["messages"])
    state_text, action_text = user.split("\n\nAction: ")
    assert state_text.startswith("State: ")
    state = json.loads(state_text[len("State: "):])
    assert [m["role"] for m in state] == ["user", "assistant", "tool", "assistant", "tool"]  # the task first
    assert state[0]["content"] == load_world(RETAIL).task.strip()
    action = json.loads(action_text)
    assert action[0]["tool_calls"][0]["function"]["name"] == "refund_order"
    assert json.loads(action[0]["tool_calls"][0]["function"]["arguments"]) == CALL.arguments
    assert "- tool_name: refund_order" in system
    assert '- arguments: {"amount_cents": 1999, "order_id": "ORD-22930", "reason": "damaged"}' in system  # sorted
    assert "- validation_status: valid" in system
    assert "- refund_order(order_id, amount_cents, reason)" in system
    assert system.endswith("PREDICTION TARGET: The strict JSON tool response for the action in the user turn.")
    assert json.loads(assistant) == {"status": "ok"}


def test_a_patronus_row_reads_back_as_the_same_step():
    row = patronus_chat(load_world(RETAIL), CALL, HISTORY, response={"status": "ok"})
    history, call, response = chat_row_step(row["messages"])
    assert call == CALL
    assert [step.call for step in history] == [step.call for step in HISTORY]
    assert json.loads(history[0].response) == HISTORY[0].response and history[1].response == "plain text answer"
    assert json.loads(response) == {"status": "ok"}


def test_an_invalid_call_is_marked_invalid_with_the_reason():
    row = patronus_chat(load_world(RETAIL), Call("refund_order", {"order_id": 7}))
    system = row["messages"][0]["content"]
    assert "- validation_status: invalid" in system
    assert "order_id" in system.split("- validation_error: ")[1].splitlines()[0]


def test_messages_from_steps_is_the_inverse_of_reading_messages():
    assert steps_from_messages(messages_from_steps(HISTORY, "Refund my order"), "messages") == [
        HistoryStep(HISTORY[0].call, json.dumps(HISTORY[0].response, separators=(",", ":"))), HISTORY[1]]


def test_the_cli_prints_a_patronus_row_within_its_budget_and_says_what_was_cut(tmp_path):
    call = tmp_path / "call.json"
    call.write_text(json.dumps(CALL.to_json()))
    history = tmp_path / "history.json"
    history.write_text(json.dumps([step.to_json() for step in HISTORY] * 6))
    result = CliRunner().invoke(app, ["prompt", str(RETAIL), "--call", str(call), "--history", str(history),
                                      "--format", "patronus", "--max-chars", "2500"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    system, user = (m["content"] for m in row["messages"])
    assert len(f"{system}\n\n{user}") <= 2500
    assert user.startswith("State: [") and "\n\nAction: [" in user
    assert "note: to fit 2500 characters the prompt left out:" in result.stderr
    assert "earlier turn(s) of 12" in result.stderr


def test_an_unknown_prompt_format_names_the_known_ones(tmp_path):
    call = tmp_path / "call.json"
    call.write_text(json.dumps(CALL.to_json()))
    result = CliRunner().invoke(app, ["prompt", str(RETAIL), "--call", str(call), "--format", "paper"])
    assert result.exit_code == 2
    assert "use sections, chat or patronus" in result.stderr
