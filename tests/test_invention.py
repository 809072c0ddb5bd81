"""The invention checks (world/checks/invention.py): what an answer makes up is named by field with no rule written,
and the simulators' own answers raise nothing."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import ASSETS_DIR
from wmstudio.world.checks.invention import invention_lines, read_only, stutters
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, load_world

RETAIL = ASSETS_DIR / "worlds" / "retail.json"


def retail():
    world = load_world(RETAIL)
    return world, world.initial_state["orders"]


def listing(orders: list[dict]) -> dict:
    return {"orders": [{"order_id": o["id"], "order_status": o["status"], "total_cents": o["total_cents"],
                        "placed_on": o["placed_on"]} for o in orders],
            "total": len(orders), "page": 1, "has_more": False, "error": "", "message": "", "status": "ok"}


def lookup(order: dict) -> dict:
    return {"order_id": order["id"], "order_status": order["status"], "placed_on": order["placed_on"],
            "delivered_on": order["delivered_on"], "total_cents": order["total_cents"],
            "refunded_cents": order["refunded_cents"], "items": order["items"], "error": "", "message": "",
            "status": "ok"}


def test_a_listing_that_names_an_order_nothing_holds_is_flagged_by_its_field():
    world, orders = retail()
    call = Call("list_orders", {})
    assert check_step(world, call, json.dumps(listing(orders))).ok
    made_up = listing(orders)
    made_up["orders"][1]["order_id"] = "ORD-90417"
    report = check_step(world, call, json.dumps(made_up))
    assert not report.ok
    assert report.invented == ["orders[1].order_id: lists ORD-90417, which neither the state nor the history holds "
                               "(a read-only answer lists only what exists)"]
    assert report.to_json()["invented"] == report.invented


def test_an_id_the_history_created_is_not_invented():
    world, orders = retail()
    made = listing(orders)
    made["orders"].append({"order_id": "ORD-55555", "order_status": "pending", "total_cents": 100,
                           "placed_on": "2025-07-17"})
    earlier = HistoryStep(call=Call("create_order", {"sku": "SKU-1042"}),
                          response={"order_id": "ORD-55555", "status": "ok"})
    assert invention_lines(world, Call("list_orders", {}), world.tool("list_orders"), made, [earlier]) == []
    assert invention_lines(world, Call("list_orders", {}), world.tool("list_orders"), made, [])


def test_a_lookup_whose_fields_contradict_the_record_it_names_is_flagged():
    world, orders = retail()
    order = orders[0]
    call = Call("get_order", {"order_id": order["id"]})
    assert check_step(world, call, json.dumps(lookup(order))).ok
    wrong = {**lookup(order), "placed_on": "2024-01-01", "total_cents": order["total_cents"] + 1}
    report = check_step(world, call, json.dumps(wrong))
    assert not report.ok
    assert [line.split(":")[0] for line in report.invented] == ["placed_on", "total_cents"]
    assert f"the record the call names holds {order['placed_on']!r}" in report.invented[0]
    # once an earlier step named the record it may have changed: the initial state is no longer the truth
    touched = HistoryStep(call=Call("cancel_order", {"order_id": order["id"]}), response={"status": "ok"})
    assert check_step(world, call, json.dumps(wrong), history=[touched]).invented == []


def test_an_error_answer_and_a_write_are_not_held_to_the_record():
    world, orders = retail()
    order = orders[0]
    failed = {**lookup(order), "total_cents": 1, "status": "error", "error": "ORDER_NOT_FOUND"}
    assert invention_lines(world, Call("get_order", {"order_id": order["id"]}), world.tool("get_order"), failed) == []
    assert not read_only(world.tool("refund_order")) and not read_only(world.tool("cancel_order"))
    assert read_only(world.tool("get_order")) and read_only(world.tool("list_orders"))


@pytest.mark.parametrize("text, repeated", [
    ("F_on_status_on_status_accountpl", "on status"),
    ("refunds close after after 30 days", "after"),
    ("The order was was shipped", "was"),
])
def test_stuttering_text_is_flagged(text, repeated):
    assert stutters({"ticket": {"title": text}}) == [
        f"ticket.title: repeats {repeated!r} (a stutter, not text a tool writes)"]


@pytest.mark.parametrize("text", ["Order ORD-1 was refunded 10 10 times", "ok", "a_b_c", "line one\nline one",
                                  "SKU-1042 SKU-1042", "on status: shipped, on time",
                                  "Hut HUT_64471 is aborted", "Table table_users not found"])
def test_numbers_ids_letters_and_file_text_do_not_stutter(text):
    assert stutters({"note": text}) == []


def test_the_simulators_own_answers_raise_no_invention_line():
    answers = 0
    for name in sorted(SIMULATORS):
        sim, rng = get_simulator(name), random.Random(f"invention-{name}")
        for _ in range(12):
            initial = sim.initial_state(rng)
            world, state, history = sim.world(initial), initial, []
            for _ in range(5):
                call = sim.agent_call(state, rng, invalid=rng.random() < 0.3)
                state, response = sim.step(state, call, rng.choice([[], ["verbose"], ["page_size: 2"]]))
                lines = invention_lines(world, call, world.tool(call.name), response, history)
                assert lines == [], (name, call, response)
                history.append(HistoryStep(call=call, response=response))
                answers += 1
    assert answers >= 200


def test_the_check_command_prints_what_was_made_up(tmp_path):
    world, orders = retail()
    made_up = listing(orders)
    made_up["orders"][0]["order_id"] = "ORD-31337"
    (tmp_path / "call.json").write_text(json.dumps({"name": "list_orders", "arguments": {}}), encoding="utf-8")
    (tmp_path / "answer.json").write_text(json.dumps(made_up), encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(RETAIL), "--call", str(tmp_path / "call.json"),
                                      "--response", str(tmp_path / "answer.json")])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["invented"][0].startswith("orders[0].order_id: lists ORD-31337")
