"""Episode state: a write takes effect for every later call. The state an episode reaches is worked out from what
the world said (answers, a write's arguments, created and deleted records), reproduces the simulators' own states
when fed their answers, is what the shipped model's later lookups answer from, and is what a lookup is checked
against."""

from __future__ import annotations

import json
import random
import re

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.studio.world_step import read_step_request, world_step
from wmstudio.world.checks.report import check_step
from wmstudio.world.episode.state import episode_state
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world

TRACKED_WORLDS = ("retail", "airline", "filesystem", "records")  # payments' balance moves with no answer saying so


def _world(name: str):
    return load_world(DEMO_WORLDS_DIR / f"{name}.json")


@pytest.mark.parametrize("name", TRACKED_WORLDS)
def test_fed_the_simulators_answers_the_state_is_the_simulators_after_every_step(name):
    world, sim, rng = _world(name), get_simulator(name), random.Random(f"episode-{name}")
    steps = changing = 0
    for _ in range(12):
        state, history = world.initial_state, []
        for _ in range(5):
            call = sim.valid_call(state, rng) if rng.random() < 0.85 else sim.invalid_call(state, rng)
            after, truth = sim.step(state, call)
            history.append(HistoryStep(call, truth))
            assert episode_state(world, history).state == after, (call, truth)
            steps, changing = steps + 1, changing + (after != state)
            state = after
    assert steps == 60 and changing >= 5


def test_an_error_changes_nothing_and_a_created_record_takes_its_siblings_shape():
    world = _world("airline")
    refused = HistoryStep(Call("cancel_booking", {"booking_id": "2EZVPE"}),
                          {"error": "ALREADY_CANCELLED", "message": "", "status": "error"})
    assert episode_state(world, [refused]).state == world.initial_state
    booked = HistoryStep(Call("book_flight", {"flight": "NX721", "fare": "flex", "passengers": 1}),
                         {"booking_id": "Q7KX2P", "flight": "NX721", "fare": "flex", "passengers": 1,
                          "seats_confirmed": 1, "charged_cents": 14900, "error": "", "message": "", "status": "ok"})
    tracked = episode_state(world, [booked])
    made = tracked.state["bookings"][-1]
    assert made == {"booking_id": "Q7KX2P", "flight": "NX721", "fare": "flex", "passengers": 1,
                    "paid_cents": 14900, "status": "confirmed"}
    flight = next(f for f in tracked.state["flights"] if f["flight"] == "NX721")
    assert flight["seats_left"] == 3  # four before, one booked
    assert {change.op for change in tracked.steps[0]} == {"add", "set"}


def test_a_removed_file_and_a_moved_folder_leave_the_state_as_a_shell_would():
    world = _world("filesystem")
    history = [HistoryStep(Call("rm", {"path": "notes.txt"}),  # relative to the working folder
                           {"path": "/home/maria/notes.txt", "removed": 1, "error": "", "message": "", "status": "ok"}),
               HistoryStep(Call("mv", {"source": "/home/maria/docs", "destination": "/tmp"}),
                           {"source": "/home/maria/docs", "destination": "/tmp/docs", "moved": True, "error": "",
                            "message": "", "status": "ok"})]
    state = episode_state(world, history).state
    assert "/home/maria/notes.txt" not in state["files"]
    assert "/tmp/docs/todo.md" in state["files"] and "/home/maria/docs/todo.md" not in state["files"]
    assert "/tmp/docs" in state["dirs"] and "/home/maria/docs" not in state["dirs"]


def test_a_lookup_contradicting_the_record_or_the_history_is_flagged_under_its_own_key():
    world = _world("retail")
    order = next(o for o in world.initial_state["orders"] if o["status"] == "processing")
    read = Call("get_order", {"order_id": order["id"]})
    answer = {"order_id": order["id"], "order_status": "delivered", "placed_on": order["placed_on"],
              "delivered_on": "", "total_cents": order["total_cents"], "refunded_cents": 0, "items": order["items"],
              "error": "", "message": "", "status": "ok"}
    lines = check_step(world, read, json.dumps(answer)).invented
    assert any(line.startswith("order_status: 'delivered'") and "'processing' (status)" in line for line in lines)
    cancelled = HistoryStep(Call("cancel_order", {"order_id": order["id"]}),
                            {"order_id": order["id"], "cancelled": True, "order_status": "cancelled",
                             "refunded_cents": order["total_cents"], "error": "", "message": "", "status": "ok"})
    stale = {**answer, "order_status": "processing"}
    lines = check_step(world, read, json.dumps(stale), history=[cancelled]).invented
    assert any("order_status: 'processing', but the history changed it to 'cancelled'" in line for line in lines)
    right = {**answer, "order_status": "cancelled", "refunded_cents": order["total_cents"]}
    assert check_step(world, read, json.dumps(right), history=[cancelled]).invented == []


@pytest.fixture(scope="module")
def backend():
    return load_backend()


@pytest.mark.parametrize(("name", "write", "read", "field", "expected"), [
    ("retail", Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 3499}),
     Call("get_order", {"order_id": "ORD-22930"}), "refunded_cents", 3499),
    ("airline", Call("cancel_booking", {"booking_id": "2EZVPE"}), Call("get_booking", {"booking_id": "2EZVPE"}),
     "booking_status", "cancelled"),
    ("records", Call("tag_records", {"ids": ["ACC-1097"], "tag": "vip"}), Call("get_record", {"id": "ACC-1097"}),
     "tags", ["vip"]),
])
def test_the_shipped_model_reads_back_what_its_own_write_changed(backend, name, write, read, field, expected):
    world = _world(name)
    written = generate(backend, world, write).samples[0].response
    assert json.loads(written)["status"] == "ok"
    answer = json.loads(generate(backend, world, read, history=[HistoryStep(write, written)]).samples[0].response)
    assert answer[field] == expected


def test_the_http_step_returns_the_state_after_and_what_it_changed(backend):
    world = _world("retail")
    body = {"world": world.to_json(), "call": {"name": "cancel_order", "arguments": {"order_id": "ORD-23411"}},
            "anchors": {"status": "ok", "order_status": "cancelled"}}
    result = world_step(backend, read_step_request(body, None))
    order = next(o for o in result["state_after"]["orders"] if o["id"] == "ORD-23411")
    assert order["status"] == "cancelled"
    assert {"op": "set", "path": "orders[0].status", "before": "processing", "after": "cancelled"} \
        in result["state_change"]


def test_the_rollouts_tab_shows_what_each_step_changed(tmp_path):
    from wmstudio.store import MadeBy, append_step, create_rollout, open_store, save_world_version
    from wmstudio.ui.rollout_view import render_rollout

    world = _world("retail")
    store = open_store(tmp_path / "studio.db")
    rollout = create_rollout(store, save_world_version(store, world).id, "a refund")
    refund = Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 3499})
    answer = {"order_id": "ORD-22930", "refund_id": "RF-70001", "refund_processed": True,
              "amount_refunded_cents": 3499, "total_refunded_cents": 3499, "order_total_cents": 37896,
              "error": "", "message": "", "status": "ok"}
    append_step(store, rollout.id, refund, json.dumps(answer), MadeBy.by_hand("tester"),
                check_step(world, refund, json.dumps(answer)))
    read = Call("get_order", {"order_id": "ORD-22930"})
    append_step(store, rollout.id, read, json.dumps({"status": "ok"}), MadeBy.by_hand("tester"),
                check_step(world, read, json.dumps({"status": "ok"})))
    body = render_rollout(store, rollout.id).steps
    first, second = body.split("**Step 2**")
    assert "`orders[3].refunded_cents`: `0` → `3499`" in first and "`refunds[0]` added" in first
    assert "State after: unchanged." in second


def test_a_write_answers_the_status_it_moves_its_record_to_and_keeps_the_records_names():
    from wmstudio.world.episode.answers import write_values
    from wmstudio.world.spec import parse_world

    world = parse_world({
        "name": "cellar",
        "initial_state": {"tastings": [{"tasting_id": "ta_1", "label": "Oak Row", "phase": "active"}]},
        "tools": [{"name": "suspend_tasting", "description": "Suspend a tasting (pending/active -> suspended).",
                   "parameters": {"type": "object", "properties": {"tasting_id": {"type": "string"}}},
                   "response": {"type": "object", "properties": {
                       "tasting_id": {"type": "string"}, "label": {"type": "string"},
                       "phase": {"type": "string", "enum": ["pending", "active", "suspended"]},
                       "recorded_at": {"type": "string"}, "status": {"type": "string"}}}},
                  {"name": "get_tasting", "parameters": {"type": "object",
                                                         "properties": {"tasting_id": {"type": "string"}}}}]})
    call = Call("suspend_tasting", {"tasting_id": "ta_1"})
    schema = world.tool("suspend_tasting").response
    assert write_values(world, world.initial_state, call, schema) == {"label": "Oak Row", "phase": "suspended"}
    no_arrow = parse_world({**world.to_json(), "tools": [{**world.to_json()["tools"][0],
                                                           "description": "Suspend a tasting."}]})
    assert write_values(no_arrow, world.initial_state, call, schema)["phase"] == "suspended"  # from the verb
    assert write_values(world, world.initial_state, Call("get_tasting", {"tasting_id": "ta_1"}), schema) == {}


def test_a_refund_draws_the_balance_a_rule_holds_it_against_and_leaves_the_charge_its_amount():
    world = _world("payments")
    charge = world.initial_state["charges"][1]
    balance = world.initial_state["balance"]["available_cents"]
    refund = HistoryStep(Call("refund_charge", {"session_token": "plsess_x", "charge_id": charge["id"],
                                                "amount_cents": 500}),
                         {"charge_id": charge["id"], "refund_id": "re_abc", "refunded": True,
                          "amount_refunded_cents": 500, "total_refunded_cents": charge["refunded_cents"] + 500,
                          "charge_amount_cents": charge["amount_cents"], "error": "", "message": "", "status": "ok"})
    state = episode_state(world, [refund]).state
    after = next(c for c in state["charges"] if c["id"] == charge["id"])
    assert after["amount_cents"] == charge["amount_cents"]  # the refund's amount is not the charge's
    assert after["refunded_cents"] == charge["refunded_cents"] + 500
    assert state["balance"]["available_cents"] == balance - 500  # "INSUFFICIENT_BALANCE: refund over available balance"
    # the first refund takes the world's usual own-id key: `id`, as charges and customers have theirs
    assert state["refunds"] == [{"id": "re_abc", "charge_id": charge["id"], "amount_cents": 500}]
    rest = charge["amount_cents"] - charge["refunded_cents"] - 500
    whole = HistoryStep(Call("refund_charge", {"session_token": "plsess_x", "charge_id": charge["id"]}),
                        {"charge_id": charge["id"], "refund_id": "re_def", "refunded": True,
                         "amount_refunded_cents": rest, "total_refunded_cents": charge["amount_cents"],
                         "charge_amount_cents": charge["amount_cents"], "error": "", "message": "", "status": "ok"})
    state = episode_state(world, [refund, whole]).state  # no amount asked: the answer says what it moved
    assert state["balance"]["available_cents"] == balance - 500 - rest
    assert state["refunds"][-1] == {"id": "re_def", "charge_id": charge["id"], "amount_cents": rest}
    key = HistoryStep(Call("create_api_key", {"session_token": "plsess_x", "label": "mobile"}),
                      {"key_id": "key_N3w", "api_key": "pl_live_" + "Ab3" * 10 + "xy", "label": "mobile",
                       "error": "", "message": "", "status": "ok"})
    made = episode_state(world, [key]).state["api_keys"][-1]
    assert made == {"key_id": "key_N3w", "label": "mobile", "prefix": "pl_live_Ab3A"}  # a secret's head, as shown


def test_a_write_answers_what_its_draw_leaves_its_running_total_and_when_it_happened():
    from wmstudio.world.episode.answers import write_values
    from wmstudio.world.spec import parse_world

    def courses(rules: list[str], description: str = "Redeem a course."):
        return parse_world({
            "name": "courses",
            "initial_state": {"now": "2025-07-15T01:17:00Z",
                              "courses": [{"course_id": "C-1", "credits": 40, "redeemed_units": 2}]},
            "rules": [{"text": text} for text in rules],
            "tools": [{"name": "redeem_course", "description": description,
                       "parameters": {"type": "object", "properties": {"course_id": {"type": "string"},
                                                                       "units": {"type": "integer"}}},
                       "response": {"type": "object", "properties": {
                           "course_id": {"type": "string"}, "remaining": {"type": "integer"},
                           "total_redeemed_units": {"type": "integer"}, "processed_at": {"type": "string"},
                           "expires_at": {"type": "string"}, "status": {"type": "string"}}}}]})

    world = courses(["redeem_course: units × 3 must not exceed credits; remaining is what is left"])
    call = Call("redeem_course", {"course_id": "C-1", "units": 5})
    schema = world.tool("redeem_course").response
    assert write_values(world, world.initial_state, call, schema) == {
        "processed_at": "2025-07-15T01:17:00Z", "remaining": 25, "total_redeemed_units": 7}
    no_rate = courses([], "Redeem units of credits.")
    assert write_values(no_rate, world.initial_state, call, schema)["remaining"] == 35  # one credit a unit
    assert "remaining" not in write_values(courses([]), world.initial_state, call, schema)  # nothing named: no guess


def test_a_sign_in_answers_its_accounts_id_and_makes_a_session_not_a_user():
    from wmstudio.model.heads.record_copy import record_copy
    from wmstudio.world.episode.made import new_ids
    from wmstudio.world.spec import parse_world

    world = parse_world({
        "name": "studio",
        "initial_state": {"students": [{"student_id": "STU_1", "name": "Priya"},
                                       {"student_id": "STU_2", "name": "Efua"}],
                          "api_user": {"username": "priya69", "password": "pw", "student_id": "STU_2"},
                          "active_sessions": [{"session_token": "sess_old", "expires_at": "2025-07-14T18:07:00Z"}]},
        "tools": [{"name": "start_session", "parameters": {"type": "object", "properties": {
                       "username": {"type": "string"}, "password": {"type": "string"}}},
                   "response": {"type": "object", "properties": {
                       "session_token": {"type": "string"}, "student_id": {"type": "string"},
                       "status": {"type": "string"}}}}]})
    call = Call("start_session", {"username": "priya69", "password": "pw"})
    schema = world.tool("start_session").response
    copy = record_copy(world, call, [], schema)
    assert copy.values == {"student_id": "STU_2"}  # the account it signs in to, found by its username
    assert set(new_ids(world, world.initial_state, call, schema, copy.values)) == {"session_token"}
    signed_in = HistoryStep(call, {"session_token": "sess_new", "student_id": "STU_9", "status": "ok"})
    state = episode_state(world, [signed_in]).state
    assert [s["session_token"] for s in state["active_sessions"]] == ["sess_old", "sess_new"]
    assert len(state["students"]) == 2  # a sign-in makes one record: the session


def test_a_refund_the_episode_has_used_up_is_refused_with_the_code_whose_cause_holds(backend):
    """An ok answer would state a running total above the order's (a rule forbids it), so the model refuses it,
    with the code the world states a cause for, not the head's next guess."""
    world = _world("retail")
    order = "ORD-22930"
    total = next(o for o in world.initial_state["orders"] if o["id"] == order)["total_cents"]

    def refunded(amount: int) -> HistoryStep:
        return HistoryStep(Call("refund_order", {"order_id": order, "amount_cents": amount}),
                           {"order_id": order, "refund_id": "RF-70001", "refund_processed": True,
                            "amount_refunded_cents": amount, "total_refunded_cents": amount,
                            "order_total_cents": total, "error": "", "message": "", "status": "ok"})

    def answer(amount: int, history: list[HistoryStep]) -> dict:
        call = Call("refund_order", {"order_id": order, "amount_cents": amount})
        return json.loads(generate(backend, world, call, history=history).samples[0].response)

    assert answer(1, [refunded(total)])["error"] == "ALREADY_REFUNDED"
    assert answer(total - 29000, [refunded(30000)])["error"] == "AMOUNT_EXCEEDS_REFUNDABLE"
    ok = answer(100, [refunded(30000)])
    assert (ok["status"], ok["total_refunded_cents"]) == ("ok", 30100)  # the running total, this call included


def test_a_new_token_keeps_its_siblings_length_and_alphabet_and_the_fields_pattern():
    from wmstudio.world.episode.made import new_ids
    from wmstudio.world.spec import parse_world

    old = "at_" + "c" * 38 + "e9"  # numbered by its last digit: the next number would be one character longer
    world = parse_world({
        "name": "greenrow",
        "initial_state": {"sessions": [{"token": old, "valid_until": "2025-07-14T18:07:00Z"}]},
        "tools": [{"name": "start_session", "parameters": {"type": "object", "properties": {
                       "login": {"type": "string"}}},
                   "response": {"type": "object", "properties": {
                       "token": {"type": "string", "pattern": "^(at_[0-9a-f]{40})?$"},
                       "status": {"type": "string"}}}}]})
    token = new_ids(world, world.initial_state, Call("start_session", {"login": "priya69"}),
                    world.tool("start_session").response)["token"]
    assert token != old and len(token) == len(old) and re.fullmatch(r"at_[0-9a-f]{40}", token)


def _tools(*names: str) -> list[dict]:
    return [{"name": name, "description": "", "parameters": {"type": "object", "properties": {}}} for name in names]


def test_what_is_left_goes_to_the_record_that_holds_it_and_a_transfer_sets_each_end():
    """A write naming two records (a fixture it draws from, the player who draws) sets what is left on the record
    whose field the answer names, never on the other's one number; a transfer sets `fromDosesLeft` and `toDosesLeft`
    on the records its `from`- and `to`- arguments name (camelCase fields as the answer's words)."""
    from wmstudio.world.spec import parse_world

    state = {"fixtures": [{"fixture_id": "FIX-1", "capacity_left": 48}],
             "players": [{"player_id": "PLR-7", "rank": 4}],
             "containers": [{"containerId": "co_A", "dosesLeft": 85}, {"containerId": "co_B", "dosesLeft": 104}]}
    world = parse_world({"name": "yard", "initial_state": state, "tools": _tools("consume_fixture", "moveContainer")})
    consumed = HistoryStep(Call("consume_fixture", {"fixture_id": "FIX-1", "player_id": "PLR-7", "count": 4}),
                           {"fixture_id": "FIX-1", "capacity_left_remaining": 28, "status": "ok"})
    after = episode_state(world, [consumed]).state
    assert after["fixtures"][0]["capacity_left"] == 28 and after["players"][0]["rank"] == 4
    moved = HistoryStep(Call("moveContainer", {"fromContainerId": "co_A", "toContainerId": "co_B", "units": 36}),
                        {"transferred": 36, "fromDosesLeft": 49, "toDosesLeft": 140, "status": "ok"})
    ends = episode_state(world, [moved]).state["containers"]
    assert [c["dosesLeft"] for c in ends] == [49, 140]


def test_a_record_made_in_a_map_keyed_by_id_joins_the_map_under_its_new_id():
    from wmstudio.world.spec import parse_world

    state = {"vaccineLots": {"1092": {"nickname": "Old Lot", "state": "scheduled", "allowance": 10}}}
    world = parse_world({"name": "pawcare", "initial_state": state, "tools": _tools("addVaccineLot")})
    made = HistoryStep(Call("addVaccineLot", {"nickname": "Amber Bay", "allowance": 49}),
                       {"vaccineLotId": "5521", "nickname": "Amber Bay", "state": "scheduled", "status": "ok"})
    lots = episode_state(world, [made]).state["vaccineLots"]
    assert lots["5521"] == {"nickname": "Amber Bay", "state": "scheduled", "allowance": 49}
    assert lots["1092"] == state["vaccineLots"]["1092"]
