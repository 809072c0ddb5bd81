"""A user's own world, of shapes the generator never makes: a record found by any of its fields (a phone that is
one of a customer's lines, a name and a date of birth), a union answer whose variant is the record the id names,
an answer that is itself an array of records, and a listing filtered by a nested field (`route.from`) or a
synonym of it (`origin`). The shipped model answers each from the state, as a lookup would."""

from __future__ import annotations

import json

import pytest

from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.report import check_step
from wmstudio.world.spec import Call, parse_world

CUSTOMER = {"type": "object", "properties": {
    "customer_id": {"type": "string"}, "full_name": {"type": "string"}, "phone_number": {"type": "string"},
    "date_of_birth": {"type": "string"}, "plan": {"type": "string"},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}}}
LINE = {"type": "object", "properties": {"line_id": {"type": "string"}, "phone_number": {"type": "string"},
                                         "status": {"type": "string"}, "data_used_gb": {"type": "number"}}}
BILL = {"type": "object", "properties": {"bill_id": {"type": "string"}, "customer_id": {"type": "string"},
                                         "amount_due": {"type": "number"}, "status": {"type": "string"}}}
SAILING = {"type": "object", "properties": {
    "sailing": {"type": "string"}, "route": {"type": "object", "properties": {
        "from": {"type": "string"}, "to": {"type": "string"}}}, "date": {"type": "string"}, "seats": {"type": "integer"}}}
STATE = {
    "customers": {
        "C1001": {"customer_id": "C1001", "full_name": "Ana Ruiz", "phone_number": "555-123-2002",
                  "date_of_birth": "1985-03-02", "plan": "gold", "address": {"city": "Austin", "zip": "78701"},
                  "line_ids": ["L1001", "L1002"]},
        "C1002": {"customer_id": "C1002", "full_name": "Ben Ode", "phone_number": "555-987-1111",
                  "date_of_birth": "1990-11-20", "plan": "basic", "address": {"city": "Reno", "zip": "89501"},
                  "line_ids": ["L2001"]}},
    "lines": {"L1001": {"line_id": "L1001", "phone_number": "555-123-2002", "status": "active", "data_used_gb": 3.2},
              "L1002": {"line_id": "L1002", "phone_number": "555-123-2003", "status": "suspended",
                        "data_used_gb": 0.0},
              "L2001": {"line_id": "L2001", "phone_number": "555-987-1111", "status": "active",
                        "data_used_gb": 12.5}},
    "bills": {"B1": {"bill_id": "B1", "customer_id": "C1001", "amount_due": 42.5, "status": "unpaid"},
              "B2": {"bill_id": "B2", "customer_id": "C1001", "amount_due": 40.0, "status": "paid"},
              "B3": {"bill_id": "B3", "customer_id": "C1002", "amount_due": 25.0, "status": "unpaid"}},
    "sailings": [
        {"sailing": "S1", "route": {"from": "OSL", "to": "KEL"}, "date": "2025-05-01", "seats": 10},
        {"sailing": "S2", "route": {"from": "OSL", "to": "KEL"}, "date": "2025-05-02", "seats": 0},
        {"sailing": "S3", "route": {"from": "KEL", "to": "OSL"}, "date": "2025-05-01", "seats": 5},
        {"sailing": "S4", "route": {"from": "OSL", "to": "HIR"}, "date": "2025-05-01", "seats": 7}]}


def _tool(name: str, parameters: list[str], response: dict) -> dict:
    return {"name": name, "description": name.replace("_", " ").capitalize() + ".",
            "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in parameters}},
            "response": response}


WORLD = parse_world({"name": "telco", "initial_state": STATE, "tools": [
    _tool("get_customer_by_phone", ["phone_number"], CUSTOMER),
    _tool("get_customer_by_name", ["full_name", "dob"], CUSTOMER),
    _tool("get_details_by_id", ["id"], {"anyOf": [CUSTOMER, LINE, BILL]}),
    _tool("list_bills", ["customer_id"], {"type": "array", "items": BILL}),
    _tool("search_sailings", ["from", "to", "date"],
          {"type": "object", "properties": {"sailings": {"type": "array", "items": SAILING},
                                            "count": {"type": "integer"}}}),
    _tool("list_sailings_from", ["origin"], {"type": "object", "properties": {
        "results": {"type": "array", "items": SAILING}}})]})


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def _answer(backend, name: str, **arguments):
    generation = generate(backend, WORLD, Call(name, arguments))
    sample = generation.samples[0]
    assert sample.checks.ok, sample.checks
    return json.loads(sample.response)


def _customer(customer_id: str) -> dict:
    return {k: v for k, v in STATE["customers"][customer_id].items() if k != "line_ids"}


def test_a_record_is_found_by_any_of_its_fields_or_by_a_record_it_owns(backend):
    assert _answer(backend, "get_customer_by_phone", phone_number="555-987-1111") == _customer("C1002")
    # the second line's phone is no customer's own: the customer is the one whose lines hold it
    assert _answer(backend, "get_customer_by_phone", phone_number="555-123-2003") == _customer("C1001")
    assert _answer(backend, "get_customer_by_name", full_name="Ben Ode", dob="1990-11-20") == _customer("C1002")


def test_a_union_answer_is_the_variant_of_the_record_the_id_names(backend):
    assert _answer(backend, "get_details_by_id", id="L1002") == STATE["lines"]["L1002"]
    assert _answer(backend, "get_details_by_id", id="B3") == STATE["bills"]["B3"]
    assert _answer(backend, "get_details_by_id", id="C1001") == _customer("C1001")


def test_an_array_answer_and_a_listing_filtered_by_a_nested_field_hold_exactly_the_matching_records(backend):
    assert _answer(backend, "list_bills", customer_id="C1001") == [STATE["bills"]["B1"], STATE["bills"]["B2"]]
    sailings = STATE["sailings"]
    found = _answer(backend, "search_sailings", **{"from": "OSL", "to": "KEL", "date": "2025-05-01"})
    assert found == {"sailings": [sailings[0]], "count": 1}
    assert _answer(backend, "search_sailings", **{"from": "OSL", "to": "KEL"})["sailings"] == sailings[:2]
    assert _answer(backend, "list_sailings_from", origin="OSL") == {"results": [sailings[0], sailings[1], sailings[3]]}


def test_a_listing_item_the_nested_filter_excludes_is_flagged():
    wrong = {"sailings": [STATE["sailings"][2]], "count": 1}  # KEL -> OSL, asked OSL -> KEL
    report = check_step(WORLD, Call("search_sailings", {"from": "OSL", "to": "KEL"}), json.dumps(wrong))
    assert not report.ok and "from" in json.dumps(report.to_json())


def test_echo_plus_plus_gets_the_same_copies_an_array_answer_and_a_union_variant():
    from wmstudio.train.world_model.baselines import TrainingAnswers, baseline_response

    def echo(name: str, **arguments) -> object:
        return json.loads(baseline_response("echo_plus_plus", WORLD, Call(name, arguments), STATE, TrainingAnswers(),
                                            []))

    assert echo("list_bills", customer_id="C1002") == [STATE["bills"]["B3"]]
    assert echo("get_details_by_id", id="B1").items() >= STATE["bills"]["B1"].items()  # echo+'s own `id` beside
