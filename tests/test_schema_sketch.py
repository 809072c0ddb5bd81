"""A response schema as a sketch a model can write: every demo tool's sketch reads back to a schema with the same
keys and choices that the tool's real answers fit; what is not a sketch is refused."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from wmstudio.world.heads.schema_sketch import schema_from_sketch_text, sketch_of, sketch_text
from wmstudio.world.simulators import SIMULATORS


def _tools():
    return [(name, tool) for name, sim in SIMULATORS.items() for tool in sim.tools()]


@pytest.mark.parametrize("name,tool", _tools(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_a_sketch_reads_back_to_a_schema_with_the_tools_keys_that_its_real_answers_fit(name, tool):
    schema = schema_from_sketch_text(sketch_text(tool.response))
    assert schema is not None
    assert list(schema["properties"]) == list(tool.response["properties"])
    assert schema["properties"]["status"]["enum"] == tool.response["properties"]["status"]["enum"]
    sim = SIMULATORS[name]
    state = sim.initial_state(random.Random(4))
    rng = random.Random(5)
    for _ in range(12):  # valid and invalid calls: ok, error and partial answers alike fit the sketched schema
        call = sim.valid_call(state, rng) if rng.random() < 0.6 else sim.invalid_call(state, rng)
        if call.name != tool.name:
            continue
        _, response = sim.step(state, call)
        jsonschema.validate(response, schema)


def test_placeholders_name_each_type_and_options_keep_the_empty_choice():
    schema = {"type": "object", "properties": {
        "id": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["", "a", "b"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "meta": {"type": "object"}, "only": {"type": "string", "enum": ["x"]}}}
    assert sketch_of(schema) == {"id": "", "n": 0, "x": 0.0, "ok": False, "kind": "|a|b", "tags": [],
                                 "rows": [{"k": ""}], "meta": {}, "only": "x|"}
    back = schema_from_sketch_text(sketch_text(schema))
    assert back["properties"]["kind"] == {"type": "string", "enum": ["", "a", "b"]}
    assert back["properties"]["only"] == {"type": "string", "enum": ["x", ""]}
    assert back["properties"]["x"] == {"type": "number"} and back["properties"]["n"] == {"type": "integer"}
    assert back["properties"]["rows"]["items"]["properties"] == {"k": {"type": "string"}}
    assert back["properties"]["tags"] == {"type": "array"} and back["properties"]["meta"] == {"type": "object"}


@pytest.mark.parametrize("text", ['{"a":', "[1, 2]", '"text"', "{}", '{"":1}', "", "null"])
def test_what_is_not_a_sketch_of_an_object_with_keys_is_refused(text):
    assert schema_from_sketch_text(text) is None


def test_the_sketch_text_is_the_same_every_time_the_tool_answers():
    tool = SIMULATORS["retail"].world().tool("list_orders")
    assert sketch_text(tool.response) == sketch_text(json.loads(json.dumps(tool.response)))
    assert sketch_text(tool.response).startswith('{"orders":[{"order_id":"","order_status":"|pending|')
