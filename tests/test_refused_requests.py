"""Requests a world turns away before reading its state: arguments that break the tool's schema and page tokens no
answer gave. The world model answers them with the world's own code for the refusal (never a page of invented
records), agrees with the simulators where they refuse, and a corpus row that pages on carries the page that gave
its token."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.invention import listing_slips
from wmstudio.world.checks.refused_requests import refused_request, unissued_token
from wmstudio.world.corpus.rows import with_issuing_page
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, parse_world
from wmstudio.world.tools.reading import read_only
from wmstudio.world.tools.schema import listed_property

PAGE = {"type": "object", "properties": {
    "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
    "next_cursor": {"type": "string"}, "status": {"type": "string", "enum": ["ok", "error"]},
    "error": {"type": "string"}, "message": {"type": "string"}}}


def _world(rules: list[str], description: str = "List items.", error: dict | None = None):
    response = json.loads(json.dumps(PAGE))
    if error is not None:
        response["properties"]["error"] = error
    return parse_world({"name": "shop", "rules": rules, "initial_state": {"items": [{"id": "I1"}, {"id": "I2"}]},
                        "tools": [{"name": "list_items", "description": description, "response": response,
                                   "parameters": {"type": "object", "properties": {
                                       "limit": {"type": "integer", "maximum": 50}, "cursor": {"type": "string"},
                                       "session_token": {"type": "string"}}, "required": ["session_token"]}}]})


def test_a_refusal_takes_the_code_the_world_states_for_it():
    world = _world(['A failed call answers status "error" (a missing argument MISSING_PARAMETER, a malformed one '
                    'BAD_REQUEST)'], "List items. Errors: STALE_CURSOR a cursor of another search.")
    too_many = refused_request(world, Call("list_items", {"session_token": "s1", "limit": 80}))
    assert (too_many.code, too_many.message) == ("BAD_REQUEST", "Argument 'limit' must be at most 50.")
    made_up = refused_request(world, Call("list_items", {"session_token": "s1", "cursor": "page2"}))
    assert made_up.code == "STALE_CURSOR" and made_up.argument == "cursor"
    assert refused_request(world, Call("list_items", {"session_token": "s1", "limit": 5})) is None


def test_a_world_that_states_nothing_refuses_with_the_codes_any_api_gives():
    plain = _world([])
    assert refused_request(plain, Call("list_items", {"session_token": "s1", "limit": "ten"})).code \
        == "INVALID_ARGUMENT"
    assert refused_request(plain, Call("list_items", {"session_token": "s1", "cursor": "c9"})).code \
        == "INVALID_ARGUMENT"
    closed = _world([], error={"type": "string", "enum": ["", "OUT_OF_STOCK"]})  # no request code to answer with
    assert refused_request(closed, Call("list_items", {"session_token": "s1", "limit": 80})) is None


def test_no_session_is_the_sign_ins_refusal_not_the_requests():
    assert refused_request(_world([]), Call("list_items", {"limit": 5})) is None


def test_a_token_an_earlier_answer_gave_for_this_search_is_not_refused():
    call = Call("list_items", {"session_token": "s1", "cursor": "cur-2"})
    gave = HistoryStep(call=Call("list_items", {"session_token": "s1"}),
                       response={"items": [{"id": "I1"}], "next_cursor": "cur-2", "status": "ok"})
    other_search = HistoryStep(call=Call("list_items", {"session_token": "s1", "limit": 1, "kind": "x"}),
                               response={"items": [{"id": "I1"}], "next_cursor": "cur-2", "status": "ok"})
    assert unissued_token(call, [gave]) is None
    assert unissued_token(call, [other_search]) == "cursor"  # a token of another search
    assert unissued_token(call, []) == "cursor"


def test_the_simulators_refuse_what_the_world_model_refuses_with_the_same_code():
    agree = refused = 0
    for name in [*sorted(SIMULATORS), *(f"synthetic:5:{index}" for index in range(10))]:
        simulator, rng = get_simulator(name), random.Random(name)
        for _ in range(60):
            state, history = simulator.initial_state(rng), []
            for _ in range(rng.randint(0, 3)):
                earlier = simulator.agent_call(state, rng, invalid=rng.random() < 0.2)
                state, answer = simulator.step(state, earlier)
                history.append(HistoryStep(call=earlier, response=answer))
            call = simulator.agent_call(state, rng, invalid=rng.random() < 0.4)
            history = with_issuing_page(simulator, state, call, history)
            refusal = refused_request(simulator.world(state), call, history)
            if refusal is None:
                continue
            _, truth = simulator.step(state, call)
            refused += 1
            agree += truth.get("status") == "error" and truth.get("error") == refusal.code
    assert refused >= 100 and agree / refused >= 0.93, (agree, refused)


def test_a_continuation_row_carries_the_page_that_gave_its_token():
    simulator = get_simulator("records")
    state = simulator.initial_state(random.Random(3))
    first = Call("search_records", {"page_size": 2})
    _, page = simulator.step(state, first)
    assert page["next_page_token"]
    call = Call("search_records", {"page_size": 2, "page_token": page["next_page_token"]})
    history = with_issuing_page(simulator, state, call, [])
    assert [step.call for step in history] == [first] and unissued_token(call, history) is None


@pytest.mark.usefixtures("one_thread")
def test_the_model_answers_a_made_up_page_token_with_the_worlds_code_and_pages_on_with_a_real_one():
    backend = load_backend()
    simulator = get_simulator("synthetic:7:3")
    world = simulator.world()
    tool = next(t for t in world.tools if read_only(t) and listed_property(t.response) is not None
                and "cursor" in (t.parameters.get("properties") or {}))
    key = listed_property(tool.response)[0]
    first = Call(tool.name, {"maxResults": 2})
    _, page = simulator.step(world.initial_state, first)
    made_up = Call(tool.name, {"maxResults": 2, "cursor": "page2"})
    refused = json.loads(generate(backend, world, made_up).samples[0].response)
    _, truth = simulator.step(world.initial_state, made_up)
    assert (refused["status"], refused["error"]) == ("error", truth["error"])
    assert refused[key] == [] and truth["error"] in tool.description  # the code the tool's description states
    token = next(value for name, value in page.items() if "next" in name.lower())
    paged_on = Call(tool.name, {"maxResults": 2, "cursor": token})
    answer = json.loads(generate(backend, world, paged_on, history=[HistoryStep(call=first, response=page)])
                        .samples[0].response)
    _, truth = simulator.step(world.initial_state, paged_on)
    assert answer["status"] == "ok" and answer[key] == truth[key] and not listing_slips(paged_on, answer)


def test_odd_and_broken_parameter_schemas_refuse_only_what_they_say():
    nullable = parse_world({"name": "w", "tools": [{"name": "find", "parameters": {"type": "object", "properties": {
        "q": {"type": ["string", "null"]}}}}]})
    assert refused_request(nullable, Call("find", {"q": None})) is None
    assert refused_request(nullable, Call("find", {"q": 3})).message \
        == "Argument 'q' must be a string or null, got an integer."
    for parameters in ({"type": "object", "properties": {"q": {"minimum": "x"}}},  # past the world's own check:
                       {"type": "object", "properties": {"q": {"type": "whatever"}}},  # a world built in code
                       {"type": "object", "required": 5}, {"type": "object", "properties": [1, 2]}):
        broken = replace(nullable, tools=[replace(nullable.tools[0], parameters=parameters)])
        refused_request(broken, Call("find", {"q": 3}))  # no exception, whatever the schema holds
