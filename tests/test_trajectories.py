"""Histories read from the trajectory files people have: OpenAI messages, tau-bench records, Patronus chat rows.

Every file is built here; the CLI's `history import` and every `--history` option read the same shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.world.trajectories import read_history_file


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def messages() -> list[dict]:
    """A tau-bench style conversation: two calls in one assistant turn, answered out of order."""
    return [
        {"role": "system", "content": "# Retail agent policy"},
        {"role": "user", "content": "Where is my order?"},
        {"role": "assistant", "content": None,
         "tool_calls": [tool_call("call_1", "find_user_id_by_email", {"email": "mia@example.com"})]},
        {"role": "tool", "tool_call_id": "call_1", "name": "find_user_id_by_email", "content": "mia_moore_8366"},
        {"role": "assistant", "content": None,
         "tool_calls": [tool_call("call_2", "get_order_details", {"order_id": "#W100"}),
                        tool_call("call_3", "get_user_details", {"user_id": "mia_moore_8366"})]},
        {"role": "tool", "tool_call_id": "call_3", "content": '{"name": "Mia"}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"status": "pending", "total": 100}'},
        {"role": "assistant", "content": "Your order is pending."},
    ]


EXPECTED = [
    {"call": {"name": "find_user_id_by_email", "arguments": {"email": "mia@example.com"}},
     "response": "mia_moore_8366"},
    {"call": {"name": "get_order_details", "arguments": {"order_id": "#W100"}},
     "response": '{"status": "pending", "total": 100}'},
    {"call": {"name": "get_user_details", "arguments": {"user_id": "mia_moore_8366"}}, "response": '{"name": "Mia"}'},
]


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def history_import(*args: str):
    return CliRunner().invoke(app, ["history", "import", *args])


def test_an_openai_message_list_pairs_each_call_with_its_tool_message(tmp_path):
    result = history_import(str(write(tmp_path / "history.json", messages())))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == EXPECTED


def test_tau_bench_results_take_the_record_chosen_with_index(tmp_path):
    records = [{"task_id": i, "reward": 1.0, "info": {}, "traj": messages()[: 4 + 3 * i], "trial": 0}
               for i in range(2)]
    path = write(tmp_path / "gpt-4o-retail.json", records)
    first = history_import(str(path), "--index", "0")
    assert first.exit_code == 0 and json.loads(first.stdout) == EXPECTED[:1]
    second = history_import(str(path), "--index", "1")
    assert second.exit_code == 0 and json.loads(second.stdout) == EXPECTED
    unchosen = history_import(str(path))
    assert unchosen.exit_code == 2
    assert "gpt-4o-retail.json: the file holds 2 trajectories: pick one with --index N (0 to 1)" in unchosen.stderr
    past = history_import(str(path), "--index", "5")
    assert past.exit_code == 2 and "--index 5: the file holds 2 trajectories (0 to 1)" in past.stderr


def test_a_patronus_state_row_yields_the_steps_of_its_state(tmp_path):
    action = [{"role": "assistant", "content": "", "tool_calls": [tool_call("call_9", "get_order_details", {})]}]
    row = {"messages": [
        {"role": "system", "content": "## ENVIRONMENT STATE ..."},
        {"role": "user", "content": f"State: {json.dumps(messages())}\n\nAction: {json.dumps(action)}"},
        {"role": "assistant", "content": '{"status": "pending"}'}]}
    assert [s.to_json() for s in read_history_file(write(tmp_path / "row.json", row))] == EXPECTED
    rows = write(tmp_path / "rows.jsonl", json.dumps(row) + "\n" + json.dumps(row) + "\n")
    result = history_import(str(rows), "--index", "1")
    assert result.exit_code == 0 and json.loads(result.stdout) == EXPECTED


def test_our_own_steps_and_appworld_text_calls_are_read_too(tmp_path):
    assert [s.to_json() for s in read_history_file(write(tmp_path / "steps.json", EXPECTED))] == EXPECTED
    appworld = [{"role": "user", "content": "Play my liked songs."},
                {"role": "assistant", "content": '[{"name": "spotify__login", "parameters": {"username": "a"}}]'},
                {"role": "user", "content": '<tool_response>\n{"access_token": "t"}\n</tool_response>'}]
    steps = read_history_file(write(tmp_path / "appworld.json", appworld))
    assert [s.to_json() for s in steps] == [{"call": {"name": "spotify__login", "arguments": {"username": "a"}},
                                             "response": '{"access_token": "t"}'}]


def test_every_history_option_reads_the_same_formats(tmp_path):
    world = write(tmp_path / "world.json", {"name": "shop", "tools": [
        {"type": "function", "function": {"name": "get_order_details", "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string"}}}}}],
        "rules": [{"text": "the order seen earlier is pending",
                   "check": 'history.exists(s, s.call.name == "get_order_details" && s.response.total == 100)'}]})
    call = write(tmp_path / "call.json", {"name": "get_order_details", "arguments": {"order_id": "#W100"}})
    response = write(tmp_path / "response.json", '{"status": "pending"}')
    result = CliRunner().invoke(app, ["check", str(world), "--call", str(call), "--response", str(response),
                                      "--history", str(write(tmp_path / "history.json", messages()))])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_a_call_without_its_tool_message_names_the_file_and_the_call(tmp_path):
    path = write(tmp_path / "history.json", messages()[:6])
    result = history_import(str(path))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {path}: messages[4].tool_calls[0]: call `get_order_details` "
                                    "(id 'call_2') has no `tool` message answering it")
    assert "add its response, or end the history before this call" in result.stderr
    assert "get_user_details" not in result.stderr  # call_3 was answered


def test_unknown_shapes_and_repeated_problems_get_one_message_with_the_file_name(tmp_path):
    odd = write(tmp_path / "odd.json", {"foo": 1, "bar": []})
    result = history_import(str(odd))
    assert result.exit_code == 2
    assert f"{odd}: not a history (foo, bar): give a list of steps" in result.stderr
    assert "an OpenAI message list" in result.stderr
    orphans = write(tmp_path / "orphans.json", [{"role": "tool", "tool_call_id": "zz", "content": "x"}] * 31)
    result = history_import(str(orphans))
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"{orphans}: 31 places (messages[0], messages[1], messages[2], …): tool_call_id 'zz' answers no " \
           "earlier call" in result.stderr
    steps = write(tmp_path / "steps.json", [{"call": {"name": "f"}}] * 31)
    with pytest.raises(InvalidInput) as err:
        read_history_file(steps)
    assert str(err.value) == f"{steps}: 31 places (history[0], history[1], history[2], …): missing response: a " \
                             "step needs both call and response"
    bad_json = write(tmp_path / "broken.json", '[{"role": "user",')
    result = history_import(str(bad_json))
    assert result.exit_code == 2 and f"{bad_json}:1:" in result.stderr and "invalid JSON" in result.stderr
