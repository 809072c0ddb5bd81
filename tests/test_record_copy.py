"""Copying the record a call names, whole: a lookup on a world no one here trained on (tau2-bench's retail) answers
with the record, items, maps and nulls included; a write keeps what it does not touch and leaves the rest to the
model; the layout takes the record's shape (exact items and entries, nulls, the branch of a union, slots wide
enough); a user's anchor still wins; the switch turns all of it off."""

from __future__ import annotations

import json

import pytest
from generated_calls import generated_calls

from wmstudio.locations import ASSETS_DIR
from wmstudio.model.canvas.canvas import build_canvas
from wmstudio.model.canvas.constraints import END
from wmstudio.model.canvas.layout import NULL_SHAPE, ExactEntries, ExactItems, Holds
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.record_copy import named_record_of, record_shape, record_values
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.field_kinds import parse
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world
from wmstudio.world.steering.anchors import Anchor

TAU = ASSETS_DIR / "benchmarks" / "tau2-retail"


@pytest.fixture(scope="module")
def tau():
    world = load_world(TAU / "world.json")
    cases = [json.loads(line) for line in (TAU / "cases.jsonl").read_text().splitlines() if line.strip()]
    return world, cases


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def _case(cases, tool):
    """The first case of `tool` that tau2's code answered with an object (its response parsed)."""
    for case in cases:
        truth = parse(case["response"]) if isinstance(case["response"], str) else case["response"]
        if case["tool"] == tool and isinstance(truth, dict):
            return {**case, "response": truth}
    raise AssertionError(f"no {tool} case")


def test_a_lookup_on_an_unseen_world_answers_with_the_whole_record(tau, backend):
    world, cases = tau
    case = _case(cases, "get_order_details")
    call = Call(case["tool"], case["arguments"])
    order = world.initial_state["orders"][case["arguments"]["order_id"]]
    assert len(order["items"]) > 3  # more items than an array gets slots for by default
    response = json.loads(generate(backend, world, call).samples[0].response)
    assert response == case["response"]  # every item, every option entry, the nulls of an order never returned
    alone = json.loads(generate(backend, world, call, settings=SamplerSettings(record_copy=False)).samples[0].response)
    assert alone != case["response"]  # switched off, the heads see only the cut prompt


def test_a_user_lookup_takes_each_payment_method_in_its_own_branch(tau, backend):
    world, cases = tau
    case = _case(cases, "get_user_details")
    response = json.loads(generate(backend, world, Call(case["tool"], case["arguments"])).samples[0].response)
    truth = case["response"]
    assert response["email"] == truth["email"]  # longer than an email slot's budget: the slot is widened
    assert response["payment_methods"] == truth["payment_methods"]  # gift cards keep `balance`, paypal its source


def test_a_write_keeps_what_its_arguments_do_not_touch_and_leaves_the_rest_to_the_model(tau):
    world, _ = tau
    order_id = next(k for k, o in world.initial_state["orders"].items() if o["status"] == "pending")
    call = Call("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})
    named = named_record_of(world, call)
    assert not named.reads and named.touches("cancel_reason") and not named.touches("address")
    schema = world.tool(call.name).response
    values = record_values(named, schema)
    order = world.initial_state["orders"][order_id]
    assert values["address.city"] == order["address"]["city"]
    assert values["items[0].name"] == order["items"][0]["name"]
    assert "status" not in values and "cancel_reason" not in values  # what a write changes is the model's
    assert values["user_id"] == order["user_id"]  # a write never changes whose record it is
    shape = record_shape(named, schema)
    assert shape["cancel_reason"] is None  # touched: laid out from the schema, not pinned null
    assert shape["exchange_items"] is NULL_SHAPE  # untouched and absent: null


def test_a_history_answer_naming_the_record_updates_it():
    simulator = get_simulator("retail")
    world = simulator.world()
    order = next(o for o in world.initial_state["orders"] if o["status"] == "processing")
    cancel = Call("cancel_order", {"order_id": order["id"]})
    state, answer = simulator.step(world.initial_state, cancel)
    named = named_record_of(world, Call("get_order", {"order_id": order["id"]}), [HistoryStep(cancel, answer)])
    assert named.record["status"] == answer["order_status"] == "cancelled"
    values = record_values(named, world.tool("get_order").response)
    assert values["order_status"] == "cancelled" and "status" not in values  # `status` is the outcome here


def test_a_demo_lookup_is_the_simulators_answer_and_an_anchor_still_wins(backend):
    simulator = get_simulator("retail")
    world = simulator.world()
    order = world.initial_state["orders"][0]
    call = Call("get_order", {"order_id": order["id"]})
    _, truth = simulator.step(world.initial_state, call)
    response = json.loads(generate(backend, world, call).samples[0].response)
    assert {k: v for k, v in response.items() if k != "message"} == {k: v for k, v in truth.items() if k != "message"}
    pinned = generate(backend, world, call, [Anchor("total_cents", 1)]).samples[0]
    assert json.loads(pinned.response)["total_cents"] == 1


def test_the_layout_takes_the_records_shape():
    from wmstudio.model.network.tokenizer import train_tokenizer
    from wmstudio.store.seeding import demo_worlds

    tokenizer = train_tokenizer([w.dumps() for w in demo_worlds()], vocab_size=800)
    schema = {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object", "additionalProperties": {"type": "string"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "email": {"type": "string", "format": "email"}}}
    email = "someone.with.a.long.address@example.com"
    shape = {"items": ExactItems([None, None]), "options": ExactEntries({"color": None, "size": None}),
             "note": NULL_SHAPE, "email": Holds(email)}
    canvas = build_canvas(tokenizer, schema, shape=shape)
    text = canvas.decode(canvas.tokens)
    assert '"note":null' in text and '"color":' in text and '"size":' in text
    assert [s.path for s in canvas.spans if s.path.startswith("items")] == ["items[0]", "items[1]"]
    assert not any(s.kind == END for s in canvas.spans)  # exact: no end spans to decide
    filled = canvas.with_values({"email": email, "items[1]": "ID-2"})
    assert email in filled.decode(filled.tokens) and "ID-2" in filled.decode(filled.tokens)
    plain = build_canvas(tokenizer, schema)
    assert next(s for s in plain.spans if s.path == "email").length < len(tokenizer(email)["input_ids"])


def test_a_lookup_answers_a_referenced_records_field_by_its_kind():
    """`dock_station_label`, `rider_full_name`: a lookup's answer often names a field of a record the named one refers
    to by id. On generated worlds, every such key the simulator answered is found from the state, with its value,
    and never a key the record itself holds."""
    from wmstudio.world.checks.invention import read_only

    found = 0
    for world, call, truth in generated_calls(11, 40, 30):
        tool = world.tool(call.name)
        named = named_record_of(world, call)
        if tool is None or not read_only(tool) or named is None or truth.get("status") != "ok":
            continue
        objects = [truth, *(value for value in truth.values() if isinstance(value, dict))]  # flat or nested
        for key, value in ((k, v) for answer in objects for k, v in answer.items() if k in named.joined):
            assert key not in named.record
            assert named.joined[key] == value, (world.name, call, key)
            found += 1
    assert found >= 10


def test_the_identifiers_a_call_sends_are_echoed_ok_or_not():
    """On generated worlds (snake_case and camelCase), every top-level field named as an identifier the call sends
    holds it in the simulator's answer, errors included; generation writes them before denoising, so the shipped
    model echoes them where it wrote "" or another id."""
    from wmstudio.model.heads.call_echoes import call_identifiers

    seen = {"ok": 0, "error": 0, "camel": 0}
    refused = []
    for world, call, truth in generated_calls(11, 30, 20, invalid=True):
        tool = world.tool(call.name)
        if tool is None:
            continue
        for path, value in call_identifiers(call, tool.response).items():
            assert truth[path] == value, (world.name, call, path)
            seen[truth["status"] if truth["status"] in seen else "ok"] += 1
            seen["camel"] += path != path.lower()
            if truth["status"] == "error":
                refused.append((world, call, path, value))
    assert seen["ok"] >= 20 and seen["error"] >= 20 and seen["camel"] >= 10
    backend = load_backend()
    for world, call, path, value in refused[:12]:  # before the echo, 4 of these answered "" or another id
        assert json.loads(generate(backend, world, call).samples[0].response)[path] == value, (world.name, call)


def test_an_answer_that_did_what_was_asked_holds_the_arguments_it_names_as_sent():
    """A top-level field named as an argument holds it in every ok answer of generated worlds (times, labels,
    amounts), and the shipped model writes them where it wrote "" or shifted a time; a path is left out, as the
    filesystem answers it absolute."""
    from wmstudio.model.heads.call_echoes import call_echoes

    done = []
    for world, call, truth in generated_calls(11, 30, 20):
        tool = world.tool(call.name)
        if tool is None or truth["status"] != "ok":
            continue
        for path, value in call_echoes(call, tool.response).items():
            assert truth[path] == value, (world.name, call, path)
            done.append((world, call, path, value))
    assert len(done) >= 30
    assert call_echoes(Call("mkdir", {"path": "docs"}), {"properties": {"path": {"type": "string"}}}) == {}
    backend = load_backend()
    written = [json.loads(generate(backend, world, call).samples[0].response) for world, call, _, _ in done[:12]]
    right = sum(answer.get(path) == value for answer, (_, _, path, value) in zip(written, done))
    statuses = sum(answer.get("status") == "ok" for answer in written)
    assert right == statuses, (right, statuses)  # every answer the outcome head lets succeed holds them


def test_a_refused_call_naming_the_record_leaves_it_as_it_was():
    """A refusal echoes the order id beside neutral values (`order_total_cents: 0`); a later lookup of the order
    still reads its total from the state, not the refusal's zero."""
    simulator = get_simulator("retail")
    world = simulator.world()
    order = next(o for o in world.initial_state["orders"] if o["status"] == "processing")
    refund = Call("refund_order", {"order_id": order["id"], "amount_cents": 100})
    _, refused = simulator.step(world.initial_state, refund)
    assert refused["status"] == "error" and refused["order_total_cents"] == 0
    named = named_record_of(world, Call("get_order", {"order_id": order["id"]}), [HistoryStep(refund, refused)])
    assert named.record["total_cents"] == order["total_cents"] > 0


def test_the_id_the_call_sends_beats_another_id_in_the_record_it_names(backend):
    """A record filed under the id the call sends but holding another in its own id field (a state written by
    hand): the answer is about what the call names, so it echoes the call's id, with the record's other fields."""
    from wmstudio.world.spec import WorldSpec
    from wmstudio.world.tools.tool import Tool

    text = {"type": "string"}
    tool = Tool("get_parcel", "Look up a parcel.", {"type": "object", "properties": {"parcel_id": text},
                                                     "required": ["parcel_id"]},
                {"type": "object", "properties": {"parcel_id": text, "label": text,
                                                  "status": {"type": "string", "enum": ["ok", "error"]}}})
    world = WorldSpec("depot", "Parcels.", {"parcels": {"PCL-1001": {"parcel_id": "PCL-7777", "label": "Fragile"}}},
                      [tool])
    answer = json.loads(generate(backend, world, Call("get_parcel", {"parcel_id": "PCL-1001"}),
                                 [Anchor("status", "ok")]).samples[0].response)
    assert answer["parcel_id"] == "PCL-1001" and answer["label"] == "Fragile"


def test_a_camel_case_key_names_the_records_own_id_by_its_kind(backend):
    """`playlistId` in a wrapped answer is the `id` of the record under `playlists`, as `playlist_id` is: the
    record copy writes it (a 24-character id its slot is widened for), not the model."""
    from wmstudio.world.spec import WorldSpec
    from wmstudio.world.tools.tool import Tool

    text = {"type": "string"}
    tool = Tool("getPlaylist", "Look up a playlist.", {"type": "object", "properties": {"playlistId": text},
                                                        "required": ["playlistId"]},
                {"type": "object", "properties": {
                    "playlist": {"type": "object", "properties": {"playlistId": text, "title": text}},
                    "status": {"type": "string", "enum": ["ok", "error"]}}})
    key = "0bbabce8eeb4b8a3eeff8d4d"
    world = WorldSpec("radio", "Playlists.", {"playlists": {key: {"id": key, "title": "Night Shift"}}}, [tool])
    call = Call("getPlaylist", {"playlistId": key})
    assert record_values(named_record_of(world, call), tool.response)["playlist.playlistId"] == key
    answer = json.loads(generate(backend, world, call, [Anchor("status", "ok")]).samples[0].response)
    assert answer["playlist"] == {"playlistId": key, "title": "Night Shift"}


def test_an_argument_left_out_is_echoed_as_the_default_its_schema_states():
    """The airline's `search_flights` prices the basic fare when none is asked ("Fare class to price (default
    basic)"); the answer's `fare` says so, and a BFCL default of "None" is no value."""
    from wmstudio.model.heads.call_echoes import call_echoes

    airline = get_simulator("airline")
    world = airline.world()
    tool = world.tool("search_flights")
    flight = world.initial_state["flights"][0]
    call = Call("search_flights", {"origin": flight["origin"], "destination": flight["destination"],
                                   "date": flight["date"]})
    _, truth = airline.step(world.initial_state, call)
    assert call_echoes(call, tool.response, tool.parameters)["fare"] == truth["fare"] == "basic"
    asked = Call("search_flights", {**call.arguments, "fare": "flex"})
    assert call_echoes(asked, tool.response, tool.parameters)["fare"] == "flex"
    bfcl = {"properties": {"unit": {"type": "string", "default": "None"}}}
    assert call_echoes(Call("get_weather", {}), {"properties": {"unit": {"type": "string"}}}, bfcl) == {}
    answer = json.loads(generate(load_backend(), world, call).samples[0].response)
    assert answer["fare"] == "basic"
