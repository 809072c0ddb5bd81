"""A left-to-right world model honours a pinned top-level field by writing its value where the model opens its key
(model/serving/ar_pins.py): with the shipped AR baseline, a steered first try answers the pinned error, as the world model
environment of GRPO needs, where before it only read the pin as a directive and answered ok."""

from __future__ import annotations

import json

import torch
from transformers import AutoTokenizer

from wmstudio.locations import DEFAULT_AR_MODEL, REPO_ROOT
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.ar_pins import CLOSE, PinWriter, top_level_pins
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.agent.adversarial import FAILURES, adversarial_scenarios, scenario_family
from wmstudio.world.steering.anchors import Anchor


def _written(writer: PinWriter, text: str) -> str:
    writer.after(text)
    return writer.tokenizer.decode([token for token in writer.queued if token != CLOSE])


def test_a_pin_is_written_where_its_key_opens_at_the_top_level_only():
    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / DEFAULT_AR_MODEL)
    pins = top_level_pins([Anchor("error", "RATE_LIMITED"), Anchor("updated", 0), Anchor("items[0].id", "x")])
    assert pins == {"error": '"RATE_LIMITED"', "updated": "0"}  # a nested path stays a directive
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
