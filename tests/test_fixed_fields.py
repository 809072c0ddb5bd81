"""The fields a world's rules fix before the model writes (world/checks/fixed_fields.py), and generation writing
them under the chosen outcome (sampler setting `rule_fields`)."""

from __future__ import annotations

import json
import re

import pytest

from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.fixed_fields import fixed_fields, must_hold
from wmstudio.world.checks.report import check_step, check_variables
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.cel import Rule
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.tools.tool import Tool

RESERVE = (
    'call.name != "reserve_slip" ? true : (response.status == "error" ? response.slip_id == "" && !response.held : '
    'response.slip_id.matches("^SLP-[0-9]{5}$") && response.held && '
    'response.url == "https://marina.example/slips/" + response.slip_id && '
    'response.berths_left == state.docks[call.arguments.dock_id].berths - call.arguments.berths && '
    'timestamp(response.hold_until) - timestamp(state.now) == duration("7200s"))')
MOVE = ('call.name != "move_slip" || response.status == "error" ? true : (history.exists(h, h.call.name == '
        '"reserve_slip" && h.response.status == "ok") || response.phase == "moved")')


def _world() -> WorldSpec:
    text = {"type": "string"}
    reserve = Tool("reserve_slip", "Hold berths at a dock.", {
        "type": "object", "properties": {"dock_id": text, "berths": {"type": "integer"}},
        "required": ["dock_id", "berths"]}, {
        "type": "object", "properties": {
            "slip_id": text, "held": {"type": "boolean"}, "url": text, "berths_left": {"type": "integer"},
            "hold_until": text, "status": {"type": "string", "enum": ["ok", "error"]}, "error": text}})
    move = Tool("move_slip", "Move a slip.", {"type": "object", "properties": {"slip_id": text}}, {
        "type": "object", "properties": {"phase": {"type": "string", "enum": ["held", "moved"]},
                                         "status": {"type": "string", "enum": ["ok", "error"]}, "error": text}})
    return WorldSpec("marina", "Run the marina.", {"now": "2026-05-01T10:00:00Z", "docks": {"D1": {"berths": 12}}},
                     [reserve, move], [Rule("reserve: a slip id SLP-nnnnn, url, berths left, held 2 hours", RESERVE),
                                       Rule("move: the slip is moved", MOVE)])


def test_the_rules_fix_what_they_compute_under_the_outcome_and_nothing_under_a_branch_not_taken():
    world = _world()
    call = Call("reserve_slip", {"dock_id": "D1", "berths": 5})
    ok = fixed_fields(world, call, {"status": "ok", "error": ""})
    assert re.fullmatch(r"SLP-\d{5}", ok["slip_id"])  # drawn in the pattern's shape...
    assert ok == {"slip_id": ok["slip_id"], "held": True, "berths_left": 7, "hold_until": "2026-05-01T12:00:00Z",
                  "url": "https://marina.example/slips/" + ok["slip_id"]}  # ...and the url built from it
    assert fixed_fields(world, call, {"status": "ok", "error": ""}) == ok  # the same call draws the same id
    assert fixed_fields(world, Call("reserve_slip", {"dock_id": "D1", "berths": 6}),
                        {"status": "ok", "error": ""})["slip_id"] != ok["slip_id"]
    assert fixed_fields(world, call, {"status": "error", "error": "FULL"}) == {"slip_id": "", "held": False}
    assert fixed_fields(world, call, {}) == {}  # the outcome not chosen: no branch is taken
    assert fixed_fields(world, call, {"status": "ok", "slip_id": "SLP-00001"})["url"].endswith("/SLP-00001")
    assert "slip_id" not in fixed_fields(world, call, {"status": "ok", "slip_id": "mine"})  # decided stays
    assert set(fixed_fields(world, call, {"status": "ok"}, properties=["held"])) == {"held"}


def test_a_disjunction_fixes_a_field_only_when_its_other_options_are_settled_false():
    world = _world()
    move = Call("move_slip", {"slip_id": "SLP-00001"})
    assert fixed_fields(world, move, {"status": "ok"}) == {"phase": "moved"}
    earlier = HistoryStep(Call("reserve_slip", {"dock_id": "D1", "berths": 1}), {"status": "ok", "slip_id": "x"})
    assert fixed_fields(world, move, {"status": "ok"}, [earlier]) == {}  # the history may have changed it
    variables = check_variables(world, move, {"status": "error"}, [])
    assert must_hold(MOVE, variables) == []  # a failed move: the rule holds whatever follows
    assert must_hold("not a check ((", variables) == []


def test_two_rules_fixing_one_field_differently_fix_neither():
    world = _world()
    world.rules.append(Rule("moves are held", 'call.name != "move_slip" || response.phase == "held"'))
    assert fixed_fields(world, Call("move_slip", {"slip_id": "S"}), {"status": "ok"}) == {}


def test_a_lookup_rule_fixes_the_named_records_fields_and_a_field_read_inside_a_side_or_an_optional_token_nothing():
    world = _world()
    world.initial_state["free"] = [{"dock": "D1", "berths": 3}, {"dock": "D2", "berths": 12}]
    world.rules[:] = [
        Rule("a slip shows its dock's berths", 'call.name != "reserve_slip" || response.status == "error" || '
             'state.free.filter(f, f.dock == call.arguments.dock_id).all(f, f.berths == response.berths_left)'),
        Rule("ids under the url", 'call.name != "reserve_slip" || response.url.startsWith(response.slip_id == "" ? '
             '"x" : "https://")'),
        Rule("an optional token", 'call.name != "reserve_slip" || response.slip_id.matches("^(SLP-[0-9]{5})?$")')]
    call = Call("reserve_slip", {"dock_id": "D2", "berths": 5})
    assert fixed_fields(world, call, {"status": "ok"}) == {"berths_left": 12}  # the one dock the filter keeps
    assert fixed_fields(world, Call("reserve_slip", {"dock_id": "D9", "berths": 1}), {"status": "ok"}) == {}


def test_a_token_drawn_again_later_in_a_session_or_with_another_seed_is_another():
    world, call = _world(), Call("reserve_slip", {"dock_id": "D1", "berths": 5})
    earlier = HistoryStep(Call("move_slip", {"slip_id": "S"}), {"status": "error", "error": "NO"})
    ids = {fixed_fields(world, call, {"status": "ok"}, history, seed=seed)["slip_id"]
           for history, seed in (((), 0), ((earlier,), 0), ((), 1))}
    assert len(ids) == 3


@pytest.fixture(scope="module")
def backend(one_thread):
    from wmstudio.locations import DEFAULT_MODEL

    return load_backend(DEFAULT_MODEL)


def test_generation_writes_the_fields_the_rules_fix_and_the_answer_passes_them(backend):
    """A tool the model never saw: with `rule_fields` the ok answer holds the computed and drawn values and passes
    the world's rules; without it the model writes them and the reserve rule fails."""
    world = _world()
    call = Call("reserve_slip", {"dock_id": "D1", "berths": 5})
    pinned = [Anchor("status", "ok")]
    answer = json.loads(generate(backend, world, call, pinned).samples[0].response)
    assert answer["berths_left"] == 7 and answer["held"] is True and answer["hold_until"] == "2026-05-01T12:00:00Z"
    assert re.fullmatch(r"SLP-\d{5}", answer["slip_id"])
    assert answer["url"] == "https://marina.example/slips/" + answer["slip_id"]  # longer than a url's usual slot
    report = check_step(world, call, json.dumps(answer), pinned)
    assert not report.rule_violations, report.rule_violations
    alone = generate(backend, world, call, pinned, settings=SamplerSettings(rule_fields=False)).samples[0]
    assert any(v["rule"].startswith("reserve") for v in alone.checks.rule_violations)
