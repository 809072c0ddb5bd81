"""The prompt's own computed query state: a listing's records found in the state shown, no simulator read.

On the demo worlds, before any turn changed the state, it finds the records the simulators' own retrieval pages
through, in their order; on a world the project never saw it reads the tool's words for order and page size."""

import random

import pytest

from wmstudio.world.prompt.render import RETRIEVAL_LABEL, render
from wmstudio.world.prompt.retrieval import listing_records
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, parse_world
from wmstudio.world.tools import Tool


def _ids(records):
    return [r.get("id") or r.get("flight") for r in records]


@pytest.mark.parametrize("world_name, tool, key", [("retail", "list_orders", "orders_on_page"),
                                                   ("records", "search_records", "records_on_page"),
                                                   ("airline", "search_flights", "flights_on_first_page"),
                                                   ("payments", "list_charges", "charges_on_first_page")])
def test_on_the_demo_worlds_it_finds_the_records_the_simulators_retrieval_pages_through(world_name, tool, key):
    simulator = get_simulator(world_name)
    rng = random.Random(7)
    compared = 0
    for _ in range(400):
        state = simulator.initial_state(rng)
        for _ in range(rng.randint(0, 3)):  # a login or two first, where the world needs one
            state, _ = simulator.step(state, simulator.valid_call(state, rng))
        call = simulator.valid_call(state, rng)
        if call.name != tool:
            continue
        truth = simulator.query_state(state, call)
        if not truth or key not in truth or "page_token" in call.arguments:  # a token no earlier turn gave
            continue
        found = listing_records(simulator.world(state).tool(tool), call, state)
        assert found is not None, call
        assert _ids(found["page"]) == _ids(truth[key]), call
        assert found["matching"] == next(v for k, v in truth.items() if k.endswith("_matching")), call
        compared += 1
    assert compared >= 5


def test_a_page_token_continues_after_the_last_record_its_response_listed():
    from wmstudio.world.history import HistoryStep

    simulator = get_simulator("records")
    world = simulator.world()
    first = Call("search_records", {"page_size": 2})
    state, response = simulator.step(world.initial_state, first)
    token = response["next_page_token"]
    second = Call("search_records", {"page_size": 2, "page_token": token})
    found = listing_records(world.tool("search_records"), second, state, [HistoryStep(first, response)])
    truth = simulator.query_state(state, second)
    assert _ids(found["page"]) == _ids(truth["records_on_page"]) and len(found["page"]) == 2
    assert "page" not in listing_records(world.tool("search_records"), second, state)  # no turn gave the token


def test_a_call_that_lists_nothing_gets_no_retrieval():
    world = get_simulator("retail").world()
    order = world.initial_state["orders"][0]["id"]
    assert listing_records(world.tool("get_order"), Call("get_order", {"order_id": order}), world.initial_state) is None
    assert listing_records(None, Call("list_orders", {}), world.initial_state) is None


def test_on_an_unseen_world_it_reads_the_filters_order_and_page_size_from_the_tool():
    state = {"tickets": [{"ticket_id": f"T-{i}", "queue": "billing" if i % 2 else "tech", "opened": f"2025-01-{i:02d}",
                          "title": f"Ticket number {i}"} for i in range(1, 13)]}
    tool = Tool(name="find_tickets", description="Find support tickets, newest first, 4 per page.",
                parameters={"type": "object", "properties": {"queue": {"type": "string"},
                                                             "title_contains": {"type": "string"},
                                                             "page": {"type": "integer"}}},
                response={"type": "object", "properties": {
                    "tickets": {"type": "array", "items": {"type": "object", "properties": {
                        "ticket_id": {"type": "string"}, "opened": {"type": "string"}}}},
                    "status": {"type": "string"}}})
    first = listing_records(tool, Call("find_tickets", {"queue": "billing"}), state)
    assert first["matching"] == 6 and [r["ticket_id"] for r in first["page"]] == ["T-11", "T-9", "T-7", "T-5"]
    second = listing_records(tool, Call("find_tickets", {"queue": "billing", "page": 2}), state)
    assert [r["ticket_id"] for r in second["page"]] == ["T-3", "T-1"]
    part = listing_records(tool, Call("find_tickets", {"title_contains": "NUMBER 1"}), state)
    assert sorted(r["ticket_id"] for r in part["page"]) == ["T-1", "T-10", "T-11", "T-12"]


def test_the_prompt_shows_it_as_its_computed_query_state_and_can_leave_it_out():
    world = get_simulator("records").world()
    call = Call("search_records", {"plan": "pro"})
    rendered = render(world, call)
    assert f"## COMPUTED QUERY STATE\n{RETRIEVAL_LABEL} " in rendered.text
    assert rendered.shown.query["matching"] == sum(r["plan"] == "pro" for r in world.initial_state["records"])
    assert "## COMPUTED QUERY STATE" not in render(world, call, retrieval=False).text
    given = render(parse_world(world.to_json()), call, computed_state={"note": "mine"})
    assert '## COMPUTED QUERY STATE\n{"note":"mine"}' in given.text  # a state the caller gives is shown as given


def test_a_page_too_big_for_the_budget_keeps_its_first_records_and_says_how_many_were_left_out():
    """Issue 37: a listing whose page did not fit lost its computed query state whole, so every listed id was
    invented; now the page keeps the most of its first records that fit."""
    from wmstudio.world.prompt.render import PromptBudget

    world = get_simulator("records").world()
    call = Call("search_records", {"plan": "pro"})
    whole = render(world, call)
    page = whole.shown.query["page"]
    assert len(page) > 2
    cut, limit = None, len(whole.text)
    while cut is None and limit > 20:  # the largest budget that cuts the page but keeps a record of it
        limit -= 20
        trial = render(world, call, budget=PromptBudget(limit))
        if trial.shown.query is not None and 0 < len(trial.shown.query["page"]) < len(page):
            cut = trial
    assert cut is not None and len(cut.text) <= limit
    kept = len(cut.shown.query["page"])
    assert cut.shown.query["page"] == page[:kept] and cut.shown.query["matching"] == whole.shown.query["matching"]
    assert f"{len(page) - kept} of the computed query state's {len(page)} records" in cut.cut
    assert f"{RETRIEVAL_LABEL} " in cut.text
