"""The simulated worlds: their policies, purity, the steering vocabulary, and that their own responses always
fit the response schemas and satisfy the world's rules (so corpus rows and checks never disagree)."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from wmstudio.problems import InvalidInput
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, load_world
from wmstudio.world.steering.directives import (
    DIRECTIVE_VOCABULARY,
    Directive,
    parse_directive,
    parse_directives,
    steering,
)

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "worlds"
WORLDS = sorted(SIMULATORS)


def step(world: str, state: dict, tool: str, directives: tuple = (), /, **arguments):
    return get_simulator(world).step(state, Call(tool, arguments), directives)


# --- registry, world files, shapes ---------------------------------------------------------------------------


def test_registry_has_five_worlds_and_names_them_on_a_typo():
    assert set(WORLDS) == {"retail", "airline", "filesystem", "records", "payments"}
    with pytest.raises(KeyError, match="retail"):
        get_simulator("retial")


@pytest.mark.parametrize("name", WORLDS)
def test_demo_world_file_loads_and_equals_the_simulators_world_for_seed_0(name):
    sim = get_simulator(name)
    loaded = load_world(ASSETS / f"{name}.json")
    assert loaded == sim.world(sim.initial_state(random.Random(0)))
    assert loaded.simulator == name and loaded.task and loaded.rules


@pytest.mark.parametrize("name", WORLDS)
def test_response_schemas_are_closed_all_required_and_end_in_status(name):
    for tool in get_simulator(name).world().tools:
        schema = tool.response
        properties = list(schema["properties"])
        assert schema["type"] == "object" and set(schema["required"]) == set(properties), tool.name
        assert schema["additionalProperties"] is False
        assert properties[-3:] == ["error", "message", "status"]
        assert {"ok", "error"} <= set(schema["properties"]["status"]["enum"])
        Draft202012Validator.check_schema(schema)
        Draft202012Validator.check_schema(tool.parameters)


@pytest.mark.parametrize("name", WORLDS)
def test_initial_state_is_random_per_seed_but_reproducible(name):
    sim = get_simulator(name)
    assert sim.initial_state(random.Random(7)) == sim.initial_state(random.Random(7))
    assert sim.initial_state(random.Random(7)) != sim.initial_state(random.Random(8))


# --- the property test: every response fits its schema and every rule, under every directive ------------------

DIRECTIVE_CHOICES = [(), (), ("inject_error: SERVICE_UNAVAILABLE",), ("empty_result",), ("page_size: 2",),
                     ("rate_limit",), ("auth_failure",), ("partial_success",), ("verbose",),
                     ("partial_success", "verbose"), ("page_size: 1", "empty_result")]


@pytest.mark.parametrize("name", WORLDS)
def test_random_episodes_fit_the_schemas_and_rules_and_never_mutate_state(name):
    sim = get_simulator(name)
    validators = {t.name: Draft202012Validator(t.response) for t in sim.world().tools}
    rng = random.Random(f"property-{name}")
    outcomes = set()
    for episode in range(30):
        initial = sim.initial_state(rng)
        state, history = initial, []
        for _ in range(rng.randrange(2, 8)):
            call = sim.agent_call(state, rng, invalid=rng.random() < 0.3)
            directives = rng.choice(DIRECTIVE_CHOICES)
            before = copy.deepcopy(state)
            new_state, response = sim.step(state, call, directives)
            assert state == before, f"{name}: step mutated its input on {call}"
            errors = [e.message for e in validators[call.name].iter_errors(response)]
            assert not errors, (call, directives, response, errors)
            world = sim.world(initial, directives)  # the world carries its steering, as a corpus row's does
            report = check_step(world, call, json.dumps(response), history=history)
            assert report.ok, (call, directives, response, report.to_json())
            outcomes.add(response["status"])
            history.append(HistoryStep(call=call, response=response))
            state = new_state
    assert {"ok", "error"} <= outcomes


@pytest.mark.parametrize("name", WORLDS)
def test_invalid_calls_get_api_errors_not_exceptions(name):
    sim = get_simulator(name)
    state = sim.initial_state(random.Random(1))
    same, response = sim.step(state, Call("drop_database", {}))
    assert same is state and response["status"] == "error" and response["error"] == "UNKNOWN_TOOL"
    auth = {}
    if name == "payments":
        token, state = _login(state)
        auth = {"session_token": token}
    for tool in sim.world().tools:
        required = [key for key in tool.parameters.get("required", []) if key != "session_token"]
        if not required:
            continue
        _, response = sim.step(state, Call(tool.name, auth))
        assert response["status"] == "error" and response["error"] == "MISSING_ARGUMENT"
        assert f"'{required[0]}'" in response["message"]
        kinds = {key: tool.parameters["properties"][key]["type"] for key in required}
        wrong = {key: 12345 if kind == "string" else "twelve" for key, kind in kinds.items()}
        _, response = sim.step(state, Call(tool.name, {**auth, **wrong}))
        assert response["error"] == "INVALID_ARGUMENT" and "must be" in response["message"], (tool.name, response)
        _, response = sim.step(state, Call(tool.name, {**auth, **wrong, "colour": "red"}))
        assert response["status"] == "error"


def test_same_state_and_call_give_the_same_response():
    for name in WORLDS:
        sim = get_simulator(name)
        rng = random.Random(3)
        state = sim.initial_state(rng)
        for _ in range(10):
            call = sim.agent_call(state, rng)
            assert sim.step(state, call) == sim.step(copy.deepcopy(state), call)
            state = sim.step(state, call)[0]


# --- retail policy ----------------------------------------------------------------------------------------------


def retail_state() -> dict:
    def order(oid, status, delivered_on, total, refunded=0):
        return {"id": oid, "status": status, "placed_on": "2025-02-01", "delivered_on": delivered_on,
                "total_cents": total, "refunded_cents": refunded,
                "items": [{"sku": "SKU-1042", "name": "Wireless Mouse", "qty": 1, "price_cents": total}]}

    return {"today": "2025-03-14", "customer": {"id": "CUS-1", "name": "Dana", "email": "d@example.com"},
            "orders": [order("ORD-1", "delivered", "2025-03-01", 5000), order("ORD-2", "delivered", "2025-02-11", 4000),
                       order("ORD-3", "shipped", "", 3000), order("ORD-4", "pending", "", 2000),
                       order("ORD-5", "delivered", "2025-02-12", 1000, refunded=400)],
            "refunds": []}


def test_retail_refunds_follow_the_delivery_window_and_the_amount_left():
    state = retail_state()
    state, ok = step("retail", state, "refund_order", order_id="ORD-1", amount_cents=3000)
    assert ok["status"] == "ok" and ok["refund_processed"] and ok["refund_id"] == "RF-70001"
    assert (ok["amount_refunded_cents"], ok["total_refunded_cents"], ok["order_total_cents"]) == (3000, 3000, 5000)
    _, too_much = step("retail", state, "refund_order", order_id="ORD-1", amount_cents=2001)
    assert too_much["error"] == "AMOUNT_EXCEEDS_REFUNDABLE" and not too_much["refund_processed"]
    state, rest = step("retail", state, "refund_order", order_id="ORD-1", amount_cents=2000)
    assert rest["total_refunded_cents"] == 5000 and rest["refund_id"] == "RF-70002"
    _, again = step("retail", state, "refund_order", order_id="ORD-1", amount_cents=1)
    assert again["error"] == "ALREADY_REFUNDED"
    # delivered 31 days before today: closed; 30 days: still open (and only 600 of 1000 left)
    assert step("retail", state, "refund_order", order_id="ORD-2", amount_cents=100)[1]["error"] == "REFUND_WINDOW_EXPIRED"
    assert step("retail", state, "refund_order", order_id="ORD-5", amount_cents=601)[1]["error"] == "AMOUNT_EXCEEDS_REFUNDABLE"
    assert step("retail", state, "refund_order", order_id="ORD-5", amount_cents=600)[1]["status"] == "ok"
    assert step("retail", state, "refund_order", order_id="ORD-3", amount_cents=100)[1]["error"] == "ORDER_NOT_DELIVERED"
    missing = step("retail", state, "refund_order", order_id="ORD-9", amount_cents=100)[1]
    assert missing["error"] == "ORDER_NOT_FOUND" and missing["order_id"] == "ORD-9" and missing["status"] == "error"


def test_retail_cancels_only_orders_that_have_not_shipped():
    state = retail_state()
    assert step("retail", state, "cancel_order", order_id="ORD-3")[1]["error"] == "ALREADY_SHIPPED"
    state, cancelled = step("retail", state, "cancel_order", order_id="ORD-4")
    assert cancelled["cancelled"] and cancelled["order_status"] == "cancelled" and cancelled["refunded_cents"] == 2000
    assert step("retail", state, "cancel_order", order_id="ORD-4")[1]["error"] == "ALREADY_CANCELLED"
    assert step("retail", state, "refund_order", order_id="ORD-4", amount_cents=1)[1]["error"] == "ORDER_CANCELLED"


def test_retail_world_carries_the_canonical_refund_rule():
    rules = {rule.text: rule.check for rule in get_simulator("retail").world().rules}
    check = rules["An error status means no refund was processed"]
    assert 'response.status != "error" || response.refund_processed == false' in check
    world, call = get_simulator("retail").world(retail_state()), Call("refund_order", {"order_id": "ORD-1", "amount_cents": 5})
    incoherent = {"order_id": "ORD-1", "refund_id": "", "refund_processed": True, "amount_refunded_cents": 5,
                  "total_refunded_cents": 5, "order_total_cents": 5000, "error": "NOT_DELIVERED", "message": "",
                  "status": "error"}
    report = check_step(world, call, json.dumps(incoherent))
    assert not report.ok
    assert "An error status means no refund was processed" in [v["rule"] for v in report.rule_violations]


# --- airline policy ---------------------------------------------------------------------------------------------


def airline_state() -> dict:
    fares = lambda base: {"basic": base, "standard": base + 5000, "flex": base + 15000}
    flight = lambda number, date, seats, base: {
        "flight": number, "origin": "SFO", "destination": "JFK", "date": date, "departs": "08:15",
        "seats_left": seats, "fares": fares(base)}
    booking = lambda ref, number, fare, pax, paid: {
        "booking_id": ref, "flight": number, "fare": fare, "passengers": pax, "paid_cents": paid, "status": "confirmed"}
    return {"today": "2025-06-01", "traveller": "Ana Costa",
            "flights": [flight("NX100", "2025-06-10", 3, 20000), flight("NX200", "2025-06-10", 1, 22000),
                        flight("NX300", "2025-06-11", 0, 18000)],
            "bookings": [booking("BASIC1", "NX100", "basic", 1, 20000), booking("STAND2", "NX100", "standard", 2, 50000),
                         booking("FLEXX3", "NX100", "flex", 1, 35000)]}


def test_airline_fare_rules_for_cancellation():
    state = airline_state()
    _, basic = step("airline", state, "cancel_booking", booking_id="BASIC1")
    assert basic["cancelled"] and basic["refund_cents"] == 0
    _, standard = step("airline", state, "cancel_booking", booking_id="STAND2")
    assert (standard["fee_cents"], standard["refund_cents"]) == (20000, 30000)
    state, flex = step("airline", state, "cancel_booking", booking_id="FLEXX3")
    assert (flex["fee_cents"], flex["refund_cents"]) == (0, 35000)
    assert state["flights"][0]["seats_left"] == 4  # the seat went back on sale
    assert step("airline", state, "cancel_booking", booking_id="FLEXX3")[1]["error"] == "ALREADY_CANCELLED"


def test_airline_changes_cost_fees_and_fare_difference_and_basic_cannot_change():
    state = airline_state()
    assert step("airline", state, "change_booking", booking_id="BASIC1", new_flight="NX200")[1]["error"] == "CHANGE_NOT_ALLOWED"
    assert step("airline", state, "change_booking", booking_id="STAND2", new_flight="NX200")[1]["error"] == "NOT_ENOUGH_SEATS"
    state, flex = step("airline", state, "change_booking", booking_id="FLEXX3", new_flight="NX200")
    assert flex["changed"] and (flex["change_fee_cents"], flex["fare_difference_cents"], flex["total_due_cents"]) == (0, 2000, 2000)
    assert [f["seats_left"] for f in state["flights"][:2]] == [4, 0]


def test_airline_bookings_charge_published_fares_and_respect_seats():
    state = airline_state()
    assert step("airline", state, "book_flight", flight="NX300", fare="basic", passengers=1)[1]["error"] == "SOLD_OUT"
    assert step("airline", state, "book_flight", flight="NX100", fare="flex", passengers=4)[1]["error"] == "NOT_ENOUGH_SEATS"
    state, booked = step("airline", state, "book_flight", flight="NX100", fare="standard", passengers=2)
    assert booked["charged_cents"] == 2 * 25000 and re.fullmatch(r"[A-Z2-9]{6}", booked["booking_id"])
    assert state["flights"][0]["seats_left"] == 1
    _, found = step("airline", state, "get_booking", booking_id=booked["booking_id"])
    assert (found["passengers"], found["paid_cents"], found["booking_status"]) == (2, 50000, "confirmed")
    _, search = step("airline", state, "search_flights", origin="SFO", destination="JFK", date="2025-06-10", fare="flex")
    assert search["total"] == 2 and [f["price_cents"] for f in search["flights"]] == [35000, 37000]


# --- filesystem semantics ---------------------------------------------------------------------------------------


def fs_state() -> dict:
    return {"user": "alex", "cwd": "/home/alex",
            "dirs": ["/", "/etc", "/home", "/home/alex", "/home/alex/docs", "/tmp"],
            "files": {"/etc/hosts": "127.0.0.1 localhost\n", "/home/alex/docs/a.md": "# A\n",
                      "/home/alex/docs/b.md": "# B\n", "/home/alex/notes.txt": "hello\n"}}


def test_filesystem_paths_listing_reading_and_errno_errors():
    state = fs_state()
    _, listing = step("filesystem", state, "ls")
    assert listing["path"] == "/home/alex" and [e["name"] for e in listing["entries"]] == ["docs", "notes.txt"]
    _, text = step("filesystem", state, "cat", path="docs/../notes.txt")
    assert (text["path"], text["content"], text["size"]) == ("/home/alex/notes.txt", "hello\n", 6)
    assert step("filesystem", state, "cat", path="docs")[1]["error"] == "EISDIR"
    missing = step("filesystem", state, "cat", path="nope.txt")[1]
    assert missing["error"] == "ENOENT" and "No such file or directory" in missing["message"]
    assert step("filesystem", state, "ls", path="notes.txt")[1]["error"] == "ENOTDIR"
    _, found = step("filesystem", state, "find", path="/", name="*.md")
    assert found["matches"] == ["/home/alex/docs/a.md", "/home/alex/docs/b.md"] and found["count"] == 2


def test_filesystem_writes_mkdir_mv_rm_and_the_read_only_area():
    state = fs_state()
    assert step("filesystem", state, "mkdir", path="a/b")[1]["error"] == "ENOENT"
    state, made = step("filesystem", state, "mkdir", path="a/b", parents=True)
    assert made["created"] and {"/home/alex/a", "/home/alex/a/b"} <= set(state["dirs"])
    state, moved = step("filesystem", state, "mv", source="notes.txt", destination="a")
    assert moved["destination"] == "/home/alex/a/notes.txt" and "/home/alex/notes.txt" not in state["files"]
    state, _ = step("filesystem", state, "mv", source="docs/a.md", destination="/tmp/x.md")
    assert step("filesystem", state, "mv", source="docs/b.md", destination="/tmp/x.md")[1]["error"] == "EEXIST"
    assert step("filesystem", state, "rm", path="/etc/hosts")[1]["error"] == "EACCES"
    assert step("filesystem", state, "mkdir", path="/etc/app")[1]["error"] == "EACCES"
    assert step("filesystem", state, "rm", path="docs")[1]["error"] == "EISDIR"
    assert step("filesystem", state, "rm", path="/home/alex", recursive=True)[1]["error"] == "EBUSY"
    state, removed = step("filesystem", state, "rm", path="a", recursive=True)
    assert removed["removed"] == 3 and not any(p.startswith("/home/alex/a") for p in [*state["dirs"], *state["files"]])


# --- records pagination -----------------------------------------------------------------------------------------


def all_pages(state: dict, directives: tuple = (), **query) -> list[dict]:
    pages, token = [], None
    while True:
        args = dict(query, **({"page_token": token} if token else {}))
        _, page = step("records", state, "search_records", directives, **args)
        assert page["status"] == "ok", page
        pages.append(page)
        if page["last_page"]:
            return pages
        token = page["next_page_token"]
        assert token and len(pages) < 50


@pytest.mark.parametrize("query", [{}, {"plan": "pro"}, {"city": "Denver", "account_status": "active"},
                                   {"plan": "enterprise", "page_size": 2}, {"name_contains": "LAB"}])
def test_records_filters_apply_before_pagination_with_exact_totals_and_stable_pages(query):
    sim = get_simulator("records")
    state = sim.initial_state(random.Random(11))
    expected = [r["id"] for r in state["records"]
                if all(query.get(k) in (None, r[k]) for k in ("plan", "city", "account_status"))
                and query.get("name_contains", "").lower() in r["name"].lower()]
    pages = all_pages(state, **query)
    listed = [r["id"] for page in pages for r in page["records"]]
    assert listed == expected  # every match once, in id order
    assert {page["total"] for page in pages} == {len(expected)}
    assert [page["page"] for page in pages] == list(range(1, len(pages) + 1))
    assert all(not page["last_page"] for page in pages[:-1]) and pages[-1]["next_page_token"] == ""
    for number, page in enumerate(pages, start=1):  # page numbers give the same pages as tokens, every time
        by_number = step("records", state, "search_records", **dict(query, page=number))[1]
        assert by_number["records"] == page["records"]
        assert step("records", state, "search_records", **dict(query, page=number))[1] == by_number


def test_records_page_tokens_belong_to_their_search():
    state = get_simulator("records").initial_state(random.Random(2))
    first = step("records", state, "search_records", page_size=2)[1]
    wrong = step("records", state, "search_records", plan="free", page_token=first["next_page_token"])[1]
    assert wrong["error"] == "INVALID_PAGE_TOKEN" and wrong["records"] == [] and wrong["total"] == 0
    assert step("records", state, "search_records", page_token="garbage!")[1]["error"] == "INVALID_PAGE_TOKEN"
    both = step("records", state, "search_records", page=2, page_token=first["next_page_token"])[1]
    assert both["error"] == "INVALID_ARGUMENT"
    beyond = step("records", state, "search_records", page=99)[1]
    assert beyond["records"] == [] and beyond["last_page"] and beyond["total"] == len(state["records"])


def test_records_bulk_tag_reports_unknown_ids():
    state = get_simulator("records").initial_state(random.Random(2))
    known = state["records"][0]["id"]
    state, tagged = step("records", state, "tag_records", ids=[known, "ACC-0000"], tag="vip")
    assert (tagged["updated"], tagged["failed_ids"], tagged["status"]) == (1, ["ACC-0000"], "partial")
    assert "vip" in step("records", state, "get_record", id=known)[1]["tags"]
    assert step("records", state, "tag_records", ids=[known], tag="Not OK")[1]["error"] == "INVALID_TAG"


# --- payments auth ----------------------------------------------------------------------------------------------


def _login(state: dict) -> tuple[str, dict]:
    new_state, response = step("payments", state, "login", **state["login"])
    assert response["status"] == "ok", response
    return response["session_token"], new_state


def test_payments_auth_tokens_and_key_formats():
    state = get_simulator("payments").initial_state(random.Random(5))
    assert step("payments", state, "get_balance")[1]["error"] == "UNAUTHENTICATED"
    stale = state["sessions"][0]["token"]
    assert step("payments", state, "get_balance", session_token=stale)[1]["error"] == "TOKEN_EXPIRED"
    assert step("payments", state, "get_balance", session_token="plsess_" + "x" * 32)[1]["error"] == "INVALID_TOKEN"
    wrong = step("payments", state, "login", email=state["login"]["email"], password="hunter2")[1]
    assert wrong["error"] == "INVALID_CREDENTIALS" and wrong["session_token"] == ""
    token, state = _login(state)
    assert re.fullmatch(r"plsess_[A-Za-z0-9]{32}", token)
    balance = step("payments", state, "get_balance", session_token=token)[1]
    assert balance["status"] == "ok" and balance["available_cents"] == state["balance"]["available_cents"]
    _, key = step("payments", state, "create_api_key", session_token=token, label="checkout")
    assert re.fullmatch(r"pl_live_[A-Za-z0-9]{32}", key["api_key"]) and key["key_id"].startswith("key_")


def test_payments_charges_and_refunds_follow_the_amounts():
    state = get_simulator("payments").initial_state(random.Random(5))
    token, state = _login(state)
    good = next(c for c in state["customers"] if c["card_ok"])
    bad = next(c for c in state["customers"] if not c["card_ok"])
    args = {"session_token": token, "amount_cents": 2500, "currency": "usd"}
    assert step("payments", state, "create_charge", customer_id=bad["id"], **args)[1]["error"] == "CARD_DECLINED"
    state, charge = step("payments", state, "create_charge", customer_id=good["id"], **args)
    assert charge["amount_cents"] == 2500 and charge["charge_id"].startswith("ch_")
    state, refund = step("payments", state, "refund_charge", session_token=token, charge_id=charge["charge_id"],
                         amount_cents=1000)
    assert (refund["amount_refunded_cents"], refund["total_refunded_cents"]) == (1000, 1000)
    too_much = step("payments", state, "refund_charge", session_token=token, charge_id=charge["charge_id"],
                    amount_cents=1501)[1]
    assert too_much["error"] == "AMOUNT_EXCEEDS_CHARGE" and not too_much["refunded"]
    state, rest = step("payments", state, "refund_charge", session_token=token, charge_id=charge["charge_id"])
    assert rest["amount_refunded_cents"] == 1500 and rest["total_refunded_cents"] == 2500


# --- steering directives ----------------------------------------------------------------------------------------


def test_parse_directive_reads_the_vocabulary_and_leaves_free_text_alone():
    assert parse_directive("inject_error: card_declined") == Directive("inject_error", "CARD_DECLINED")
    assert parse_directive("  Page_Size = 3 ") == Directive("page_size", 3)
    assert parse_directive("verbose") == Directive("verbose")
    assert parse_directive("Respond like a tired legacy SOAP service") is None
    assert parse_directives(["rate_limit", "be terse"]) == [Directive("rate_limit")]
    assert steering(["page_size: 4", "partial_success"]).page_size == 4
    for bad in ("page_size: lots", "page_size: 0", "inject_error", "inject_error: not a code!", "verbose: yes"):
        with pytest.raises(InvalidInput, match="directives"):
            parse_directive(bad)
    assert {"inject_error", "empty_result", "page_size", "rate_limit", "auth_failure", "partial_success",
            "verbose"} == set(DIRECTIVE_VOCABULARY)
    assert Directive("page_size", 2).text() == "page_size: 2"


def example_calls(name: str) -> tuple[dict, dict[str, Call], list[dict]]:
    """A state, one call per role (listing, lookup, partial-capable write) and the history that led there."""
    if name == "retail":
        return retail_state(), {"list": Call("list_orders", {}), "lookup": Call("get_order", {"order_id": "ORD-1"}),
                                "partial": Call("refund_order", {"order_id": "ORD-1", "amount_cents": 4000})}, []
    if name == "airline":
        return airline_state(), {
            "list": Call("search_flights", {"origin": "SFO", "destination": "JFK", "date": "2025-06-10"}),
            "lookup": Call("get_booking", {"booking_id": "BASIC1"}),
            "partial": Call("book_flight", {"flight": "NX100", "fare": "basic", "passengers": 3})}, []
    if name == "filesystem":
        return fs_state(), {"list": Call("ls", {"path": "docs"}), "lookup": Call("cat", {"path": "notes.txt"}),
                            "partial": Call("rm", {"path": "docs", "recursive": True})}, []
    state = get_simulator(name).initial_state(random.Random(4))
    if name == "records":
        ids = [r["id"] for r in state["records"][:4]]
        return state, {"list": Call("search_records", {}), "lookup": Call("get_record", {"id": ids[0]}),
                       "partial": Call("tag_records", {"ids": ids, "tag": "vip"})}, []
    login = Call("login", dict(state["login"]))
    after, response = get_simulator(name).step(state, login)
    token = response["session_token"]
    charge = next(c for c in state["charges"] if c["refunded_cents"] == 0)
    return after, {"list": Call("list_charges", {"session_token": token}),
                   "lookup": Call("get_balance", {"session_token": token}),
                   "partial": Call("refund_charge", {"session_token": token, "charge_id": charge["id"]})}, \
        [HistoryStep(call=login, response=response)]


LIST_FIELD = {"retail": "orders", "airline": "flights", "filesystem": "entries", "records": "records",
              "payments": "charges"}
TOTAL_FIELD = {"retail": "total", "airline": "total", "filesystem": "count", "records": "total", "payments": "total"}
AUTH_ERROR = {"payments": "TOKEN_EXPIRED"}


@pytest.mark.parametrize("name", WORLDS)
def test_every_directive_is_obeyed(name):
    sim = get_simulator(name)
    state, calls, history = example_calls(name)
    world = sim.world(state)
    for call in calls.values():
        for directive, code in (("inject_error: QUOTA_EXCEEDED", "QUOTA_EXCEEDED"), ("rate_limit", "RATE_LIMITED"),
                                ("auth_failure", AUTH_ERROR.get(name, "UNAUTHENTICATED"))):
            same, response = sim.step(state, call, [directive])
            assert same is state and response["status"] == "error" and response["error"] == code, (call, directive)

    _, plain = sim.step(state, calls["list"])
    assert plain["status"] == "ok" and plain[TOTAL_FIELD[name]] >= 2 and plain["message"] == ""
    _, empty = sim.step(state, calls["list"], ["empty_result"])
    assert empty[LIST_FIELD[name]] == [] and empty[TOTAL_FIELD[name]] == 0 and empty["status"] == "ok"
    _, small = sim.step(state, calls["list"], ["page_size: 1"])
    assert len(small[LIST_FIELD[name]]) == 1 and small[TOTAL_FIELD[name]] == plain[TOTAL_FIELD[name]]
    if name != "payments":  # a balance has nothing to be empty of
        _, gone = sim.step(state, calls["lookup"], ["empty_result"])
        assert gone["status"] == "error" and gone["error"] in ("ORDER_NOT_FOUND", "BOOKING_NOT_FOUND", "ENOENT", "NOT_FOUND")
    _, verbose = sim.step(state, calls["lookup"], ["verbose"])
    assert verbose["status"] == "ok" and verbose["message"]
    _, full = sim.step(state, calls["partial"])
    assert full["status"] == "ok"
    _, partial = sim.step(state, calls["partial"], ["partial_success"])
    assert partial["status"] == "partial", partial
    assert check_step(world, calls["partial"], json.dumps(partial), history=history).ok
    assert partial != full and partial["error"] == ""


@pytest.mark.parametrize("name", WORLDS)
def test_a_state_of_the_wrong_shape_is_reported_not_a_traceback(name):
    sim = get_simulator(name)
    call = sim.agent_call(sim.initial_state(random.Random(0)), random.Random(0))
    if name == "payments":
        call = Call("login", {"email": "a@b.example", "password": "x"})
    for broken in ({}, {"orders": 3, "flights": None, "records": "x", "dirs": 1, "files": [], "login": 2}):
        with pytest.raises(InvalidInput, match="initial_state"):
            sim.step(broken, call)
    with pytest.raises(InvalidInput, match="initial_state"):
        sim.step(["not", "an", "object"], call)
