"""A typo'd field in a rule's check is caught when the world is read, with the nearest declared name; a field an
open schema may hold is only a warning; every shipped world passes as it is."""

from __future__ import annotations

import copy
import json

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.problems import InvalidInput
from wmstudio.ui.world_tab import validate_fields
from wmstudio.world.rules.references import reference_findings, references
from wmstudio.world.spec import load_world, parse_world

RETAIL = json.loads((DEMO_WORLDS_DIR / "retail.json").read_text())


def with_check(check: str, world: dict = RETAIL) -> dict:
    data = copy.deepcopy(world)
    data["rules"] = [{"text": "A refund moves money", "check": check}]
    return data


def test_a_typod_response_field_is_refused_with_the_nearest_name():
    with pytest.raises(InvalidInput) as caught:
        parse_world(with_check('call.name != "refund_order" || response.refund_procesed == true'))
    message = str(caught.value)
    assert "rules[0].check" in message and "`response.refund_procesed`" in message
    assert "did you mean `refund_processed`?" in message


def test_argument_and_call_fields_are_held_against_the_parameters():
    with pytest.raises(InvalidInput, match="did you mean `order_id`"):
        parse_world(with_check('call.arguments.orderid != ""'))
    with pytest.raises(InvalidInput, match="`call.tool` does not exist"):
        parse_world(with_check('call.tool == "refund_order"'))
    parse_world(with_check('call.arguments.order_id != "" && call.name == "get_order"'))


def test_strings_and_methods_are_not_fields():
    assert references('size(response.orders) > 0 && response.orders.size() > 0 && "response.nothing" != ""') == [
        ("response", ["orders"]), ("response", ["orders"])]


def test_an_open_response_schema_makes_an_unknown_field_a_warning():
    data = with_check("response.anything == 1")
    data["tools"].append({"type": "function", "function": {"name": "free_text", "description": "no schema",
                                                           "parameters": {"type": "object", "properties": {}}}})
    world = parse_world(data)  # accepted: the open tool may answer with that field
    problems, warnings = reference_findings(world.tools, world.rules, world.initial_state)
    assert not problems and len(warnings) == 1 and "`response.anything`" in warnings[0]


def test_a_state_key_the_initial_state_lacks_is_a_warning_in_the_world_tab():
    world = parse_world(with_check("size(state.ordres) >= 0"))
    _, warnings = reference_findings(world.tools, world.rules, world.initial_state)
    assert "`state.ordres` is not a key of the initial state" in warnings[0]
    status = validate_fields(world.name, world.description, "(none)", world.task, json.dumps(world.initial_state),
                             json.dumps([t.to_json() for t in world.tools]),
                             json.dumps([r.to_json() for r in world.rules]), "")
    assert status.startswith("✓ Valid world") and "- Warning:" in status and "state.ordres" in status


def test_every_shipped_world_reads_without_a_reference_problem():
    for path in sorted(DEMO_WORLDS_DIR.glob("*.json")):
        world = load_world(path)
        assert reference_findings(world.tools, world.rules, world.initial_state) == ([], []), path.name
