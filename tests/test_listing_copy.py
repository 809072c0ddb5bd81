"""Copying a listing whole: a read-only list call on a world no one trained on answers with the records the state
holds for its filters and page, each laid out and written before denoising, with the page's count, its `more` flag
and an empty next-page token where the records found say them."""

from __future__ import annotations

import base64
import json

import pytest
from generated_calls import generated_calls

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.listing_copy import listing_copy, page_values
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.field_kinds import field_leaves
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path
from wmstudio.world.prompt.retrieval import matches, understood
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call


def _listings(count: int):
    """(world, call, simulator's answer, listing copy) of generated worlds' read-only list calls answered ok."""
    for world, call, truth in generated_calls(12, count, 40):
        tool = world.tool(call.name)
        copy = listing_copy(world, call, (), tool.response) if tool is not None else None
        if copy is not None and truth.get("status") == "ok":
            yield world, call, truth, copy


def test_a_listings_written_values_are_the_simulators():
    right = total = calls = 0
    for _, _, truth, copy in _listings(40):
        calls += 1
        answer = {format_path(list(path)): value for path, value in field_leaves(truth)}
        for path, value in copy.values.items():
            total += 1
            right += answer.get(path, object()) == value
    assert calls >= 15 and total >= 200
    assert right / total >= 0.95, (right, total)


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def test_the_shipped_model_lists_the_records_it_was_never_shown_whole(backend):
    checked = 0
    for world, call, truth, _ in _listings(40):
        listed = next((key for key, value in truth.items() if isinstance(value, list) and len(value) >= 2), None)
        if listed is None:
            continue
        response = json.loads(generate(backend, world, call, settings=SamplerSettings()).samples[0].response)
        assert response[listed] == truth[listed], (world.name, call)
        checked += 1
        if checked == 3:
            break
    assert checked == 3


PAGE = {"type": "object", "properties": {"items": {"type": "array"}, "has_more": {"type": "boolean"},
                                         "next_page_token": {"type": "string"}, "total": {"type": "integer"}}}


def test_a_session_token_asks_for_the_first_page_and_a_page_token_for_a_later_one():
    first = page_values(PAGE, "items", matching=2, shown=2, call=Call("list_kegs", {"session_token": "s-9f"}))
    assert first == {"total": 2, "has_more": False, "next_page_token": ""}
    later = page_values(PAGE, "items", matching=2, shown=2, call=Call("list_kegs", {"page_token": "b2Zm"}))
    assert later == {"total": 2}  # where a later page ends is left to the model


def test_a_size_argument_filters_the_records_own_size_and_a_number_sizes_the_page():
    records = [{"keg_id": "K1", "size": "large"}, {"keg_id": "K2", "size": "small"}]
    assert understood({"size": "large"}, records)
    assert [r["keg_id"] for r in records if matches(r, {"size": "large"})] == ["K1"]
    assert understood({"size": 5}, [{"keg_id": "K1", "name": "Amber"}])
    assert all(matches(r, {"size": 5}) for r in [{"keg_id": "K1", "name": "Amber"}])


def _listing_after(world_name: str, calls: list[Call], listing: Call):
    """(the listing copy's values, the simulator's answer as leaves) for `listing` after `calls` were answered."""
    simulator = get_simulator(world_name)
    world = simulator.world()
    state, history = world.initial_state, []
    for call in calls:
        state, answer = simulator.step(state, call)
        assert answer["status"] == "ok", answer
        history.append(HistoryStep(call=call, response=answer))
    _, truth = simulator.step(state, listing)
    copy = listing_copy(world, listing, history, world.tool(listing.name).response)
    assert copy is not None
    return copy.values, {format_path(list(path)): value for path, value in field_leaves(truth)}


def test_a_record_an_earlier_write_created_or_moved_into_the_filter_is_listed_where_the_simulator_lists_it():
    retail = get_simulator("retail").world().initial_state
    pending = next(o["id"] for o in retail["orders"] if o["status"] in ("pending", "processing"))
    values, truth = _listing_after("retail", [Call("cancel_order", {"order_id": pending})],
                                   Call("list_orders", {"status": "cancelled"}))
    assert pending in values.values() and values.items() <= truth.items()

    payments = get_simulator("payments").world().initial_state
    login = Call("login", {"email": payments["login"]["email"], "password": payments["login"]["password"]})
    _, answer = get_simulator("payments").step(payments, login)
    token = answer["session_token"]
    customer = payments["customers"][0]["id"]
    charge = Call("create_charge", {"session_token": token, "customer_id": customer, "amount_cents": 22599,
                                    "currency": "usd"})
    later = Call("create_charge", {**charge.arguments, "amount_cents": 1250})
    values, truth = _listing_after("payments", [login, charge, later], Call("list_charges", {"session_token": token}))
    assert [values["charges[0].amount_cents"], values["charges[1].amount_cents"]] == [1250, 22599]  # newest first
    assert values.items() <= truth.items()


def test_an_empty_page_and_a_page_past_the_end_say_there_is_no_more():
    values, truth = _listing_after("retail", [], Call("list_orders", {"status": "cancelled", "page": 9}))
    assert values["has_more"] is False and values.items() <= truth.items()
    values, truth = _listing_after("records", [], Call("search_records", {"name_contains": "zzzz"}))
    assert values and values.items() <= truth.items()


def test_a_page_with_more_after_it_mints_a_token_that_the_next_call_reads_back():
    records = get_simulator("records").world()
    first_call = Call("search_records", {"page_size": 2})
    first = listing_copy(records, first_call, (), records.tool("search_records").response)
    token = first.values["next_page_token"]
    assert token and first.values["last_page"] is False
    assert token == listing_copy(records, first_call, (), records.tool("search_records").response).values[
        "next_page_token"]  # the same call, the same token
    answer = {"records": [first.values[f"records[{i}].{name}"] for i in range(2)
                          for name in ("id",)], "next_page_token": token}
    answer["records"] = [{"id": value} for value in answer["records"]]
    history = [HistoryStep(call=first_call, response={**answer, "status": "ok"})]
    second = listing_copy(records, Call("search_records", {"page_size": 2, "page_token": token}), history,
                          records.tool("search_records").response)
    assert second is not None
    listed = [value for path, value in second.values.items() if path.endswith(".id")]
    state_ids = [record["id"] for record in records.initial_state["records"]]
    assert listed == state_ids[2:4]  # the page after the one that gave the token


def test_a_page_too_long_for_the_context_is_cut_as_an_api_pages_never_refused(backend):
    """250 accounts and `page_size: 100`: the canvas of all 100 would leave the prompt almost nothing (an exception
    once); the answer lists the first records that fit, counts all 250 and says more follow, with a token."""
    from wmstudio.locations import DEMO_WORLDS_DIR
    from wmstudio.world.spec import parse_world

    raw = json.loads((DEMO_WORLDS_DIR / "records.json").read_text())
    raw["tools"][0]["function"]["parameters"]["properties"]["page_size"]["maximum"] = 500  # a service that allows it
    base = raw["initial_state"]["records"]
    many = [{**base[i % len(base)], "id": f"ACC-{3000 + i}", "tags": []} for i in range(250)]
    big = parse_world({**raw, "initial_state": {"records": many}})
    generation = generate(backend, big, Call("search_records", {"page_size": 100}), settings=SamplerSettings())
    answer = json.loads(generation.samples[0].response)
    assert answer["status"] == "ok" and answer["total"] == 250
    assert 5 <= len(answer["records"]) < 100
    assert [r["id"] for r in answer["records"]] == [r["id"] for r in many[:len(answer["records"])]]
    assert answer["last_page"] is False and answer["next_page_token"]
    next_start = base64.urlsafe_b64decode(answer["next_page_token"] + "==").decode().split(":")[0]
    assert int(next_start) == len(answer["records"])  # the next page starts where this one stopped
