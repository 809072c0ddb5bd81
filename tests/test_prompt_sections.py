"""Reading back what a request states (world/prompt/sections.py, world/prompt/row_turns.py, studio/request_world.py): the
system sections in our layout and the paper's give back the world they were rendered from, the turns in every
layout give the call and the history, a state ending with the pending call is its history, and the merge over a
served world says where each part came from."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace

import pytest

from wmstudio.problems import InvalidInput
from wmstudio.store.seeding import demo_worlds
from wmstudio.studio.request_world import request_world
from wmstudio.world.corpus.rows import corpus_row
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.patronus import patronus_chat
from wmstudio.world.prompt.render import render_chat, render_prompt
from wmstudio.world.prompt.row_turns import read_row, read_turns
from wmstudio.world.prompt.sections import read_sections, shape_schema
from wmstudio.world.rules.cel import rules_for_tool
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call

RETAIL = next(world for world in demo_worlds() if world.name == "retail")
CALL = Call("get_order", {"order_id": "ORD-23411"})
HISTORY = [HistoryStep(Call("list_orders", {}), '{"orders":[{"id":"ORD-23411"}],"total":1}')]
NEW_ORDER = {"id": "ORD-77777", "status": "shipped", "placed_on": "2025-07-10", "delivered_on": "",
             "total_cents": 4599, "refunded_cents": 0, "items": [{"sku": "SKU-1111", "name": "Coffee Mug", "qty": 3,
                                                                  "price_cents": 1533}]}


def world_with_new_order():
    state = copy.deepcopy(RETAIL.initial_state)
    state["orders"] = [NEW_ORDER]
    return replace(RETAIL, initial_state=state, directives=["Answer in US English."])


@pytest.mark.parametrize("style", ["wmstudio", "patronus"])
def test_both_layouts_give_back_the_state_task_tools_rules_and_directives_they_show(style):
    world = world_with_new_order()
    chat = render_chat if style == "wmstudio" else patronus_chat  # our layout, or the paper's
    row = chat(world, Call("get_order", {"order_id": "ORD-77777"}), HISTORY, response='{"a":1}')
    read = read_row(row["messages"])
    stated = read_sections(read.system)
    assert stated.state["orders"] == [NEW_ORDER]  # the call-local state, its "… N more" counts left out
    assert stated.task == world.task
    assert stated.rules == [rule.text for rule in rules_for_tool(world.rules, "get_order")]  # the rules on this tool
    assert stated.directives == ["Answer in US English."]
    called = next(tool for tool in stated.tools if tool.name == "get_order")
    if style == "wmstudio":  # our layout shows the called tool whole, the others by name and description
        assert called.response == world.tool("get_order").response and not stated.signatures
        assert set(stated.named) == {"list_orders", "refund_order", "cancel_order"}
    else:  # the paper's: a signature and a return shape, which is a schema with the response's keys
        assert stated.signatures == {"get_order"} and list(called.parameters["properties"]) == ["order_id"]
        assert list(called.response["properties"]) == list(world.tool("get_order").response["properties"])
        assert called.response["properties"]["status"] == {"type": "string", "enum": ["ok", "error"]}
    assert read.turns.call == Call("get_order", {"order_id": "ORD-77777"})
    assert [step.to_json() for step in read.turns.history] == [step.to_json() for step in HISTORY]
    assert read.response == '{"a":1}' and stated.oracle == []


def test_a_sections_prompt_and_a_corpus_row_with_an_oracle_state_read_back():
    sections = read_sections(render_prompt(RETAIL, CALL, HISTORY))
    assert [step.to_json() for step in sections.history] == [step.to_json() for step in HISTORY]
    rows = (corpus_row(SIMULATORS["retail"], random.Random(seed)) for seed in range(200))
    oracle = next(row for row in rows if row["meta"]["grounding"] == "oracle" and row["meta"]["history"])
    read = read_row(oracle["messages"])
    stated = read_sections(read.system)
    assert stated.oracle == ["the simulator's state"] and stated.state is None  # never read as the environment
    assert read.turns.call.to_json() == oracle["meta"]["call"]
    assert [step.call.to_json() for step in read.turns.history] == [s["call"] for s in oracle["meta"]["history"]]


def test_a_state_ending_with_the_pending_call_is_the_history_before_it_in_both_forms():
    task = {"role": "user", "content": "Show me my orders."}
    answered = [{"role": "assistant", "content": '[{"name": "list_orders", "parameters": {}}]'},
                {"role": "user", "content": '<tool_response>\n{"orders": [], "total": 0}\n</tool_response>'}]
    pending_text = {"role": "assistant", "content": '[{"name": "get_order", "parameters": {"order_id": "ORD-1"}}]'}
    pending_openai = {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "type": "function", "function": {
        "name": "get_order", "arguments": json.dumps({"order_id": "ORD-1"})}}]}
    for pending, action in ((pending_text, [{"name": "get_order", "parameters": {"order_id": "ORD-1"}}]),
                            (pending_text, [pending_text]), (pending_openai, [pending_openai]),
                            (pending_openai, json.dumps([pending_openai]))):
        turns = read_turns([task, *answered, pending], action)
        assert turns.call == Call("get_order", {"order_id": "ORD-1"}) and turns.pending_dropped
        assert [step.call.name for step in turns.history] == ["list_orders"] and turns.task == "Show me my orders."
    with pytest.raises(InvalidInput) as refused:  # a different unanswered call is still a problem, at its place
        read_turns([task, pending_openai], [{"name": "list_orders", "parameters": {}}], "input.state", "input.action")
    assert refused.value.problems[0].path == "input.state[1].tool_calls[0]"
    assert read_turns("You are in a kitchen.", "open the fridge") is None  # a text game's step: free mode


def test_our_history_text_reads_as_steps_and_a_broken_turn_names_its_place():
    text = render_chat(RETAIL, CALL, HISTORY * 2)["messages"][1]["content"]
    state = text[len("State: "):text.rfind("\n\nAction:")]
    assert [step.to_json() for step in read_turns(state, CALL.to_json()).history] == \
        [step.to_json() for step in HISTORY * 2]
    with pytest.raises(InvalidInput) as refused:
        read_turns("History:\nTurn 1 action: {\"name\": \nTurn 1 response: {}", CALL.to_json(), "messages[1].content")
    assert refused.value.problems[0].path == "messages[1].content turn 1 action"


def test_return_shapes_become_schemas():
    assert shape_schema('{"n": int, "xs": array of string, "s": "a" | "b", "o": object, "f": number|null}') == {
        "type": "object", "required": ["n", "xs", "s", "o", "f"], "properties": {
            "n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "string"}},
            "s": {"type": "string", "enum": ["a", "b"]}, "o": {"type": "object"}, "f": {"type": ["number", "null"]}}}
    assert shape_schema("not a shape {") is None


def test_the_request_states_what_it_gives_and_the_served_world_the_rest():
    world = world_with_new_order()
    row = patronus_chat(world, Call("get_order", {"order_id": "ORD-77777"}))
    stated = read_sections(row["messages"][0]["content"])
    made = request_world(RETAIL, stated, Call("get_order", {"order_id": "ORD-77777"}))
    assert made.world.initial_state["orders"] == [NEW_ORDER]
    assert made.world.tool("get_order") == RETAIL.tool("get_order")  # a signature takes the served schema
    assert made.sources["state"] == "request" and made.sources["tools"]["get_order"] == "world retail"
    assert made.sources["tools"]["refund_order"] == "world retail"
    assert [rule.check for rule in made.world.rules] == \
        [rule.check for rule in rules_for_tool(RETAIL.rules, "get_order")]  # the texts the request shows
    alone = request_world(None, stated, Call("track_parcel", {"id": "P1"}))
    assert alone.sources["tools"] == {"get_order": "request", "track_parcel": "the call"}
    assert alone.world.tool("get_order").response["properties"]["total_cents"] == {"type": "integer"}
    assert request_world(RETAIL, None, CALL).sources["state"] == "world retail"
