"""World-model prompts: section order, grounding on/off, computed state, chat rows, history truncation, CLI."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.world.history import HistoryStep, parse_history
from wmstudio.world.prompt import SECTION_HEADERS, omitted_marker, render_chat, render_prompt, tool_schema_line
from wmstudio.world.spec import Call, parse_world

TASK = "Refund order A1 for the customer; she was charged twice."
RULE = "an error status means no refund was processed"
DIRECTIVE = "Make the refund fail with a payment-provider error."


def shop_world() -> dict:
    return {
        "name": "shop",
        "initial_state": {"orders": {"A1": {"total": 30.0, "status": "delivered"}}, "balance": 12},
        "task": TASK,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "refund_order",
                    "description": "Refund an order in full.",
                    "parameters": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                        "required": ["order_id"],
                    },
                    "response": {
                        "type": "object",
                        "properties": {
                            "status": {"type": "string", "enum": ["ok", "error"]},
                            "refund_processed": {"type": "boolean"},
                        },
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_order",
                    "description": "Look up an order.",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                },
            },
        ],
        "rules": [{"text": RULE, "check": 'response.status != "error" || response.refund_processed == false'}],
        "directives": [DIRECTIVE],
    }


CALL = Call("refund_order", {"order_id": "A1"})


def long_history(turns: int = 40) -> list[HistoryStep]:
    return [
        HistoryStep(
            call=Call("get_order", {"order_id": f"A{i}"}),
            response={"order_id": f"A{i}", "total": i * 1.5, "note": f"turn-{i}-" + "x" * 60},
        )
        for i in range(1, turns + 1)
    ]


def headers_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_sections_come_in_the_published_order_and_end_with_the_prediction_target():
    world = parse_world(shop_world())
    text = render_prompt(world, CALL, computed_state={"refundable_amount": 30.0})
    assert headers_in(text) == list(SECTION_HEADERS)
    last = text.splitlines()[-1]
    assert last.startswith("PREDICTION TARGET:") and "`refund_order`" in last
    assert TASK in text and RULE in text and DIRECTIVE in text
    assert 'Action: {"name":"refund_order","arguments":{"order_id":"A1"}}' in text


def test_environment_state_and_tool_schemas_are_compact_json_in_the_worlds_key_order():
    data = shop_world()
    data["initial_state"] = {"zeta": 1, "alpha": {"b": 2, "a": 1}}
    world = parse_world(data)
    text = render_prompt(world, CALL)
    state_body = text.split("## ENVIRONMENT STATE\n", 1)[1].split("\n\n", 1)[0]
    assert state_body == '{"zeta":1,"alpha":{"b":2,"a":1}}'
    schema_lines = text.split("## TOOL SCHEMAS\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(schema_lines) == len(world.tools)
    for line, tool in zip(schema_lines, world.tools, strict=True):
        entry = json.loads(line)
        assert list(entry)[:3] == ["name", "description", "parameters"]
        assert entry["name"] == tool.name and entry["parameters"] == tool.parameters
        assert entry.get("response") == tool.response
        assert ": " not in line and ", " not in line.replace("Refund an order in full.", "")


def test_text_state_is_shown_as_written():
    data = shop_world()
    data["initial_state"] = "A small shop with one delivered order, A1."
    text = render_prompt(parse_world(data), CALL)
    assert "## ENVIRONMENT STATE\nA small shop with one delivered order, A1.\n\n" in text


def test_without_grounding_the_rules_computed_state_and_directives_are_left_out():
    world = parse_world(shop_world())
    text = render_prompt(world, CALL, grounding=False, computed_state={"refundable_amount": 30.0})
    assert headers_in(text) == ["## ENVIRONMENT STATE", "## TASK CONTEXT", "## TOOL SCHEMAS"]
    assert RULE not in text and DIRECTIVE not in text and "refundable_amount" not in text
    assert text.splitlines()[-1].startswith("PREDICTION TARGET:")


def test_computed_query_state_appears_only_when_given_between_rules_and_directives():
    world = parse_world(shop_world())
    plain = render_prompt(world, CALL)
    assert "## COMPUTED QUERY STATE" not in plain
    text = render_prompt(world, CALL, computed_state={"refundable_amount": 30.0})
    rules_at, computed_at, directives_at = (text.index(h) for h in SECTION_HEADERS[3:6])
    assert rules_at < computed_at < directives_at
    assert '## COMPUTED QUERY STATE\n{"refundable_amount":30.0}' in text


def test_empty_rules_and_directives_still_show_their_sections():
    data = shop_world()
    data["rules"], data["directives"] = [], []
    text = render_prompt(parse_world(data), CALL)
    assert "## DOMAIN RULES\nNone." in text and "## STEERING DIRECTIVES\nNone." in text


def test_rendering_is_deterministic():
    first = render_prompt(parse_world(shop_world()), CALL, long_history(5), max_chars=2000)
    second = render_prompt(parse_world(shop_world()), Call.from_json(CALL.to_json()), long_history(5), max_chars=2000)
    assert first == second


def test_history_turns_are_numbered_and_text_responses_kept_as_written():
    history = parse_history([
        {"call": {"name": "get_order", "arguments": {"order_id": "A1"}}, "response": {"total": 30.0}},
        {"call": {"name": "get_order", "arguments": {"order_id": "B7"}}, "response": "Error 404: order B7 not found"},
    ])
    text = render_prompt(parse_world(shop_world()), CALL, history)
    assert 'Turn 1 action: {"name":"get_order","arguments":{"order_id":"A1"}}\nTurn 1 response: {"total":30.0}' in text
    assert "Turn 2 response: Error 404: order B7 not found" in text
    assert text.index("Turn 2 response") < text.index("Action: {")
    empty = render_prompt(parse_world(shop_world()), CALL)
    assert "State: start of the episode (no earlier actions)" in empty


def test_a_call_to_a_tool_the_world_lacks_asks_for_the_environments_answer():
    text = render_prompt(parse_world(shop_world()), Call("delete_everything"))
    assert "`delete_everything`" in text.splitlines()[-1] and "not among the TOOL SCHEMAS" in text


def test_chat_row_has_sections_in_system_and_state_action_in_user():
    world = parse_world(shop_world())
    history = long_history(2)
    row = render_chat(world, CALL, history, response={"status": "error", "refund_processed": False})
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant"]
    system, user, assistant = (m["content"] for m in row["messages"])
    assert headers_in(system) == [h for h in SECTION_HEADERS if h != "## COMPUTED QUERY STATE"]
    assert TASK in system and "Turn 1" not in system and system.splitlines()[-1].startswith("PREDICTION TARGET:")
    assert user.startswith("State:\nTurn 1 action: ")
    assert user.endswith('\n\nAction: {"name":"refund_order","arguments":{"order_id":"A1"}}')
    assert assistant == '{"status":"error","refund_processed":false}'
    without = render_chat(world, CALL, history)
    assert [m["role"] for m in without["messages"]] == ["system", "user"]
    assert render_chat(world, CALL, response="not json at all")["messages"][2]["content"] == "not json at all"


def test_chat_row_without_grounding_keeps_only_state_task_and_tools():
    row = render_chat(parse_world(shop_world()), CALL, grounding=False)
    assert headers_in(row["messages"][0]["content"]) == ["## ENVIRONMENT STATE", "## TASK CONTEXT", "## TOOL SCHEMAS"]


def marker_count(text: str) -> int:
    found = re.findall(r"\[\.\.\. ([\d,]+) characters of earlier history omitted \.\.\.\]", text)
    assert len(found) == 1, "exactly one marker line"
    return int(found[0].replace(",", ""))


@pytest.mark.parametrize("max_chars", [1600, 2500, 4000])
def test_long_history_is_middle_truncated_within_budget(max_chars):
    world = parse_world(shop_world())
    history = long_history(40)
    full = render_prompt(world, CALL, history)
    assert len(full) > max_chars
    text = render_prompt(world, CALL, history, max_chars=max_chars)
    assert len(text) <= max_chars
    assert TASK in text
    assert "turn-40-" in text and "Turn 40 action" in text, "the newest turn is kept whole"
    assert "turn-1-" not in text, "the oldest turns go first"
    count = marker_count(text)
    marker = omitted_marker(count)
    # the marker line (plus its newline) stands exactly for the characters that were cut
    assert len(full) - count + len(marker) + 1 == len(text)
    assert text.endswith(full[-(len(text) - text.index(marker) - len(marker) - 1):])


def test_a_single_turn_longer_than_the_budget_keeps_its_end():
    world = parse_world(shop_world())
    history = [HistoryStep(Call("get_order"), "log line\n" * 300 + "LAST LINE")]
    full = render_prompt(world, CALL, history)
    text = render_prompt(world, CALL, history, max_chars=2000)
    assert len(text) <= 2000 and "LAST LINE" in text and TASK in text
    count = marker_count(text)
    assert len(full) - count + len(omitted_marker(count)) + 1 == len(text)


def test_history_that_fits_is_not_touched():
    world = parse_world(shop_world())
    full = render_prompt(world, CALL, long_history(3))
    assert render_prompt(world, CALL, long_history(3), max_chars=len(full)) == full
    assert "omitted" not in full


def test_chat_row_truncation_counts_system_and_user_text():
    world = parse_world(shop_world())
    row = render_chat(world, CALL, long_history(40), max_chars=2500, response="{}")
    system, user, _ = (m["content"] for m in row["messages"])
    assert len(system) + len(user) <= 2500
    assert TASK in system and "Turn 40 action" in user
    marker_count(user)


def test_schemas_and_call_are_never_cut_even_over_budget():
    world = parse_world(shop_world())
    text = render_prompt(world, CALL, long_history(10), max_chars=200)
    assert len(text) > 200, "documented: the non-history parts are rendered whole"
    assert "## TOOL SCHEMAS" in text and '"name":"get_order"' in text
    assert 'Action: {"name":"refund_order","arguments":{"order_id":"A1"}}' in text
    assert "Turn 1 action" not in text and marker_count(text) > 0


def test_bad_history_is_reported_with_its_path():
    world = parse_world(shop_world())
    history = [step.to_json() for step in long_history(2)]
    history += [{"call": {"arguments": {}}, "response": "x"}, {"call": CALL.to_json()}]
    with pytest.raises(InvalidInput) as err:
        parse_history(history)  # histories are parsed once, where they come in (CLI, UI, API)
    paths = [p.path for p in err.value.problems]
    assert paths == ["history[2].call.name", "history[3]"]
    assert "response" in err.value.problems[1].message
    with pytest.raises(InvalidInput, match="history: must be a list"):
        parse_history({"call": CALL.to_json()})
    with pytest.raises(InvalidInput, match="call.name"):
        Call.from_json({"arguments": {}}, "call")
    with pytest.raises(InvalidInput, match="max_chars"):
        render_prompt(world, CALL, max_chars=0)


def write(path, data) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_cli_prompt_prints_the_sections_format_and_the_chat_row(tmp_path):
    world = write(tmp_path / "world.json", shop_world())
    call = write(tmp_path / "call.json", CALL.to_json())
    history = write(tmp_path / "history.json", [step.to_json() for step in long_history(30)])
    runner = CliRunner()
    result = runner.invoke(app, ["prompt", world, "--call", call, "--history", history, "--max-chars", "2000"])
    assert result.exit_code == 0, result.output
    expected = render_prompt(parse_world(shop_world()), CALL, long_history(30), max_chars=2000)
    assert result.stdout.rstrip("\n") == expected
    result = runner.invoke(app, ["prompt", world, "--call", call, "--format", "chat"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert [m["role"] for m in row["messages"]] == ["system", "user"]


def test_cli_prompt_reports_bad_input_with_exit_code_2(tmp_path):
    world = write(tmp_path / "world.json", shop_world())
    call = write(tmp_path / "call.json", CALL.to_json())
    bad_history = write(tmp_path / "history.json", [{"call": {"name": 3}, "response": "x"}])
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "refund_order", "arguments": {', encoding="utf-8")
    runner = CliRunner()
    cases = [
        (["prompt", world, "--call", call, "--history", bad_history], "history[0].call.name"),
        (["prompt", world, "--call", str(broken)], "invalid JSON"),
        (["prompt", world, "--call", str(tmp_path / "absent.json")], "no such file"),
        (["prompt", world, "--call", call, "--format", "yaml"], "sections or chat"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr and "Traceback" not in result.output


def test_over_budget_prompts_shrink_other_tools_to_summaries_but_keep_the_called_schema():
    from wmstudio.locations import DEMO_WORLDS_DIR
    from wmstudio.world.spec import load_world

    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    called = world.tools[2]
    call = Call(called.name)
    full = render_prompt(world, call)
    budgeted = render_prompt(world, call, max_chars=4000)
    assert len(budgeted) < len(full)
    assert tool_schema_line(called) in budgeted  # the called tool keeps parameters and response
    for other in world.tools:
        if other is not called:
            assert tool_schema_line(other) not in budgeted
            assert f'{{"name":"{other.name}","description":' in budgeted
    assert "## ENVIRONMENT STATE" in budgeted and '"Action' not in budgeted
    chat = render_chat(world, call, max_chars=4000)
    assert tool_schema_line(called) in chat["messages"][0]["content"]
    assert render_prompt(world, call, max_chars=len(full)) == full  # within budget: nothing shrinks
