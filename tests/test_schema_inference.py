"""Response schemas inferred from example responses: what imported tools need for a skeleton canvas."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from wmstudio.problems import InvalidInput
from wmstudio.ui.world_tab import infer_from_example
from wmstudio.world.schema_inference import infer_schema

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
    assert "get_order" in message and message.startswith("⚠️")
    _, broken = infer_from_example(tools, "get_order", "{not json")
    assert "example response" in broken
