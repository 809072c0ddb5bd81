"""A left-to-right world model honours a pinned top-level field by writing its value where the model opens its key
(model/serving/ar_pins.py): with the shipped AR baseline, a steered first try answers the pinned error, as the world model
environment of GRPO needs, where before it only read the pin as a directive and answered ok."""

from __future__ import annotations

import json

import torch
from transformers import AutoTokenizer

from wmstudio.locations import DEFAULT_AR_MODEL, REPO_ROOT
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.ar_pins import CLOSE, PinWriter, closing_tokens, path_pins
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.agent.adversarial import FAILURES, adversarial_scenarios, scenario_family
from wmstudio.world.steering.anchors import Anchor


def _written(writer: PinWriter, text: str) -> str:
    writer.after(text)
    return writer.tokenizer.decode([token for token in writer.queued if token >= 0])


def test_a_pin_is_written_where_its_own_key_opens_and_nowhere_else():
    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / DEFAULT_AR_MODEL)
    pins = path_pins([Anchor("error", "RATE_LIMITED"), Anchor("updated", 0), Anchor("items[0].id", "x")])
    assert pins == {"error": '"RATE_LIMITED"', "updated": "0", "items[0].id": '"x"'}
    assert _written(PinWriter(pins, tokenizer), '{"items":[{"id') == '":"x'  # a nested field, at its own place
    assert _written(PinWriter(pins, tokenizer), '{"items":[{"id":"a"},{"id') == ""  # another item's id
    assert _written(PinWriter(pins, tokenizer), '{"order":{"updated":') == ""  # a same-named key elsewhere
    assert _written(PinWriter(pins, tokenizer), '{"tag":"beta","error') == '":"RATE_LIMITED'  # the model closes it
    assert _written(PinWriter(pins, tokenizer), '{"tag":"beta", "error": "') == "RATE_LIMITED"
    assert _written(PinWriter(pins, tokenizer), '{"tag":"beta","updated":') == "0"
    assert _written(PinWriter(pins, tokenizer), '{"tag":{"error') == ""  # nested: not the pinned field
    assert _written(PinWriter(pins, tokenizer), '{"message":"an error') == ""  # words inside a value
    writer = PinWriter(pins, tokenizer)
    assert _written(writer, '{"error') and writer.queued[-1] == CLOSE  # a string: the model closes it, but how
    logits = torch.zeros(len(tokenizer))
    logits[tokenizer.convert_tokens_to_ids("error")] = 9.0  # the model would read the value as a key next
    forced = [writer.next_forced(logits) for _ in range(len(writer.queued))]
    assert tokenizer.decode(forced[-1:]) in ('","', '",', '"}')  # closed, and on to the next key or the end
    assert _written(writer, '{"error":"RATE_LIMITED","x":1,"error') == ""  # each pin is written once


def test_the_ar_baseline_answers_a_steered_first_try_with_its_pinned_error():
    backend = load_backend(DEFAULT_AR_MODEL)
    chosen = [s for s in adversarial_scenarios() if scenario_family(s) == "transient" and s.world.name == "retail"][:3]
    for scenario in chosen:
        sample = generate(backend, scenario.world, scenario.target, FAILURES["transient"]).samples[0]
        answer = json.loads(sample.response)
        assert (answer["status"], answer["error"]) == ("error", "RATE_LIMITED"), sample.response


def _instead(writer: PinWriter, text: str, piece: str | None) -> str | None:
    """What the writer puts in place of the model's next token `piece` (None: the model's end of text)."""
    first = writer.before_ending(text) if piece is None else writer.before_closing(text, piece)
    if first is None:
        return None
    return writer.tokenizer.decode([first, *[t for t in writer.queued if t >= 0]])


def test_pins_the_model_never_reaches_are_written_before_it_closes_what_holds_them():
    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / DEFAULT_AR_MODEL)
    pins = path_pins([Anchor("status", "ok"), Anchor("items[0].sku", "A"), Anchor("items[1].sku", "B"),
                      Anchor("items[1].qty", 2), Anchor("total", 7)])
    # the model closes the top object without the status and total: they are written, then its own close
    assert _instead(PinWriter(pins, tokenizer), '{"items":[{"sku":"A"},{"sku":"B","qty":2}]', "}") \
        == ',"status":"ok","total":7}'
    # it closes the items after the first: the second, built from its pins, goes in before the bracket
    writer = PinWriter(pins, tokenizer)
    assert _instead(writer, '{"items":[{"sku":"A', '"}],"') == '"},{"sku":"B","qty":2}],"'
    assert {"items[1].sku", "items[1].qty"} <= writer.written
    # it ends with its JSON still open: the pins, then every open bracket closed
    assert _instead(PinWriter({"status": '"ok"'}, tokenizer), '{"a":{"b":1', None) == '},"status":"ok"}'
    # nothing left to write in what it closes, or a bracket inside a string: the model's token stands
    assert _instead(PinWriter(pins, tokenizer), '{"items":[{"sku":"A"', "}") is None
    assert _instead(PinWriter({"status": '"ok"'}, tokenizer), '{"note":"a', "}") is None
    # a key the model opened holds its own value: it is not written again
    assert _instead(PinWriter({"status": '"ok"'}, tokenizer), '{"status":"error"', "}") is None


def _drive(writer: PinWriter, text: str, logits: torch.Tensor) -> str:
    """The text after the writer's forced tokens, as the backend's loop writes them (the model's `logits` fixed)."""
    writer.after(text)
    while (token := writer.next_forced(logits)) is not None:
        if writer.chose:  # how a pinned value ends is the model's choice: it may close what holds a pin
            instead = writer.before_closing(writer.text, writer.tokenizer.decode([token]))
            token = instead if instead is not None else token
        text += writer.tokenizer.decode([token])
        writer.after(text)
    return text


def test_a_pinned_value_the_model_would_end_its_object_after_leaves_room_for_the_rest():
    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / DEFAULT_AR_MODEL)
    logits = torch.zeros(len(tokenizer))
    for token in closing_tokens(tokenizer).tolist():
        logits[token] = 9.0 if "}" in tokenizer.decode([token]) else 0.0  # it would end the object next
    writer = PinWriter(path_pins([Anchor("message", ""), Anchor("status", "ok")]), tokenizer)
    assert _drive(writer, '{"error":"","message', logits).endswith('"message":"","status":"ok"}')
    ending = torch.zeros(len(tokenizer))
    ending[tokenizer.encode("3", add_special_tokens=False)[0]] = 9.0  # it would go on writing digits
    ending[tokenizer.encode(",", add_special_tokens=False)[0]] = 1.0
    writer = PinWriter(path_pins([Anchor("total_cents", 1)]), tokenizer)
    assert _drive(writer, '{"total_cents":', ending) == '{"total_cents":1,'  # the number ends where the pin does


def test_the_ar_gets_the_helpers_the_mdlm_has_as_pins_and_the_users_anchor_wins():
    """[wm-pair] equal terms: the record copy's values reach a left-to-right model as pins written where it opens
    their keys; switched off, the same model writes them itself (and gets the record wrong)."""
    from wmstudio.model.denoising.sampler import SamplerSettings
    from wmstudio.world.simulators import get_simulator
    from wmstudio.world.spec import Call

    backend = load_backend(DEFAULT_AR_MODEL)
    simulator = get_simulator("retail")
    world = simulator.world()
    order = world.initial_state["orders"][3]
    call = Call("get_order", {"order_id": order["id"]})
    _, truth = simulator.step(world.initial_state, call)
    helped = json.loads(generate(backend, world, call).samples[0].response)
    copied = [key for key in truth if key not in ("status", "error", "message")]
    assert {key: helped.get(key) for key in copied} == {key: truth[key] for key in copied}
    alone = generate(backend, world, call, settings=SamplerSettings(record_copy=False, rule_fields=False,
                                                                    outcome_head=False)).samples[0].response
    assert alone != generate(backend, world, call).samples[0].response
    pinned = json.loads(generate(backend, world, call, [Anchor("total_cents", 1)]).samples[0].response)
    assert pinned["total_cents"] == 1
