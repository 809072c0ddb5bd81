"""Pinned errors a world can explain: the code chosen under a pinned `status: "error"` is one the world states, a
transient failure any service gives, or a sign-in failure only where the world has a sign-in; a check flags any
other code, naming it."""

from __future__ import annotations

import json
import random

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.explained_codes import explains, signs_in
from wmstudio.world.checks.report import check_step
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world
from wmstudio.world.steering.anchors import Anchor


def _world(name: str):
    return load_world(DEMO_WORLDS_DIR / f"{name}.json")


def test_a_sign_in_failure_is_explained_only_where_the_world_signs_in():
    retail, payments = _world("retail"), _world("payments")
    assert not signs_in(retail) and signs_in(payments)
    assert not explains(retail, "UNAUTHENTICATED")
    assert explains(payments, "TOKEN_EXPIRED")
    assert explains(retail, "RATE_LIMITED") and explains(retail, "ORDER_NOT_FOUND")
    assert not explains(retail, "WIDGET_MELTED")


def test_the_check_flags_a_code_the_world_cannot_explain_naming_it():
    retail = _world("retail")
    call = Call("get_order", {"order_id": "ORD-23411"})
    answer = {"order_id": "ORD-23411", "order_status": "", "placed_on": "", "delivered_on": "", "total_cents": 0,
              "refunded_cents": 0, "items": [], "error": "UNAUTHENTICATED", "message": "Authentication failed.",
              "status": "error"}
    report = check_step(retail, call, json.dumps(answer))
    assert not report.ok
    assert any(line.startswith("error: 'UNAUTHENTICATED' is a code the world cannot explain (the world has no "
                               "sign-in") for line in report.invented)
    transient = {**answer, "error": "RATE_LIMITED", "message": "Too many requests."}
    assert check_step(retail, call, json.dumps(transient)).ok


@pytest.fixture(scope="module")
def backend():
    return load_backend()


@pytest.mark.parametrize("name", ["retail", "airline", "filesystem", "records"])
def test_a_pinned_error_on_an_ok_call_answers_a_code_the_world_explains(backend, name):
    world, sim = _world(name), get_simulator(name)
    rng, seen = random.Random(name), 0
    while seen < 4:
        call = sim.valid_call(world.initial_state, rng)
        if sim.step(world.initial_state, call)[1]["status"] != "ok":
            continue
        seen += 1
        answer = json.loads(generate(backend, world, call, [Anchor("status", "error")]).samples[0].response)
        assert answer["status"] == "error" and explains(world, answer["error"]), (call, answer["error"])


def test_an_error_message_is_composed_from_the_worlds_own_words_and_the_calls_ids():
    from wmstudio.world.heads.code_messages import composed_message
    from wmstudio.world.spec import parse_world

    world = parse_world({
        "name": "seedbank",
        "tools": [{"name": "fulfil_test", "description": "Fulfil a test. Errors: TEST_NOT_FOUND unknown id; FORBIDDEN "
                   "not the owner; INVALID_STATE not requested/confirmed.",
                   "parameters": {"type": "object", "properties": {"test_id": {"type": "string"},
                                                                   "curator_id": {"type": "string"}}}},
                  {"name": "close_test", "description": "Close a test.",
                   "parameters": {"type": "object", "properties": {"test_id": {"type": "string"}}}}],
        "rules": [{"text": "close_test: only an open test's curator (else NOT_CURATOR)"}]})
    fulfil = Call("fulfil_test", {"test_id": "gt_jNE7dY", "curator_id": "2568005"})
    assert composed_message(world, fulfil, "FORBIDDEN") == "Not the owner: gt_jNE7dY, 2568005."
    close = Call("close_test", {"test_id": "gt_jNE7dY"})
    assert composed_message(world, close, "NOT_CURATOR") == "Only an open test's curator: gt_jNE7dY."
    assert composed_message(world, close, "RATE_LIMITED") == "Too many requests; retry later: gt_jNE7dY."
    assert composed_message(world, close, "TEST_LOCKED") == "Test locked: gt_jNE7dY."
    signed = Call("close_test", {"session_token": "plsess_f4i0v1sWWTvpVFhaYS3ED58S", "test_id": "gt_jNE7dY"})
    assert composed_message(world, signed, "TEST_LOCKED") == "Test locked: gt_jNE7dY."  # a credential is never quoted
