"""The response canvas: skeleton layout, pinned anchors, free mode, training targets, clear errors, and the
promise that skeleton sampling always yields parseable JSON (a thousand random schemas, a random tiny model)."""

from __future__ import annotations

import json
import random

import pytest
import torch
from jsonschema import Draft202012Validator

from wmstudio.model.canvas.canvas import SpanBudgets, build_canvas, check_fits, skeleton_target
from wmstudio.model.canvas.constraints import allowed_tokens, completable, vocabulary_for
from wmstudio.model.canvas.grammars import ArrayText, JsonText, NumberText, Options, QuotedText
from wmstudio.model.denoising.sampler import SamplerSettings, denoise
from wmstudio.model.network.architecture import new_model
from wmstudio.model.network.tokenizer import train_tokenizer
from wmstudio.model.serving.backends import PrefixCausalBackend
from wmstudio.problems import InvalidInput
from wmstudio.world.steering.anchors import parse_anchors

REFUND = {
    "type": "object",
    "properties": {
        "refund_processed": {"type": "boolean"},
        "amount": {"type": "number"},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}},
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "message": {"type": "string"},
        "status": {"type": "string", "enum": ["ok", "error"]},
    },
}


@pytest.fixture(scope="module")
def tokenizer():
    rng = random.Random(0)
    lines = []
    for i in range(400):
        value = {"refund_processed": rng.random() < 0.5, "amount": round(rng.uniform(-50, 500), 2),
                 "items": [{"sku": f"SKU-{rng.randint(1, 999)}", "qty": rng.randint(1, 9)}],
                 "tags": ["gift", "café"][: rng.randint(0, 2)], "message": "Refund window of 30 days has passed",
                 "status": rng.choice(["ok", "error"]), "note": None}
        lines.append(json.dumps(value, ensure_ascii=False))
    return train_tokenizer(lines, vocab_size=500)


def layout(canvas) -> str:
    """The canvas as text with each masked slot drawn as `_`."""
    return "".join("_" if kind == "masked" else canvas.piece(t) for t, kind in zip(canvas.tokens, canvas.kinds()))


def test_skeleton_keeps_keys_and_punctuation_as_anchors_and_values_as_budgeted_spans(tokenizer):
    budgets = SpanBudgets(array_items=2)
    canvas = build_canvas(tokenizer, REFUND, budgets=budgets)
    assert layout(canvas) == (
        '{"refund_processed":' + "_" * canvas.spans[0].length + ',"amount":' + "_" * budgets.number
        + ',"items":[_{"sku":"' + "_" * budgets.string + '","qty":' + "_" * budgets.integer
        + '}_,{"sku":"' + "_" * budgets.string + '","qty":' + "_" * budgets.integer + "}]"
        + ',"tags":' + "_" * budgets.array + ',"message":"' + "_" * budgets.long_string
        + '","status":"' + "_" * canvas.spans[-1].length + '"}'
    )
    kinds = {span.path: span.kind for span in canvas.spans}
    assert kinds == {"refund_processed": "boolean", "amount": "number", "items[0]": "end", "items[0].sku": "string",
                     "items[0].qty": "integer", "items[1]": "end", "items[1].sku": "string", "items[1].qty": "integer",
                     "tags": "array", "message": "string", "status": "enum"}
    assert SpanBudgets().array_items == 5 and layout(build_canvas(tokenizer, REFUND)).count('{"sku"') == 5
    assert all(canvas.span_of[i] == -1 for i, kind in enumerate(canvas.kinds()) if kind == "anchor")


def test_anchors_pin_values_and_extend_arrays(tokenizer):
    canvas = build_canvas(tokenizer, REFUND, parse_anchors(['status="error"', "items[3].qty=2", "refund_processed=false"]))
    text = layout(canvas)
    assert '"status":"error"}' in text and '"refund_processed":false,' in text
    assert text.count('{"sku"') == 5 and '"qty":2}_,{"sku"' in text  # items 0-3 are kept, item 4 may go
    assert [span.path for span in canvas.spans if span.kind == "end"] == ["items[4]"]
    assert "status" not in [span.path for span in canvas.spans]


def test_fill_lays_a_response_into_its_canvas_and_decodes_back(tokenizer):
    value = {"refund_processed": False, "amount": 12.5, "items": [{"sku": "SKU-1", "qty": 2}], "tags": ["café"],
             "message": "Refund window of 30 days has passed", "status": "error"}
    canvas, tokens = skeleton_target(tokenizer, REFUND, value)
    assert json.loads(canvas.decode(tokens)) == value
    assert tokenizer.pad_token_id in tokens  # unused slots are pads, dropped on decode
    assert skeleton_target(tokenizer, REFUND, {**value, "amount": "12.5"}) is None  # wrong type
    assert skeleton_target(tokenizer, REFUND, {**value, "status": "maybe"}) is None  # not an enum option


def test_arrays_of_objects_end_where_the_end_token_is(tokenizer):
    base = {"refund_processed": True, "amount": 1.5, "tags": [], "message": "", "status": "ok"}
    budgets = SpanBudgets(array_items=3)
    for items in ([], [{"sku": "A", "qty": 1}], [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]):
        canvas = build_canvas(tokenizer, REFUND, budgets=budgets)  # what sampling sees: 3 item slots
        tokens = canvas.fill({**base, "items": items})
        ends = [tokens[span.start] for span in canvas.spans if span.kind == "end"]
        assert ends == [tokenizer.pad_token_id] * len(items) + [tokenizer.eos_token_id] * (3 - len(items))
        assert json.loads(canvas.decode(tokens))["items"] == items
    full = [{"sku": str(i), "qty": i} for i in range(4)]  # more items than slots: a training target keeps them all
    canvas, tokens = skeleton_target(tokenizer, REFUND, {**base, "items": full}, budgets=budgets)
    assert json.loads(canvas.decode(tokens))["items"] == full and tokenizer.eos_token_id not in tokens
    eos_pads = build_canvas(tokenizer, REFUND, budgets=budgets, pad_id=tokenizer.eos_token_id)
    assert eos_pads.end_id == tokenizer.sep_token_id  # the end token is never the pad


def test_pads_only_trail_a_complete_value(tokenizer):
    vocab = vocabulary_for(tokenizer)
    table = vocab.table(NumberText(True))
    pad, seven = tokenizer.pad_token_id, tokenizer.convert_tokens_to_ids("7")
    assert completable(table, [seven, pad, pad]) and not completable(table, [pad, seven, pad])
    assert not completable(table, [pad, pad, pad])  # an integer is never empty
    allowed = allowed_tokens(table, [seven, None, None])
    assert allowed[1, pad] and allowed[1, seven] and allowed[2, pad]
    allowed = allowed_tokens(table, [None, pad, None])
    assert not allowed[0, pad] and allowed[0, seven] and allowed[2].nonzero().flatten().tolist() == [pad]


def test_values_written_into_their_own_slots_keep_the_layout_a_model_was_trained_on(tokenizer):
    canvas = build_canvas(tokenizer, REFUND, budgets=SpanBudgets(array_items=1))
    held = canvas.with_values({"status": "error", "message": "No", "amount": "not a number"})
    assert len(held) == len(canvas)  # unlike a pinned anchor, nothing after the value moves
    assert [s.path for s in held.spans] == [s.path for s in canvas.spans if s.path not in ("status", "message")]
    status = next(s for s in canvas.spans if s.path == "status")
    assert held.tokens[status.start] != canvas.mask_id and held.kinds()[status.start] == "anchor"
    assert all(held.span_of[i] == -1 for i in range(status.start, status.end))
    text = held.decode(held.tokens)  # the held values read back; the masked rest shows as nothing yet
    assert '"message":"No"' in text and text.endswith('"status":"error"}')
    assert held.with_values({}).tokens == held.tokens and canvas.with_values({"status": "maybe"}).spans == canvas.spans


def test_free_mode_places_text_anchors_and_pinned_fields(tokenizer):
    canvas = build_canvas(tokenizer, None, mode="free", free_length=10, text_anchors=[(0, "{"), (10, "}")])
    assert layout(canvas) == "{" + "_" * 10 + "}" and canvas.mode == "free"
    pinned = build_canvas(tokenizer, REFUND, parse_anchors(['status="error"']), mode="free", free_length=6)
    assert layout(pinned) == "_" * 6 + '"status":"error"' + "_" * 8
    assert pinned.decode(pinned.tokens) == '"status":"error"'


def test_bad_anchors_and_sizes_are_reported_with_the_field_and_the_fix(tokenizer):
    with pytest.raises(InvalidInput) as err:
        build_canvas(tokenizer, REFUND, parse_anchors(['refund_processd=true', 'amount="lots"']))
    text = str(err.value)
    assert "anchor refund_processd" in text and "fields: refund_processed, amount" in text
    assert "anchor amount" in text and "expected a number" in text
    with pytest.raises(InvalidInput, match="no response schema"):
        build_canvas(tokenizer, None, mode="skeleton")
    with pytest.raises(InvalidInput, match="prompt \\(900 tokens\\) \\+ response canvas \\(200 tokens\\)"):
        check_fits(900, 200, 1024)
    with pytest.raises(InvalidInput, match="over 4096"):
        build_canvas(tokenizer, None, mode="free", free_length=5000)


@pytest.mark.parametrize(
    "grammar, good, bad",
    [
        (NumberText(integer=True), ["0", "-12", "907"], ["01", "-", "1.5", ""]),
        (NumberText(integer=True, signed=False, at_least_one=True), ["1", "90"], ["0", "-1", "01"]),
        (NumberText(), ["0.25", "-3", "12.5"], ["1.", ".5", "--1"]),
        (Options(("true", "false")), ["true", "false"], ["tru", "truefalse"]),
        (ArrayText(QuotedText()), ['["a", "b"]', "[]"], ['["a",]', '["a"']),
        (JsonText(1, "{"), ['{"a":1}', "{}"], ["[1]", '{"a":{"b":1}}']),
    ],
)
def test_grammars_accept_exactly_their_values(tokenizer, grammar, good, bad):
    vocab = vocabulary_for(tokenizer)
    table = vocab.table(grammar)
    for text in good + bad:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert completable(table, ids) == (text in good), text


def test_allowed_tokens_keep_a_span_completable(tokenizer):
    vocab = vocabulary_for(tokenizer)
    table = vocab.table(NumberText(integer=True))
    zero = tokenizer.convert_tokens_to_ids("0")
    allowed = allowed_tokens(table, [zero, None, None])
    assert allowed[1, tokenizer.pad_token_id] and not allowed[1, tokenizer.convert_tokens_to_ids("5")]
    allowed = allowed_tokens(table, [None, None])
    assert not allowed[0, tokenizer.convert_tokens_to_ids("a")]
    assert allowed[0, tokenizer.convert_tokens_to_ids("-")] and not allowed[1, tokenizer.convert_tokens_to_ids("-")]


def test_strings_may_hold_json_escapes_but_no_raw_quote_stray_backslash_or_control_character():
    from wmstudio.model.canvas.grammars import QuotedText, TextContent

    def reads(grammar, text):
        state = grammar.start()
        for ch in text:
            state = grammar.step(state, ch)
            if state is None:
                return False
        return grammar.accepts(state)

    for text, ok in (("line one\\nline two", True), ('say \\"hi\\"', True), ("caf\\u00e9", True), ("a\\\\b", True),
                     ("bad \\x", False), ("cut \\u00", False), ('raw " quote', False), ("ends \\", False),
                     ("tab\there", False)):
        assert reads(TextContent(), text) is ok, text
        assert reads(QuotedText(), f'"{text}"') is ok, text
        assert reads(JsonText(1), json.dumps({"k": "x"})[:-2] + text + '"}') is ok, text


def test_a_json_spans_mask_allows_exactly_the_tokens_after_which_it_stays_completable(tokenizer):
    vocab = vocabulary_for(tokenizer)
    table = vocab.table(JsonText(2))
    rng = random.Random(3)
    written = tokenizer.encode('{"a":[1,"b"],"c":true}', add_special_tokens=False)
    for _ in range(4):  # slots masked at random among a value's tokens (masks worked out per token class)
        slots = [t if rng.random() < 0.5 else None for t in written] + [None] * 4
        allowed = allowed_tokens(table, slots)
        for k in [k for k, t in enumerate(slots) if t is None][:3]:
            expect = [completable(table, slots[:k] + [token] + slots[k + 1:]) for token in range(len(vocab.texts))]
            assert allowed[k, :len(expect)].tolist() == expect


# ----------------------------------------------------------------------------------------------------
# A thousand random schemas: whatever a random model samples, the skeleton decodes to schema-valid JSON.


def random_schema(rng: random.Random, depth: int = 0) -> dict:
    kinds = ["string", "integer", "number", "boolean", "enum", "mixed_enum", "const", "nullable", "scalar_array",
             "any", "open_object", "date"]
    if depth < 2:
        kinds += ["object", "object", "object_array"]
    kind = rng.choice(kinds)
    if kind == "object":
        names = rng.sample(["id", "name", "status", "total", "items", "message", "ok", "count", "price", "é"],
                           rng.randint(1, 4))
        return {"type": "object", "properties": {n: random_schema(rng, depth + 1) for n in names},
                "required": names, "additionalProperties": False}
    if kind == "object_array":
        item = {"type": "object", "properties": {"v": random_schema(rng, 2)}, "required": ["v"]}
        return {"type": "array", "items": item, "maxItems": rng.randint(1, 3), **rng.choice([{}, {"minItems": 1}])}
    if kind == "scalar_array":
        return {"type": "array", "items": rng.choice([{"type": "string"}, {"type": "integer"}, {"type": "number"},
                                                      {"type": "boolean"}, {"enum": [1, "x", None]}])}
    return {
        "string": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "integer": {"type": "integer", **rng.choice([{}, {"minimum": 0}, {"minimum": 1}])},
        "number": {"type": "number"},
        "boolean": {"type": "boolean"},
        "enum": {"type": "string", "enum": rng.sample(["", "ok", "error", "partial", "a\"b", "café"], 3)},
        "mixed_enum": {"enum": [1, 2.5, "two", True, None]},
        "const": {"const": rng.choice(["v1", 3, None])},
        "nullable": {"anyOf": [{"type": rng.choice(["integer", "string"])}, {"type": "null"}]},
        "any": {},
        "open_object": {"type": "object"},
    }[kind]


def test_skeleton_sampling_always_yields_schema_valid_json(tokenizer, one_thread):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    backend = PrefixCausalBackend(model, tokenizer, "random-tiny", tokenizer.mask_token_id, tokenizer.pad_token_id,
                                  4096)
    rng = random.Random(1234)
    prompt = [tokenizer.bos_token_id, 10, 11, 12, tokenizer.sep_token_id]
    for trial in range(1000):
        schema = random_schema(rng)
        canvas = build_canvas(tokenizer, schema, vocab_size=backend.vocab_size)
        settings = {"steps": rng.choice([1, 2, 3]), "threshold": rng.choice([None, 0.5]),
                    "temperature": rng.choice([0.0, 1.0, 2.0]), "strategy": rng.choice(["low_confidence", "random"]),
                    "seed": trial, "repetition_penalty": rng.choice([1.0, 1.3])}
        *_, last = denoise(backend, prompt, canvas, SamplerSettings(**settings)) if canvas.spans else [None]
        tokens = last.tokens[0] if last is not None else canvas.tokens
        text = canvas.decode(tokens)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            pytest.fail(f"trial {trial}: {text!r} is not JSON ({err}); schema {json.dumps(schema)}")
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(value)]
        assert not errors, f"trial {trial}: {text!r} breaks {json.dumps(schema)}: {errors}"


MAP = {"type": "object", "properties": {"user_id": {"type": "string"}, "payment_methods": {
    "type": "object", "additionalProperties": {"type": "object", "properties": {
        "id": {"type": "string"}, "balance": {"type": "number"}}}}}}


def test_maps_keyed_by_id_get_entry_slots_with_key_spans_that_end_where_the_entries_do(tokenizer):
    value = {"user_id": "u1", "payment_methods": {"credit_card_1": {"id": "credit_card_1", "balance": 12.5},
                                                  "gift_card_9": {"id": "gift_card_9", "balance": 40}}}
    canvas, tokens = skeleton_target(tokenizer, MAP, value)
    assert json.loads(canvas.decode(tokens)) == value  # the keys are written by spans, not anchors
    unseen = build_canvas(tokenizer, MAP)
    kinds = [(s.path, s.kind) for s in unseen.spans]
    assert ("payment_methods[0]", "key") in kinds and ("payment_methods[4]", "end") in kinds
    one = unseen.fill({"user_id": "u1", "payment_methods": {"cc": {"id": "cc", "balance": 1}}})
    assert json.loads(unseen.decode(one)) == {"user_id": "u1", "payment_methods": {"cc": {"id": "cc", "balance": 1}}}


def test_free_mode_writes_json_whatever_the_model(tokenizer, one_thread):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    backend = PrefixCausalBackend(model, tokenizer, "random-tiny", tokenizer.mask_token_id, tokenizer.pad_token_id,
                                  4096)
    prompt = [tokenizer.bos_token_id, 10, 11, 12, tokenizer.sep_token_id]
    for seed in range(20):
        canvas = build_canvas(tokenizer, None, mode="free", free_length=24, vocab_size=backend.vocab_size)
        *_, last = denoise(backend, prompt, canvas, SamplerSettings(temperature=1.5, seed=seed, steps=6))
        json.loads(canvas.decode(last.tokens[0]))  # a random model still writes one JSON value


def test_patterns_and_formats_hold_every_sampled_value(tokenizer, one_thread):
    import re

    schema = {"type": "object", "properties": {
        "day": {"type": "string", "format": "date"}, "order": {"type": "string", "pattern": "^#W[0-9]{5}$"},
        "free": {"type": "string", "pattern": "(?<=x)y"}}}  # a look-behind the compiler cannot read: plain text
    torch.manual_seed(1)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    backend = PrefixCausalBackend(model, tokenizer, "random-tiny", tokenizer.mask_token_id, tokenizer.pad_token_id,
                                  4096)
    prompt = [tokenizer.bos_token_id, 10, 11, tokenizer.sep_token_id]
    for seed in range(10):
        canvas = build_canvas(tokenizer, schema, vocab_size=backend.vocab_size)
        *_, last = denoise(backend, prompt, canvas, SamplerSettings(temperature=1.0, seed=seed))
        value = json.loads(canvas.decode(last.tokens[0]))
        assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", value["day"]), value
        assert re.fullmatch(r"#W[0-9]{5}", value["order"]), value
    assert skeleton_target(tokenizer, schema, {"day": "2025-13-01", "order": "#W12345", "free": ""}) is None


def test_mask_and_pad_ids_can_come_from_the_model(tokenizer):
    eos = tokenizer.eos_token_id
    canvas = build_canvas(tokenizer, {"type": "integer"}, mask_id=999, pad_id=eos)
    assert canvas.tokens == [999] * SpanBudgets().integer and canvas.pad_id == eos
    assert canvas.decode([tokenizer.convert_tokens_to_ids("7"), eos, eos]) == "7"


def test_string_budgets_follow_what_the_key_holds(tokenizer):
    keys = ["session_token", "expires_at", "account_id", "path", "error", "message", "name", "when"]
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in keys}}
    schema["properties"]["when"] = {"type": "string", "format": "date"}
    budgets = SpanBudgets()
    lengths = {span.path: span.length for span in build_canvas(tokenizer, schema).spans}
    assert lengths == {"session_token": budgets.secret, "expires_at": budgets.timestamp,
                       "account_id": budgets.identifier, "path": budgets.location, "error": budgets.string,
                       "message": budgets.long_string, "name": budgets.string, "when": 10}


def test_the_grammar_table_cache_keeps_only_the_most_recently_used(tokenizer, monkeypatch):
    import wmstudio.model.canvas.constraints as constraints

    monkeypatch.setattr(constraints, "MAX_TABLES", 3)
    vocab = vocabulary_for(tokenizer)
    vocab.tables.clear()
    first = vocab.table(Options(("a",)))
    for word in ("b", "c", "d"):  # users' schemas make new grammars without end: enums, patterns, lengths
        vocab.table(Options((word,)))
    assert len(vocab.tables) == 3
    assert vocab.table(Options(("d",))) is vocab.tables[("Options", Options(("d",)))]
    assert vocab.table(Options(("a",))) is not first  # evicted, built again


def test_a_camel_case_time_and_a_patterned_string_get_slots_long_enough_for_one_of_their_shape(tokenizer):
    """`endsAt` is a time as `ends_at` is; a string whose pattern needs 27 characters gets at least 27 slots, so
    the slot can hold a value of that shape at all (a 12-slot time could only ever be written empty)."""
    budgets = SpanBudgets()
    schema = {"type": "object", "properties": {
        "endsAt": {"type": "string"}, "ends_at": {"type": "string"}, "title": {"type": "string"},
        "sessionToken": {"type": "string", "pattern": "^(at_[A-Za-z0-9]{40})?$"},
        "code": {"type": "string", "pattern": "^[A-Z]{2}$", "maxLength": 2}}}
    lengths = {span.path: span.length for span in build_canvas(tokenizer, schema, budgets=budgets).spans}
    assert lengths["endsAt"] == lengths["ends_at"] == budgets.timestamp
    assert lengths["title"] == budgets.string
    assert lengths["sessionToken"] == len("at_") + 40 > budgets.secret
    assert lengths["code"] == 2  # a stated maxLength is the budget
