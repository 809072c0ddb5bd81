"""Plain-text answers: a tool whose response schema is a string answers a value, a sentence or an error in the
world's style, written from what the world says (the record the call names, the same tool's earlier answer),
never the JSON-like noise the denoiser wrote for a shape it never saw."""

from __future__ import annotations

import json

import pytest

from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.text_answer import text_answer
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, parse_world

TELECOM = parse_world({
    "name": "telecom",
    "initial_state": {"customers": [{"customer_id": "C1001", "name": "Ana Ruiz", "phone": "555-0101",
                                     "balance_cents": 1200},
                                    {"customer_id": "C1002", "name": "Ben Ode", "phone": "555-0199",
                                     "balance_cents": 0}]},
    "tools": [
        {"name": "get_customer_name", "description": "The customer's full name.",
         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
         "response": {"type": "string"}},
        {"name": "get_customer_balance", "description": "What the customer owes, in cents.",
         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
         "response": {"type": "string"}},
        {"name": "suspend_line", "description": "Suspend a customer's line; answers a confirmation.",
         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
         "response": {"type": "string"}},
        {"name": "get_customer", "description": "A customer's record.",
         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
         "response": {"type": "object", "properties": {"name": {"type": "string"}}}}]})


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def _said(call: Call, history=()) -> str | None:
    copy = text_answer(TELECOM, call, list(history), TELECOM.tool(call.name).response, TELECOM.initial_state)
    return copy.values[""] if copy is not None else None


def test_the_shipped_model_answers_a_text_tool_in_text_from_the_record_the_call_names(backend):
    def answer(name: str, customer: str) -> str:
        return json.loads(generate(backend, TELECOM, Call(name, {"customer_id": customer})).samples[0].response)

    assert answer("get_customer_name", "C1002") == "Ben Ode"
    assert answer("get_customer_balance", "C1001") == "1200"
    assert answer("suspend_line", "C1001") == "Line suspended for customer C1001."
    assert answer("get_customer_name", "C9") == "Error: customer C9 not found"


def test_a_text_answer_follows_the_tools_earlier_answer_and_the_worlds_error_style():
    before = HistoryStep(Call("suspend_line", {"customer_id": "C1001"}), "Done: the line of C1001 is now suspended.")
    assert _said(Call("suspend_line", {"customer_id": "C1002"}), [before]) == \
        "Done: the line of C1002 is now suspended."
    refused = HistoryStep(Call("get_customer_name", {"customer_id": "X1"}), "ERROR - no such customer X1")
    assert _said(Call("get_customer_name", {"customer_id": "C77"}), [refused]) == "ERROR - customer C77 not found"
    assert _said(Call("get_customer", {"customer_id": "C1001"})) is None  # an object answer is the record copy's
