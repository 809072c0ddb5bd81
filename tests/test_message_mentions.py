"""The message check: ids and numbers a response's message names must be ones the call, the state, the history or the
rest of the response hold (the issue's "ORD-12002 was delivered 19 days ago" in the refund of ORD-22930)."""

from __future__ import annotations

import json
import random

import pytest

from wmstudio.world.checks.message_mentions import Mention, mentions, message_strays
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call


def test_mentions_read_ids_paths_amounts_and_numbers_from_prose():
    found = mentions('ORD-12002 was delivered 19 days ago; refunds close close after30 days days. At most $1,234.56 '
                     'of "ch_3Kx9Pq2LmZ7wYt" (page 2-3, 10:15) on 2025-03-14, see /home/alex/notes.txt: 812 bytes.')
    assert found == [
        Mention("ORD-12002", "id"), Mention("19", "number", 19.0), Mention("after30", "id"),
        Mention("$1,234.56", "number", 1234.56, dollars=True), Mention("ch_3Kx9Pq2LmZ7wYt", "id"),
        Mention("2", "number", 2.0), Mention("3", "number", 3.0), Mention("10", "number", 10.0),
        Mention("15", "number", 15.0), Mention("2025-03-14", "id"), Mention("/home/alex/notes.txt", "path"),
        Mention("812", "number", 812.0)]
    assert mentions("No such order, try again later.") == []


def shop():
    sim = get_simulator("retail")
    state = {"today": "2025-07-21", "customer": {"id": "CUS-1", "name": "Dana", "email": "d@example.com"},
             "orders": [{"id": "ORD-22930", "status": "delivered", "placed_on": "2025-07-12",
                         "delivered_on": "2025-07-17", "total_cents": 37896, "refunded_cents": 1000, "items": []},
                        {"id": "ORD-11000", "status": "delivered", "placed_on": "2025-03-01",
                         "delivered_on": "2025-03-04", "total_cents": 4999, "refunded_cents": 0, "items": []}],
             "refunds": []}
    return sim.world(state), Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 5000})


def refund(message: str, code: str = "PAYMENT_GATEWAY_ERROR") -> dict:
    return {"order_id": "ORD-22930", "refund_id": "", "refund_processed": False, "amount_refunded_cents": 0,
            "total_refunded_cents": 0, "order_total_cents": 37896, "error": code, "message": message,
            "status": "error"}


def test_the_issues_message_names_a_stray_order_and_a_glued_word():
    world, call = shop()
    strays = message_strays(world, call, refund("ORD-12002 was delivered 19 days ago; refunds close close after30 "
                                                "days days"))
    assert strays == [
        "message names ORD-12002, which no value of the call, the state, the history or the rest of the response holds",
        "message names after30, which no value of the call, the state, the history or the rest of the response holds"]
    report = check_step(world, call, json.dumps(refund("ORD-12002 was delivered 19 days ago.")))
    assert not report.ok and report.message_strays and report.to_json()["message_strays"] == report.message_strays
    assert not report.rule_violations and not report.schema_errors


@pytest.mark.parametrize("message", [
    "Order ORD-22930 could not be refunded: the payment gateway timed out.",
    "Refund of $50.00 on ord-22930 failed; $378.96 order, $368.96 still refundable.",  # call, state, their difference
    "Order ORD-11000 was delivered 139 days ago; refunds close after 30 days.",  # days between two held dates
    "The request failed with PAYMENT_GATEWAY_ERROR.", "", "Try again in 5 minutes (attempt 2 of 3).",
])
def test_what_the_step_holds_or_derives_passes(message):
    world, call = shop()
    assert message_strays(world, call, refund(message)) == []


@pytest.mark.parametrize("message, stray", [
    ("Refunded $51.00 on order ORD-22930.", "$51.00"),
    ("Order ORD-22930 totals 99999 cents.", "99999"),
    ("Refund RF-70001 failed.", "RF-70001"),
    ("See /home/alex/secret/plan.txt for details.", "/home/alex/secret/plan.txt"),
])
def test_an_amount_id_or_path_nothing_holds_is_named(message, stray):
    world, call = shop()
    assert [line.split(",")[0] for line in message_strays(world, call, refund(message))] == [f"message names {stray}"]


def test_the_history_and_the_rest_of_the_response_hold_what_they_made():
    world, call = shop()
    earlier = Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 500})
    made = {**refund(""), "refund_id": "RF-70001", "refund_processed": True, "amount_refunded_cents": 500,
            "status": "ok", "error": ""}
    assert message_strays(world, call, refund("Refund RF-70001 was already made."),
                          [HistoryStep(call=earlier, response=made)]) == []
    assert message_strays(world, call, {**made, "message": "Refunded as RF-70001."}) == []
    assert message_strays(world, call, {**made, "refund_id": "", "message": "Refunded as RF-70001."})


@pytest.mark.parametrize("name", sorted(SIMULATORS))
def test_every_simulator_message_names_only_what_its_step_holds(name):
    sim, rng = get_simulator(name), random.Random(f"messages-{name}")
    said = 0
    for _ in range(25):
        initial = sim.initial_state(rng)
        state, history = initial, []
        for _ in range(6):
            call = sim.agent_call(state, rng, invalid=rng.random() < 0.35)
            directives = rng.choice([["verbose"], ["verbose", "partial_success"], ["verbose", "page_size: 2"], []])
            state_after, response = sim.step(state, call, directives)
            assert message_strays(sim.world(initial, directives), call, response, history) == [], (call, response)
            said += bool(response["message"])
            history.append(HistoryStep(call=call, response=response))
            state = state_after
    assert said > 100
