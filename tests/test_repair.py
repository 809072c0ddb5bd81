"""Rule-guided repair: the fields a failed rule reads are remasked, and a rule's equalities set what arithmetic
the model got wrong, without touching what the user pinned."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace

import pytest

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.generation.repair import fields_to_remask, held_anchors, solve_by_rules
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.equations import implied_values
from wmstudio.world.rules.patterns import implied_texts, nearest_match
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

COUNT_RULE = "ls and find count every match, also those a truncated answer leaves out"
LS_CHECK = ('call.name == "ls" ? (response.truncated ? size(response.entries) < response.count : '
            'size(response.entries) == response.count) : call.name != "find" || size(response.matches) == '
            'response.count')


@pytest.fixture(scope="module")
def filesystem():
    sim = get_simulator("filesystem")
    return sim.world(sim.initial_state(random.Random(0)))


def _listing(count: int, truncated: bool = False) -> dict:
    entries = [{"name": f"f{i}.txt", "type": "file", "size": 10 * i} for i in range(3)]
    return {"path": "/home/maria", "entries": entries, "count": count, "truncated": truncated, "error": "",
            "message": "", "status": "ok"}


def test_an_equality_with_a_lone_response_field_says_what_the_field_must_hold():
    variables = {"call": {"name": "ls"}, "response": _listing(7)}
    assert implied_values(LS_CHECK, variables) == [("count", 3)]
    sums = "response.total_due_cents == response.change_fee_cents + response.fare_difference_cents"
    assert implied_values(sums, {"response": {"total_due_cents": 0, "change_fee_cents": 500,
                                              "fare_difference_cents": -120}}) == [("total_due_cents", 380)]


def test_a_field_first_in_a_sum_is_solved_for():
    tagged = "response.updated + size(response.failed_ids) == size(call.arguments.ids)"
    variables = {"call": {"arguments": {"ids": ["a", "b", "c"]}}, "response": {"updated": 9, "failed_ids": ["b"]}}
    assert implied_values(tagged, variables) == [("updated", 2)]
    assert implied_values("response.count - 1 == 4", {"response": {"count": 1}}) == [("count", 5)]


def test_a_time_is_solved_for_and_written_back_as_rfc_3339_text():
    session = ('call.name != "login" || response.status == "error" || timestamp(response.expires_at) - '
               'timestamp(state.now) == duration("3600s")')
    variables = {"call": {"name": "login"}, "state": {"now": "2025-08-10T18:44:00Z"},
                 "response": {"expires_at": "20_2555-00000:8", "status": "ok"}}
    assert ("expires_at", "2025-08-10T19:44:00Z") in implied_values(session, variables)
    due = 'timestamp(response.due) == timestamp(state.now) + duration("60s")'
    assert implied_values(due, variables) == [("due", "2025-08-10T18:45:00Z")]


def test_inside_a_macro_each_element_of_its_list_gives_a_value():
    fares = "state.flights.exists(f, response.charged_cents == f.fares[response.fare] * response.seats)"
    variables = {"state": {"flights": [{"fares": {"basic": 100}}, {"fares": {"basic": 70}}]},
                 "response": {"charged_cents": 1, "fare": "basic", "seats": 3}}
    assert implied_values(fares, variables) == [("charged_cents", 300), ("charged_cents", 210)]
    matching = 'state.flights.filter(f, f.id == response.flight).exists(f, response.paid == f.fares.basic)'
    variables = {"state": {"flights": [{"id": "A", "fares": {"basic": 5}}, {"id": "B", "fares": {"basic": 9}}]},
                 "response": {"flight": "B", "paid": 0}}
    assert implied_values(matching, variables) == [("paid", 9)]  # only the elements the filter keeps


def test_sides_that_cannot_be_evaluated_alone_or_hold_the_field_itself_imply_nothing():
    inside_a_macro = "state.flights.exists(f, response.charged_cents == f.fares[response.fare] * 2)"
    assert implied_values(inside_a_macro, {"state": {"flights": []}, "response": {"charged_cents": 1}}) == []
    assert implied_values("response.count == response.count + 0", {"response": {"count": 1}}) == []
    assert implied_values("2 * response.count + 1 == 4", {"response": {"count": 1}}) == []  # not alone in its sum
    assert implied_values("x.response.count == 4", {"response": {"count": 1}}) == []
    # operators inside a string literal are text, not operators
    assert implied_values('response.note == "a && b == c"', {"response": {"note": ""}}) == [("note", "a && b == c")]


def test_solving_sets_the_count_the_rule_implies_and_the_response_then_passes(filesystem):
    call = Call("ls", {"path": "/home/maria"})
    text = json.dumps(_listing(7))
    report = check_step(filesystem, call, text)
    assert [v["rule"] for v in report.rule_violations] == [COUNT_RULE]
    solved_text, solved_report, fields = solve_by_rules(filesystem, call, text, report, [], [])
    assert fields == {"count": 3} and json.loads(solved_text)["count"] == 3 and solved_report.ok


def test_solving_never_changes_a_pinned_field_nor_a_truncated_count(filesystem):
    call = Call("ls", {"path": "/home/maria"})
    text = json.dumps(_listing(7))
    report = check_step(filesystem, call, text, anchors=[Anchor("count", 7)])
    assert solve_by_rules(filesystem, call, text, report, [Anchor("count", 7)], []) is None
    truncated = json.dumps(_listing(2, truncated=True))  # the rule asks count > 3: an inequality sets nothing
    assert solve_by_rules(filesystem, call, truncated, check_step(filesystem, call, truncated), [], []) is None


def test_remasking_takes_the_fields_a_failed_rule_reads_and_holds_the_rest(filesystem):
    call = Call("ls", {"path": "/home/maria"})
    response = _listing(7)
    report = check_step(filesystem, call, json.dumps(response))
    remask = fields_to_remask(filesystem, report, response)
    assert set(remask) == {"truncated", "entries", "count"}
    held = held_anchors(response, remask, [Anchor("status", "ok")])
    assert {a.path for a in held} == {"status", "path", "error", "message"}


def test_steered_generation_fixes_the_count_of_a_listing_the_user_pinned(filesystem):
    """On the shipped model: nine pinned entries, the count left to the model; steered, the rule holds."""
    backend = load_backend()
    entries = [{"name": f"n{i}.md", "type": "file", "size": i} for i in range(9)]
    pins = [Anchor("entries", entries), Anchor("truncated", False), Anchor("status", "ok")]
    call = Call("ls", {"path": "/home/maria"})
    raw = generate(backend, filesystem, call, pins, (), SamplerSettings()).samples[0]
    steered = generate(backend, filesystem, call, pins, (), SamplerSettings(repair=True)).samples[0]
    assert COUNT_RULE not in {v["rule"] for v in steered.checks.rule_violations}
    assert json.loads(steered.response)["count"] == 9
    if json.loads(raw.response)["count"] != 9:  # the model's own count was wrong: a solved round set it
        assert any(r.solved == {"count": 9} for r in steered.repairs)


def test_a_token_of_the_wrong_shape_is_brought_to_the_nearest_text_the_rule_matches():
    rule = 'response.status == "error" ? response.api_key == "" : response.api_key.matches("^pl_live_[A-Za-z0-9]{8}$")'
    [(name, fixed)] = implied_texts(rule, {"api_key": "pl_live_ab-cd ef", "status": "ok"})
    assert name == "api_key" and re.fullmatch(r"pl_live_[A-Za-z0-9]{8}", fixed)
    assert fixed.startswith("pl_live_abcdef")  # the model's own characters are kept, in order
    assert nearest_match("^pl_live_[A-Za-z0-9]{8}$", "cus_") == nearest_match("^pl_live_[A-Za-z0-9]{8}$", "cus_")
    assert implied_texts(rule, {"api_key": "pl_live_abcdefgh", "status": "ok"}) == []  # already matches
    assert implied_texts('response.key.matches("(unclosed")', {"key": "x"}) == []  # an unreadable pattern


def test_repair_gives_a_payments_key_the_shape_its_rule_states():
    sim = get_simulator("payments")
    state = sim.initial_state(random.Random(0))
    world = sim.world(state)
    login = Call("login", dict(state["login"]))
    _, session = sim.step(state, login)
    history = [HistoryStep(call=login, response=json.dumps(session))]
    call = Call("create_api_key", {"session_token": session["session_token"], "label": "ci"})
    text = json.dumps({"key_id": "key_0123456789ab", "api_key": "cus_8n_", "label": "ci", "error": "", "message": "",
                       "status": "ok"})
    report = check_step(world, call, text, history=history)
    assert len(report.rule_violations) == 1
    solved_text, solved_report, fields = solve_by_rules(world, call, text, report, [], history)
    assert set(fields) == {"api_key"} and json.loads(solved_text)["api_key"].startswith("pl_live_")
    assert solved_report.ok


def _pinned_refund_error(code: str, message: str, order: str = "ORD-22930") -> tuple:
    sim = get_simulator("retail")
    state = {"today": "2025-07-21", "customer": {"id": "CUS-1", "name": "Dana", "email": "d@example.com"},
             "orders": [{"id": "ORD-22930", "status": "delivered", "placed_on": "2025-07-12",
                         "delivered_on": "2025-07-17", "total_cents": 37896, "refunded_cents": 0, "items": []},
                        {"id": "ORD-30001", "status": "shipped", "placed_on": "2025-07-19", "delivered_on": "",
                         "total_cents": 2500, "refunded_cents": 0, "items": []}],
             "refunds": []}
    call = Call("refund_order", {"order_id": order, "amount_cents": 5000})
    text = json.dumps({"order_id": order, "refund_id": "", "refund_processed": False, "amount_refunded_cents": 0,
                       "total_refunded_cents": 0, "order_total_cents": 0, "error": code, "message": message,
                       "status": "error"})
    return sim.world(state), call, text


def test_a_pinned_error_whose_cause_the_state_contradicts_gets_an_outage_when_no_code_fits():
    world, call, text = _pinned_refund_error(
        "REFUND_WINDOW_EXPIRED", "ORD-12002 was delivered 19 days ago; refunds close close after30 days days")
    report = check_step(world, call, text, anchors=[Anchor("status", "error")])
    assert report.rule_violations and report.message_strays
    solved_text, solved_report, fields = solve_by_rules(world, call, text, report, [Anchor("status", "error")], [])
    assert fields == {"error": "SERVICE_UNAVAILABLE", "message": "The request failed with SERVICE_UNAVAILABLE."}
    assert solved_report.ok and json.loads(solved_text)["status"] == "error"


def test_a_pinned_error_gets_the_code_the_state_allows():
    world, call, text = _pinned_refund_error("REFUND_WINDOW_EXPIRED", "Refunds close after 30 days.", "ORD-30001")
    report = check_step(world, call, text)
    solved_text, solved_report, fields = solve_by_rules(world, call, text, report, [], [])
    assert fields["error"] == "ORDER_NOT_DELIVERED" and solved_report.ok
    # an injected outage is the world's own code with no cause; a pinned code is never changed
    steered = replace(world, directives=["inject_error: PAYMENT_GATEWAY_ERROR"])
    world_ok, call_ok, text_ok = _pinned_refund_error("REFUND_WINDOW_EXPIRED", "")
    assert solve_by_rules(steered, call_ok, text_ok, check_step(steered, call_ok, text_ok), [], [])[2]["error"] == \
        "PAYMENT_GATEWAY_ERROR"
    pinned = [Anchor("error", "REFUND_WINDOW_EXPIRED")]
    assert solve_by_rules(world_ok, call_ok, text_ok, check_step(world_ok, call_ok, text_ok, pinned), pinned, []) is None


def test_a_message_naming_what_nothing_holds_loses_that_sentence():
    world, call, text = _pinned_refund_error(
        "PAYMENT_GATEWAY_ERROR", "The card processor did not answer for ORD-22930. Order ORD-99999 was refunded.")
    report = check_step(world, call, text)
    assert report.message_strays and not report.rule_violations
    assert fields_to_remask(world, report, json.loads(text)) == ["message"]
    solved_text, solved_report, fields = solve_by_rules(world, call, text, report, [], [])
    assert fields == {"message": "The card processor did not answer for ORD-22930."} and solved_report.ok
