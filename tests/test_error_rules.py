"""Error codes carry their cause: every code a simulated world answers is stated as a rule over the state, the call
and the history; the simulators' own answers pass those rules, and a code the state contradicts (the issue's pinned
REFUND_WINDOW_EXPIRED on an order delivered 4 days ago) fails the rule that names it."""

from __future__ import annotations

import json
import random

import pytest

from wmstudio.world.checks.report import check_step, check_variables
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.cel import Rule, evaluate_check, rule_codes, rule_tools, rules_for_tool
from wmstudio.world.tools.arguments import argument_error
from wmstudio.world.sims.preconditions import fits_parameters
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call

WORLDS = sorted(SIMULATORS)


def coded_rules(name: str) -> dict[str, Rule]:
    return {code: rule for rule in get_simulator(name).rules() for code in rule_codes(rule)}


def violated(report) -> set[str]:
    return {v["rule"] for v in report.rule_violations}


@pytest.mark.parametrize("name", WORLDS)
def test_every_code_a_simulator_answers_by_itself_has_a_rule(name):
    sim, stated, answered = get_simulator(name), coded_rules(name), set()
    rng = random.Random(f"codes-{name}")
    for _ in range(60):
        state = sim.initial_state(rng)
        for _ in range(6):
            call = sim.agent_call(state, rng, invalid=rng.random() < 0.5)
            state, response = sim.step(state, call)
            answered.add(response["error"])
    answered.discard("")
    assert answered and answered <= set(stated), sorted(answered - set(stated))


@pytest.mark.parametrize("name", WORLDS)
def test_a_code_the_state_contradicts_fails_its_rule(name):
    """Every code with a rule, written into answers the simulator gave as successes: nearly all are caught (the few
    left are causes a check cannot pin down from the initial state and the history: seats after earlier bookings,
    the entry a move into a folder would overwrite, a balance after earlier refunds, the search a page token is for)."""
    sim, stated = get_simulator(name), coded_rules(name)
    rng = random.Random(f"contradicted-{name}")
    caught, tried = 0, 0
    for _ in range(12):
        initial = sim.initial_state(rng)
        state, history, world = initial, [], sim.world(initial)
        for _ in range(5):
            call = sim.agent_call(state, rng)
            new_state, response = sim.step(state, call)
            if response["status"] == "ok":
                for code, rule in stated.items():
                    wrong = {**response, "status": "error", "error": code}
                    tried += 1
                    caught += not evaluate_check(rule.check, check_variables(world, call, wrong, history))[0]
            history.append(HistoryStep(call=call, response=response))
            state = new_state
    assert tried > 150 and caught / tried >= (1.0 if name == "retail" else 0.97), (caught, tried)


def refund_world():
    state = {"today": "2025-03-14", "customer": {"id": "CUS-1", "name": "Dana", "email": "d@example.com"},
             "orders": [{"id": "ORD-22930", "status": "delivered", "placed_on": "2025-03-05", "delivered_on": "2025-03-10",
                         "total_cents": 37896, "refunded_cents": 0, "items": []},
                        {"id": "ORD-12002", "status": "delivered", "placed_on": "2025-02-20",
                         "delivered_on": "2025-02-23", "total_cents": 9999, "refunded_cents": 0, "items": []},
                        {"id": "ORD-30001", "status": "pending", "placed_on": "2025-03-13", "delivered_on": "",
                         "total_cents": 2000, "refunded_cents": 0, "items": []}],
             "refunds": []}
    return get_simulator("retail"), state


def refund_error(code: str, order: str = "ORD-22930") -> str:
    return json.dumps({"order_id": order, "refund_id": "", "refund_processed": False, "amount_refunded_cents": 0,
                       "total_refunded_cents": 0, "order_total_cents": 37896, "error": code, "message": "",
                       "status": "error"})


def test_the_issues_pinned_refund_error_is_caught_and_a_true_cause_passes():
    sim, state = refund_world()
    world, call = sim.world(state), Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 5000})
    report = check_step(world, call, refund_error("REFUND_WINDOW_EXPIRED"))
    assert not report.ok and violated(report) == {"REFUND_WINDOW_EXPIRED: delivered over 30 days ago"}
    for code in ("ORDER_NOT_DELIVERED", "ORDER_NOT_FOUND", "ALREADY_REFUNDED", "AMOUNT_EXCEEDS_REFUNDABLE",
                 "ORDER_CANCELLED", "ALREADY_SHIPPED", "INVALID_ARGUMENT", "MISSING_ARGUMENT"):
        assert not check_step(world, call, refund_error(code)).ok, code
    for code in ("PAYMENT_GATEWAY_ERROR", "SERVICE_UNAVAILABLE"):  # no cause in the state: no rule
        assert check_step(world, call, refund_error(code)).ok, code
    over = Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 40000})
    assert check_step(world, over, refund_error("AMOUNT_EXCEEDS_REFUNDABLE")).ok
    # the state's order delivered 19 days ago: the window is still open there too
    old = Call("refund_order", {"order_id": "ORD-12002", "amount_cents": 100})
    assert not check_step(world, old, refund_error("REFUND_WINDOW_EXPIRED", "ORD-12002")).ok
    late = sim.world({**state, "today": "2025-04-01"})
    assert check_step(late, old, refund_error("REFUND_WINDOW_EXPIRED", "ORD-12002")).ok


def test_a_cause_an_earlier_step_made_counts():
    sim, state = refund_world()
    world, history = sim.world(state), []
    for call in (Call("cancel_order", {"order_id": "ORD-30001"}),
                 Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 37896})):
        state, response = sim.step(state, call)
        assert response["status"] == "ok"
        history.append(HistoryStep(call=call, response=response))
    refund_again = Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 1})
    refund_cancelled = Call("refund_order", {"order_id": "ORD-30001", "amount_cents": 1})
    assert sim.step(state, refund_again)[1]["error"] == "ALREADY_REFUNDED"
    assert sim.step(state, refund_cancelled)[1]["error"] == "ORDER_CANCELLED"
    assert check_step(world, refund_again, refund_error("ALREADY_REFUNDED"), history=history).ok
    assert check_step(world, refund_cancelled, refund_error("ORDER_CANCELLED", "ORD-30001"), history=history).ok
    assert not check_step(world, refund_again, refund_error("ALREADY_REFUNDED")).ok  # no history: nothing refunded
    assert not check_step(world, refund_cancelled, refund_error("ORDER_CANCELLED", "ORD-30001")).ok


def test_a_directive_excuses_the_code_it_forces():
    sim = get_simulator("payments")
    state = sim.initial_state(random.Random(5))
    login = Call("login", dict(state["login"]))
    after, logged_in = sim.step(state, login)
    history = [HistoryStep(call=login, response=logged_in)]
    good = next(c for c in state["customers"] if c["card_ok"])
    charge = Call("create_charge", {"session_token": logged_in["session_token"], "customer_id": good["id"],
                                    "amount_cents": 2500, "currency": "usd"})
    _, declined = sim.step(after, charge, ["inject_error: card_declined"])
    assert declined["error"] == "CARD_DECLINED"
    assert check_step(sim.world(state, ["inject_error: card_declined"]), charge, json.dumps(declined),
                      history=history).ok
    report = check_step(sim.world(state), charge, json.dumps(declined), history=history)
    assert violated(report) == {"CARD_DECLINED: card not ok"}
    retail, rstate = refund_world()
    lookup = Call("get_order", {"order_id": "ORD-22930"})
    _, gone = retail.step(rstate, lookup, ["empty_result"])
    assert gone["error"] == "ORDER_NOT_FOUND"
    assert check_step(retail.world(rstate, ["empty_result"]), lookup, json.dumps(gone)).ok
    assert not check_step(retail.world(rstate), lookup, json.dumps(gone)).ok


def test_checks_read_the_directives_as_canonical_text():
    sim, state = refund_world()
    world = sim.world(state, ["inject_error: card_declined", "Answer tersely", " page_size = 3 "])
    variables = check_variables(world, Call("list_orders", {}), {}, [])
    assert variables["directives"] == ["inject_error: CARD_DECLINED", "page_size: 3"]


def _argument_variants(tool, rng: random.Random) -> list[dict]:
    """Arguments for `tool`: well-typed ones, then each way to break them the simulators refuse."""
    properties = tool.parameters.get("properties", {})
    good = {}
    for key, schema in properties.items():
        kind = schema.get("type")
        good[key] = (schema["enum"][0] if "enum" in schema else {"string": "x", "integer": schema.get("minimum", 1),
                     "number": 1.5, "boolean": True, "array": ["ACC-1"]}[kind])
    variants = [good, {}]
    for key, schema in properties.items():
        variants += [{**good, key: value} for value in (None, "text", 3, 2.5, [], {}, True, -5, 10 ** 6, "")]
        variants.append({k: v for k, v in good.items() if k != key})
    variants.append({**good, "colour": "red"})
    return variants


@pytest.mark.parametrize("name", WORLDS)
def test_the_argument_rule_agrees_with_the_simulators_argument_checks(name):
    rng = random.Random(name)
    for tool in get_simulator(name).tools():
        fits = fits_parameters(tool.parameters)
        for arguments in _argument_variants(tool, rng):
            variables = {"call": {"name": tool.name, "arguments": arguments}}
            refused = argument_error({**tool.parameters, "required": []}, arguments)  # missing is the other code
            assert evaluate_check(fits, variables)[0] == (refused is None), (tool.name, arguments)


def test_rules_say_their_codes_and_tools():
    rules = {rule.text: rule for rule in get_simulator("retail").rules()}
    cancelled = rules["ORDER_CANCELLED, ALREADY_CANCELLED: order cancelled"]
    assert rule_codes(cancelled) == ["ORDER_CANCELLED", "ALREADY_CANCELLED"]
    assert rule_tools(cancelled) == {"refund_order", "cancel_order"}
    assert rule_codes(rules["Order totals never change"]) == []
    assert rule_tools(rules["Order totals never change"]) == {"get_order"}
    assert rule_tools(Rule("free text")) is None and rule_tools(Rule("t", "response.total >= 0")) is None
    for_lookup = [rule.text for rule in rules_for_tool(list(rules.values()), "get_order")]
    assert for_lookup == ["Order totals never change", "ORDER_NOT_FOUND: unknown order id",
                          "MISSING_ARGUMENT, INVALID_ARGUMENT: only for bad arguments"]
