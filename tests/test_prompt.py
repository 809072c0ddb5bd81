"""World-model prompts: section order, grounding none/oracle, computed state, chat rows, history truncation, CLI."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.problems import InvalidInput
from wmstudio.world.history import HistoryStep, parse_history
from wmstudio.world.prompt.render import (
    SECTION_HEADERS,
    PromptBudget,
    render,
    render_chat,
    render_prompt,
    tool_schema_line,
)
from wmstudio.world.spec import Call, load_world, parse_world

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


def section(text: str, header: str) -> str:
    return text.split(header + "\n", 1)[1].split("\n\n##", 1)[0]


def test_sections_come_in_the_published_order_with_the_call_first_and_end_with_the_target():
    world = parse_world(shop_world())
    text = render_prompt(world, CALL, computed_state={"refundable_amount": 30.0})
    assert headers_in(text) == list(SECTION_HEADERS)
    lines = text.splitlines()
    assert lines[1] == 'Active tool call: {"name":"refund_order","arguments":{"order_id":"A1"}}'
    assert lines[2] == "Validation: valid"
    assert lines[-1].startswith("PREDICTION TARGET:") and "`refund_order`" in lines[-1]
    assert TASK in text and RULE in text and DIRECTIVE in text


def test_the_validation_line_names_arguments_that_break_the_parameters():
    text = render_prompt(parse_world(shop_world()), Call("refund_order", {"order_id": 7}))
    assert "Validation: invalid (arguments.order_id: 7 is not of type 'string')" in text
    assert "Validation: invalid (no tool named 'fly')" in render_prompt(parse_world(shop_world()), Call("fly"))


def test_the_state_is_call_local_compact_json_and_says_how_much_it_left_out():
    data = shop_world()
    data["initial_state"] = {"today": "2025-03-01", "orders": [
        {"id": f"A{i}", "total": 10 + i, "items": [{"sku": "S1"}, {"sku": "S2"}]} for i in range(1, 8)]}
    text = render_prompt(parse_world(data), CALL)
    state = json.loads(section(text, "## ENVIRONMENT STATE").splitlines()[2].removeprefix("State: "))
    assert state == {"today": "2025-03-01", "orders": [
        {"id": "A1", "total": 11, "items": [{"sku": "S1"}, {"sku": "S2"}]}, "… 6 more"]}
    rendered = render(parse_world(data), CALL, history=[HistoryStep(Call("get_order", {"order_id": "A5"}), "{}")])
    assert [o["id"] for o in rendered.shown.state["orders"][:-1]] == ["A1", "A5"]  # the turns' ids count too


def test_text_state_is_shown_as_written():
    data = shop_world()
    data["initial_state"] = "A small shop with one delivered order, A1."
    text = render_prompt(parse_world(data), CALL)
    assert "\nState: A small shop with one delivered order, A1.\n" in text


def _refunded_world():
    from wmstudio.world.simulators import get_simulator

    simulator = get_simulator("retail")
    world = simulator.world()
    order = next(o for o in world.initial_state["orders"] if o["status"] == "delivered")
    refund = Call("refund_order", {"order_id": order["id"], "amount_cents": 100})
    _, response = simulator.step(world.initial_state, refund)
    return world, order, [HistoryStep(refund, response)]


def test_grounding_oracle_shows_the_simulators_state_after_the_turns_and_its_listing_query_labelled_so():
    world, order, history = _refunded_world()
    rendered = render(world, Call("get_order", {"order_id": order["id"]}), history, grounding="oracle")
    assert "State (oracle: the simulator's state now, after the earlier turns):" in rendered.text
    shown = next(o for o in rendered.shown.state["orders"] if isinstance(o, dict))
    assert shown["refunded_cents"] == order["refunded_cents"] + 100  # the refund of turn 1 is in the state now
    listing = render(world, Call("list_orders", {"status": "delivered"}), grounding="oracle")
    assert listing.shown.query["orders_matching"] == sum(o["status"] == "delivered"
                                                         for o in world.initial_state["orders"])
    assert "## COMPUTED QUERY STATE\nOracle (the simulator's retrieval for this call): {" in listing.text


def test_grounding_none_by_default_shows_only_the_initial_state_and_the_history():
    world, order, history = _refunded_world()
    rendered = render(world, Call("get_order", {"order_id": order["id"]}), history)
    assert "oracle" not in rendered.text.lower() and "\nState: {" in rendered.text
    shown = next(o for o in rendered.shown.state["orders"] if isinstance(o, dict))
    assert shown == order  # the initial record: the refund is in the history, not in the state shown
    listing = render(world, Call("list_orders", {"status": "delivered"}))  # found in the initial state, no oracle
    assert "## COMPUTED QUERY STATE\nFound in the initial state (the records the call's arguments match):" \
        in listing.text and listing.shown.query["matching"] == sum(o["status"] == "delivered"
                                                                   for o in world.initial_state["orders"])
    assert render(world, Call("list_orders", {"status": "delivered"}), grounding="none").text == listing.text


def test_an_unknown_grounding_is_refused_at_the_door_naming_the_setting(tmp_path):
    """Grounding is read from outside once (the sampler settings, `wmstudio prompt --grounding`); inside, functions
    take a Grounding."""
    from typer.testing import CliRunner

    from wmstudio.cli import app
    from wmstudio.model.denoising.sampler_settings import SamplerSettings

    with pytest.raises(InvalidInput, match="grounding: 'hindsight' is not known: use one of none, oracle"):
        SamplerSettings(grounding="hindsight")
    (tmp_path / "w.json").write_text(json.dumps(shop_world()))
    (tmp_path / "c.json").write_text(json.dumps(CALL.to_json()))
    refused = CliRunner().invoke(app, ["prompt", str(tmp_path / "w.json"), "--call", str(tmp_path / "c.json"),
                                       "--grounding", "hindsight"])
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", re.sub(r"\x1b\[[0-9;]*m", "", refused.stderr)).split())  # rich's
    # colours and box, as a terminal in CI may draw them
    assert refused.exit_code == 2 and "--grounding" in said and "'hindsight' is not one of" in said, said


def test_computed_query_state_appears_only_when_given_between_rules_and_directives():
    world = parse_world(shop_world())
    assert "## COMPUTED QUERY STATE" not in render_prompt(world, CALL)
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
    assert "History: start of the episode (no earlier actions)" in render_prompt(parse_world(shop_world()), CALL)


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
    assert user.startswith("State: History:\nTurn 1 action: ")
    assert user.endswith('\n\nAction: {"name":"refund_order","arguments":{"order_id":"A1"}}')
    assert assistant == '{"status":"error","refund_processed":false}'
    assert [m["role"] for m in render_chat(world, CALL, history)["messages"]] == ["system", "user"]
    assert render_chat(world, CALL, response="not json at all")["messages"][2]["content"] == "not json at all"


@pytest.mark.parametrize("max_chars", [1600, 2500, 4000])
def test_a_long_history_keeps_the_newest_whole_turns_within_budget_and_says_what_was_cut(max_chars):
    world = parse_world(shop_world())
    history = long_history(40)
    rendered = render(world, CALL, history, PromptBudget(max_chars))
    assert len(rendered.text) <= max_chars
    assert "Turn 40 action" in rendered.text and "turn-40-" in rendered.text, "the newest turn is kept whole"
    assert "Turn 1 action" not in rendered.text, "the oldest turns go first"
    kept = [number for number, _ in rendered.shown.turns]
    assert kept == list(range(41 - len(kept), 41)) and kept
    assert f"History ({40 - len(kept)} earlier turn(s) not shown):" in rendered.text
    assert f"{40 - len(kept)} earlier turn(s) of 40" in rendered.cut


def test_a_budget_counts_in_any_unit_and_the_state_outranks_old_turns():
    world = parse_world(shop_world())
    words = PromptBudget(260, lambda text: len(text.split()))
    rendered = render(world, CALL, long_history(40), words)
    assert len(rendered.text.split()) <= 260
    assert rendered.shown.state is not None and "State:" in rendered.text


def test_history_that_fits_is_not_touched():
    world = parse_world(shop_world())
    full = render(world, CALL, long_history(3))
    within = render(world, CALL, long_history(3), budget=PromptBudget(len(full.text)))
    assert within.text == full.text and within.cut == []


def test_chat_row_budget_counts_system_and_user_text():
    world = parse_world(shop_world())
    row = render_chat(world, CALL, long_history(40), max_chars=2500, response="{}")
    system, user, _ = (m["content"] for m in row["messages"])
    assert len(system) + len(user) + 2 <= 2500
    assert "Turn 40 action" in user and "Turn 1 action" not in user


def test_the_call_and_the_called_tool_are_never_cut_even_over_budget():
    world = parse_world(shop_world())
    rendered = render(world, CALL, long_history(10), PromptBudget(200))
    assert len(rendered.text) > 200, "documented: the call, its validation, the called tool and the target stay"
    assert '"name":"refund_order"' in rendered.text and "Active tool call:" in rendered.text
    assert "Turn 1 action" not in rendered.text and "descriptions inside the called tool's schema" in rendered.cut


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
    assert result.stdout.rstrip("\n") == expected and len(expected) <= 2000
    assert "note: to fit 2000 characters the prompt left out" in result.stderr and "earlier turn(s)" in result.stderr
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
        (["prompt", world, "--call", call, "--format", "yaml"], "sections, chat or patronus"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr and "Traceback" not in result.output


def test_over_budget_prompts_name_the_other_tools_but_keep_the_called_schema():
    from wmstudio.locations import DEMO_WORLDS_DIR
    from wmstudio.world.spec import load_world

    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    called = world.tools[2]
    call = Call(called.name)
    full = render(world, call)
    assert tool_schema_line(called) in full.text and "- get_order: Look up one order" in full.text
    descriptions = "\n".join(f"- {t.name}: {t.description}" for t in world.tools if t is not called)
    names = "Other tools: get_order, list_orders, cancel_order"
    budgeted = render(world, call, budget=PromptBudget(len(full.text) - len(descriptions) + len(names)))
    assert tool_schema_line(called) in budgeted.text  # the called tool keeps parameters and response
    assert "Other tools: get_order, list_orders, cancel_order" in budgeted.text
    assert "the other tools' descriptions" in budgeted.cut


def test_a_budget_smaller_than_the_call_and_its_tool_says_so():
    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    rendered = render(world, Call("get_order", {"order_id": "ORD-1"}), budget=PromptBudget(300))
    assert len(rendered.text) > 300  # the call and the called tool are always shown
    assert rendered.cut[-1].startswith("nothing more: the call, its validation and the called tool alone take")
    assert "over the budget of 300" in rendered.cut[-1]


def test_a_booking_lookup_shows_the_booked_flight_and_its_references_give_way_first_to_a_budget():
    from wmstudio.world.simulators import get_simulator

    world = get_simulator("airline").world()
    booking = world.initial_state["bookings"][0]
    call = Call("get_booking", {"booking_id": booking["booking_id"]})
    whole = render(world, call)
    flights = [f for f in whole.shown.state["flights"] if isinstance(f, dict)]
    assert [f["flight"] for f in flights] == [booking["flight"]]  # its date and fares are what the answer holds
    seen = set()
    for limit in range(len(whole.text), 400, -25):  # tighter and tighter: the flight goes before the booking does
        state = render(world, call, budget=PromptBudget(limit)).shown.state or {}
        has_flight = any(isinstance(f, dict) for f in state.get("flights", []))
        has_booking = any(isinstance(b, dict) and b["booking_id"] == booking["booking_id"]
                          for b in state.get("bookings", []))
        assert has_booking or not has_flight
        seen.add((has_booking, has_flight))
    assert (True, False) in seen and (True, True) in seen


def test_a_called_tool_too_big_for_the_state_beside_it_waits_for_the_state_without_its_response_schema():
    from wmstudio.world.prompt.render import RESPONSE_CUT

    data = shop_world()
    response = data["tools"][0]["function"]["response"]
    response["properties"].update({f"field_{n}": {"type": "string"} for n in range(40)})  # a real-size answer
    world = parse_world(data)
    called = world.tool("refund_order")
    compact = tool_schema_line(called, compact=True)
    budget = PromptBudget(len(compact) + 450)  # the tool alone takes over half, and the whole prompt is over
    rendered = render(world, CALL, budget=budget)
    assert '"delivered"' in section(rendered.text, "## ENVIRONMENT STATE")  # the record the call names is shown
    assert tool_schema_line(called, compact=True, response=False) in rendered.text and '"field_0"' not in rendered.text
    assert RESPONSE_CUT in rendered.cut
    roomy = render(world, CALL, budget=PromptBudget(len(render(world, CALL).text) - 20))
    assert '"field_0"' in roomy.text and RESPONSE_CUT not in roomy.cut  # room for it: the response comes back
