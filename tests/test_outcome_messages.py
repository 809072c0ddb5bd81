"""The messages the outcome head writes to an outcome, learned from training answers: a success says nothing where
the world's answers say nothing (its simulator explains a success only under the `verbose` directive), says what a
verbose world's answers say, and an error's message is learned from every row."""

from __future__ import annotations

import random

from wmstudio.model.heads.outcome_head import Outcome
from wmstudio.model.heads.outcome_messages import OutcomeMessages
from wmstudio.world.grounding import NONE
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call


def test_a_success_is_written_as_the_worlds_answers_write_it_and_an_error_from_every_row():
    simulator = get_simulator("retail")
    rows, worlds = [], {}
    for verbose in (False, True):
        for seed in range(6):
            state = simulator.initial_state(random.Random(seed))
            world = simulator.world(state, ["verbose"] if verbose else [])
            delivered = next(o for o in state["orders"] if o["status"] == "delivered")
            for order_id in (delivered["id"], "ORD-00000"):  # a refund the world makes, one it cannot find
                call = Call("refund_order", {"order_id": order_id, "amount_cents": 100})
                _, response = simulator.step(state, call, world.directives)
                rows.append((world, call, [], response, NONE))
            worlds[verbose] = (world, Call("refund_order", {"order_id": delivered["id"], "amount_cents": 100}))
    messages, fitted = OutcomeMessages.fit(rows)
    assert fitted["rows"] == len(rows)

    schema = simulator.world().tool("refund_order").response
    ok, missing = Outcome("ok", "", 1.0), Outcome("error", "ORDER_NOT_FOUND", 1.0)
    plain_world, plain_call = worlds[False]
    assert messages.message(plain_world, plain_call, [], schema, ok) == ""  # as the simulator answers it
    verbose_world, verbose_call = worlds[True]
    said = messages.message(verbose_world, verbose_call, [], schema, ok)
    assert said and verbose_call.arguments["order_id"] in said  # filled from this call
    unknown = Call("refund_order", {"order_id": "ORD-12345", "amount_cents": 100})
    for world in (plain_world, verbose_world):  # one template for an error, whatever the directive
        assert "ORD-12345" in messages.message(world, unknown, [], schema, missing)
