"""Response schemas inferred from example responses: what imported tools need for a skeleton canvas."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from wmstudio.problems import InvalidInput
from wmstudio.ui.world_tab import infer_from_example
from wmstudio.world.tools.schema_inference import infer_schema

EXAMPLES = [
    {"order_id": "#W1", "placed": "2025-03-01", "total": 12, "items": [{"sku": "A", "qty": 1}], "gift": True},
    {"order_id": "#W2", "placed": "2025-03-02", "total": 9.5, "items": [], "note": "leave at door"},
]


def test_the_schema_is_the_union_of_the_examples_and_each_example_fits_it():
    schema = infer_schema(EXAMPLES)
    assert schema["required"] == ["order_id", "placed", "total", "items"]  # what every example has
    assert schema["properties"]["total"] == {"type": "number"}  # 12 and 9.5
    assert schema["properties"]["placed"] == {"type": "string", "format": "date"}
    assert schema["properties"]["items"]["items"]["properties"]["qty"] == {"type": "integer"}
    for example in EXAMPLES:
        assert not list(Draft202012Validator(schema).iter_errors(example))
    assert infer_schema([1, "x"]) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    with pytest.raises(InvalidInput, match="at least one example"):
        infer_schema([])


def test_the_world_tab_puts_the_schema_on_the_named_tool_and_names_a_wrong_one():
    tools = json.dumps([{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}])
    text, status = infer_from_example(tools, "get_order", json.dumps(EXAMPLES[0]))
    assert json.loads(text)[0]["function"]["response"] == infer_schema([EXAMPLES[0]]) and "Inferred" in status
    unchanged, message = infer_from_example(tools, "get_orders", "{}")
    assert "get_order" in message and message.startswith("**Cannot")
    _, broken = infer_from_example(tools, "get_order", "{not json")
    assert "example response" in broken


def test_a_tool_the_history_shows_answering_gets_the_schema_of_its_answers_with_spans_sized_by_them():
    from wmstudio.world.history import HistoryStep
    from wmstudio.world.spec import Call
    from wmstudio.world.tools.schema_inference import history_answers, sized_schema

    history = [HistoryStep(Call("get_order", {"order_id": "A1"}), json.dumps({"order_id": "A1", "status": "ok"})),
               HistoryStep(Call("cancel_order", {"order_id": "A1"}), "not JSON"),
               HistoryStep(Call("get_order", {"order_id": "A22"}), {"order_id": "A22", "status": "error", "note": ""})]
    answers = history_answers("get_order", history)
    assert [answer["order_id"] for answer in answers] == ["A1", "A22"]
    schema = sized_schema(answers)
    assert set(schema["properties"]) == {"order_id", "status", "note"} and schema["required"] == ["order_id", "status"]
    assert schema["properties"]["order_id"]["maxLength"] == 6  # twice the longest answer
    assert schema["properties"]["status"]["maxLength"] == 10
    assert "maxLength" not in schema["properties"]["note"]  # only ever empty: the default span
    assert history_answers("cancel_order", history) == []  # it never answered JSON
    assert history_answers("refund_order", history) == []


def test_generation_for_a_schema_less_tool_keeps_the_keys_it_answered_with_before():
    from dataclasses import replace

    from wmstudio.model.canvas.canvas import SKELETON
    from wmstudio.model.generation.generation import generate
    from wmstudio.model.serving.backends import load_backend
    from wmstudio.world.history import HistoryStep
    from wmstudio.world.simulators import get_simulator
    from wmstudio.world.spec import Call

    simulator = get_simulator("retail")
    world = simulator.world()
    world = replace(world, tools=[replace(t, response=None) for t in world.tools])
    first, second = (o["id"] for o in world.initial_state["orders"][:2])
    _, answer = simulator.step(world.initial_state, Call("get_order", {"order_id": first}))
    history = [HistoryStep(Call("get_order", {"order_id": first}), answer)]
    generation = generate(load_backend(), world, Call("get_order", {"order_id": second}), history=history)
    response = json.loads(generation.samples[0].response)
    assert generation.mode == SKELETON and set(response) == set(answer)
    assert response["status"] in ("ok", "error")  # the outcome is a choice, never run-on text
    from wmstudio.ui.check_view import generation_html

    report = generation_html(generation, world, world.tool("get_order"), [])
    assert "no response schema: the skeleton was laid out from the schema its earlier answers" in report
    elsewhere = replace(world, name="my-shop")  # a world the model never saw: its trained shapes do not apply
    fresh = generate(load_backend(), elsewhere, Call("get_order", {"order_id": second}))
    assert fresh.mode != SKELETON  # nothing to go by: a free canvas


def test_an_outcome_seen_as_ok_or_error_becomes_a_choice_and_any_other_status_stays_text():
    from wmstudio.model.generation.generation import response_schema
    from wmstudio.world.history import HistoryStep
    from wmstudio.world.spec import Call, WorldSpec
    from wmstudio.world.tools import Tool

    world = WorldSpec(name="desk", tools=[Tool("get_ticket"), Tool("close_ticket")])
    history = [HistoryStep(Call("close_ticket", {"id": "T1"}), {"closed": True, "status": "ok"}),
               HistoryStep(Call("get_ticket", {"id": "T1"}), {"id": "T1", "status": "open"})]
    assert response_schema(world, Call("close_ticket", {"id": "T2"}), history)["properties"]["status"] == {
        "type": "string", "enum": ["ok", "error"]}
    assert response_schema(world, Call("get_ticket", {"id": "T2"}), history)["properties"]["status"] == {
        "type": "string", "maxLength": 8}
