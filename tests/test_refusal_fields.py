"""A refused call's answer holds what the refusal says and nothing it did not produce: its fields are neutral ("",
0, false, [], an object of those), as every world the model trained on answers a refusal, whether the error was
pinned by the user or chosen by the outcome head; what the call names a record by (an id, a path) is echoed, a name
it looked up is not."""

from __future__ import annotations

import json
import random

import pytest

from wmstudio.model.generation.generation import generate
from wmstudio.model.generation.helper_values import refusal_fields
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

pytestmark = pytest.mark.usefixtures("one_thread")


def _payments_with_a_charge():
    simulator = get_simulator("payments")
    state = simulator.initial_state(random.Random(4))
    state, login = simulator.step(state, Call("login", dict(state["login"])))
    charge = next(c for c in state["charges"] if not c.get("refunded"))
    return simulator, state, login, charge


def test_the_fields_a_refusal_leaves_neutral_are_those_the_call_does_not_name():
    schema = {"type": "object", "properties": {
        "charge_id": {"type": "string"}, "amount_cents": {"type": "integer"}, "currency": {"type": "string"},
        "refunded": {"type": "boolean"}, "items": {"type": "array"}, "kind": {"type": "string", "enum": ["a", "b"]},
        "status": {"type": "string"}, "error": {"type": "string"}, "message": {"type": "string"}}}
    call = Call("refund_charge", {"charge_id": "ch_1", "currency": "usd"})
    assert refusal_fields(call, schema, [Anchor("refunded", True)]) == {"amount_cents": 0, "currency": "",
                                                                        "items": []}
    nested = {"type": "object", "properties": {"customer": {"type": "object", "properties": {
        "customer_id": {"type": "string"}, "full_name": {"type": "string"}, "tier": {"type": "string",
                                                                                      "enum": ["gold"]}}},
        "status": {"type": "string"}}}
    looked_up = Call("find_customer_by_name", {"full_name": "Nobody At All", "path": "/home/ana"})
    assert refusal_fields(looked_up, nested, []) == {"customer": {"customer_id": "", "full_name": ""}}


def test_a_pinned_refusal_writes_nothing_from_the_record_it_names():
    simulator, state, login, charge = _payments_with_a_charge()
    world = simulator.world(state)
    call = Call("refund_charge", {"session_token": login["session_token"], "charge_id": charge["id"]})
    pins = [Anchor("status", "error"), Anchor("error", "RATE_LIMITED"),
            Anchor("message", "Too many requests: retry after 30 seconds.")]
    answer = json.loads(generate(load_backend(), world, call, pins).samples[0].response)
    assert (answer["status"], answer["error"], answer["charge_id"]) == ("error", "RATE_LIMITED", charge["id"])
    assert answer["charge_amount_cents"] == 0 and answer["refund_id"] == "" and answer["refunded"] is False


def test_a_refusal_the_head_chooses_leaves_the_same_fields_neutral():
    simulator, state, login, charge = _payments_with_a_charge()
    call = Call("refund_charge", {"session_token": login["session_token"], "charge_id": charge["id"]})
    state, first = simulator.step(state, call)
    assert first["status"] == "ok"
    world = simulator.world(simulator.initial_state(random.Random(4)))
    history = [HistoryStep(call=Call("login", dict(world.initial_state["login"])), response=login),
               HistoryStep(call=call, response=first)]
    _, truth = simulator.step(state, call)  # refunded already: the world refuses
    answer = json.loads(generate(load_backend(), world, call, history=history).samples[0].response)
    assert truth["status"] == answer["status"] == "error"
    assert {k: answer[k] for k in ("refund_id", "refunded", "amount_refunded_cents")} == \
        {k: truth[k] for k in ("refund_id", "refunded", "amount_refunded_cents")}
