"""CEL checks over JSON numbers: 100 and 100.0 are one number, and a check that cannot run says why in words."""

from __future__ import annotations

import pytest

from wmstudio.world.checks.report import check_step
from wmstudio.world.rules.cel import evaluate_check
from wmstudio.world.spec import Call, parse_world

VARIABLES = {
    "state": {"orders": {"A1": {"total": 100.0, "status": "delivered"}}, "limit": 250},
    "call": {"name": "refund", "arguments": {"order_id": "A1", "amount": 100}},
    "response": {"status": "ok", "amount": 100, "fee": 3, "items": [1, 2.5], "note": "done"},
    "history": [],
}
CEL_INTERNALS = ("CELEvalError", "Token(", "RULE", "_&&_", "_==_", "no matching overload", "no such overload",
                 "celtypes", "<class")


@pytest.mark.parametrize("expression", [
    "response.amount == state.orders.A1.total",  # int from the response, double from the state
    "response.amount == 100.0",
    "100.0 == response.amount",
    "response.fee < 3.5",
    "3.5 > response.fee",
    "response.fee <= 3.0 && response.fee >= 3.0",
    "response.amount != 100.5",
    "response.amount in [100.0, 7.5]",
    "2.5 in response.items",
    "response.amount + 0.5 == 100.5",
    "response.amount / 2.0 == 50",
    "call.arguments.amount <= state.limit",  # int with int, as before
    "response.items.size() == 2.0",
])
def test_ints_and_doubles_compare_as_json_numbers(expression):
    assert evaluate_check(expression, VARIABLES) == (True, None)


def test_numbers_that_differ_are_still_unequal():
    assert evaluate_check("response.amount == 100.5", VARIABLES) == (False, "check is false")
    assert evaluate_check("response.fee > 3.5", VARIABLES) == (False, "check is false")
    assert evaluate_check("response.amount in [99.0]", VARIABLES) == (False, "check is false")


@pytest.mark.parametrize("expression,expected", [
    ("response.refund > 0", "`response.refund` is not in the response"),
    ("response.amount > 0 && response.refund.total == 1", "`response.refund` is not in the response"),
    ("state.customers.C1 == 1", "`state.customers` is not in the initial state"),
    ('response.note > 1', "`response.note > 1` compares text with a number"),
    ('true && response.note == 100', "`response.note == 100` compares text with a number"),
    ("response.items[7] == 1", "`response.items[7]` is past the end of the list"),
    ("response.amount / 0 == 1", "`response.amount / 0` divides by zero"),
    ("response.amount.cents == 1", "`response.amount.cents` reads a field of a number, which has no fields"),
    ("refunds(1)", "`refunds` is not known: a check can use state, call, response, history"),
])
def test_a_check_that_cannot_run_says_where_and_why_in_words(expression, expected):
    holds, why = evaluate_check(expression, VARIABLES)
    assert not holds and why.startswith("check could not be evaluated: ")
    assert expected in why
    assert not any(internal in why for internal in CEL_INTERNALS), why


def test_a_rule_comparing_an_integral_amount_with_a_double_total_holds_in_a_world():
    world = parse_world({
        "name": "shop",
        "initial_state": {"orders": {"A1": {"total": 100.0}}},
        "tools": [{"type": "function", "function": {"name": "refund", "parameters": {
            "type": "object", "properties": {"order_id": {"type": "string"}}}}}],
        "rules": [{"text": "the refund equals the order total", "check": "response.amount == state.orders.A1.total"}],
    })
    assert check_step(world, Call("refund", {"order_id": "A1"}), '{"amount": 100}').ok
    report = check_step(world, Call("refund", {"order_id": "A1"}), '{"amount": "100"}')
    assert report.rule_violations == [{"rule": "the refund equals the order total", "message":
                                       "check could not be evaluated: `response.amount == state.orders.A1.total` "
                                       "compares text with a number"}]
