"""The copy head: what a prompt offers to copy, how a pair is scored, what it learns, and how sampling uses it."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from wmstudio.model.canvas.canvas import build_canvas, skeleton_target
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.copy_head import (
    FEATURES,
    SHOWN_FEATURES,
    CopyHead,
    copy_plan,
    copyable_spans,
    key_words,
    load_copy_head,
    pair_features,
    value_tokens,
)
from wmstudio.model.network.architecture import new_model
from wmstudio.model.serving.backends import PrefixCausalBackend
from wmstudio.world.heads.copy_sources import copy_sources
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import render
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

pytestmark = pytest.mark.usefixtures("one_thread")

HEAD_ONLY = SamplerSettings(record_copy=False)  # the copy head on its own, not the named record's copy


@pytest.fixture(scope="module")
def retail():
    simulator = get_simulator("retail")
    world = simulator.world()
    order = next(o for o in world.initial_state["orders"] if o["status"] == "delivered")
    call = Call("get_order", {"order_id": order["id"]})
    _, truth = simulator.step(world.initial_state, call)
    return world, call, truth, order


def test_the_prompt_offers_its_values_with_paths_sources_and_the_calls_record(retail):
    world, call, _, order = retail
    history = [HistoryStep(Call("list_orders", {}), {"orders": [{"order_id": order["id"]}], "status": "ok"})]
    shown = render(world.with_directives(["inject_error: TIMEOUT"]) if hasattr(world, "with_directives") else world,
                   call, history).shown
    sources = copy_sources(shown)
    first = sources[0]
    assert (first.value, first.path, first.source) == (order["id"], ("arguments", "order_id"), "call")
    in_state = [s for s in sources if s.source == "state" and s.value == order["total_cents"]]
    assert in_state and all(s.call_record for s in in_state)  # the order the call names
    turn = next(s for s in sources if s.source == "turn_response" and s.value == order["id"])
    assert turn.turns_back == 1 and turn.path == ("response", "orders", 0, "order_id")
    assert not any(isinstance(s.value, bool) for s in sources)


def test_key_agreement_is_what_a_pair_scores_first(retail):
    world, call, _, _ = retail
    canvas = build_canvas(world.tool("get_order").response and _tokenizer(), world.tool("get_order").response)
    slot = next(s for s in copyable_spans(canvas) if s.key == "order_id")
    sources = copy_sources(render(world, call).shown)
    call_source = next(s for s in sources if s.source == "call")
    features = pair_features(slot, call_source)
    assert len(features) == FEATURES and features[0] == 1.0  # order_id == order_id
    other = next(s for s in sources if s.source == "state" and s.key == "placed_on")
    assert pair_features(slot, other)[0] == 0.0
    assert key_words("orderStatus") == ["order", "status"] and key_words("orders") == ["order"]


def test_a_plan_offers_only_values_that_fit_each_span_and_marks_the_true_ones(retail):
    world, call, truth, order = retail
    tokenizer = _tokenizer()
    canvas, _ = skeleton_target(tokenizer, world.tool("get_order").response, truth)
    plan = copy_plan(canvas, copy_sources(render(world, call).shown))
    by_key = {slot.key: s for s, slot in enumerate(plan.slots)}
    assert "status" not in by_key  # the outcome is the model's to decide, never copied
    total = by_key["total_cents"]
    offered = [plan.sources[i].value for i in plan.candidates[total]]
    assert order["total_cents"] in offered and all(isinstance(v, int) for v in offered)
    hits = plan.targets(truth)
    assert any(plan.sources[plan.candidates[by_key["order_id"]][c]].source == "call" for c in hits[by_key["order_id"]])
    empty = json.loads(json.dumps(truth))
    empty["order_id"] = ""
    assert plan.targets(empty)[by_key["order_id"]] == []  # an empty value is generated, not copied
    slot = plan.slots[total]
    assert value_tokens(canvas, slot.span, "ORD-1") is None and value_tokens(canvas, slot.span, 10**40) is None


def test_a_file_the_call_reads_is_offered_whole_as_its_own_record_among_the_other_files():
    simulator = get_simulator("filesystem")
    world = simulator.world()
    path, text = next((p, t) for p, t in world.initial_state["files"].items() if "\n" in t)
    call = Call("cat", {"path": path})
    _, truth = simulator.step(world.initial_state, call)
    sources = copy_sources(render(world, call).shown)
    files = [s for s in sources if s.source == "state" and s.path[:1] == ("files",) and len(s.path) == 2]
    assert [s.value for s in files if s.call_record] == [text]  # the map's other entries are not the call's
    canvas, _ = skeleton_target(_tokenizer(), world.tool("cat").response, truth)
    plan = copy_plan(canvas, sources)
    content = next(s for s, slot in enumerate(plan.slots) if slot.key == "content")
    offered = [plan.sources[i].value for i in plan.candidates[content]]
    assert text in offered and plan.targets(truth)[content]  # a text with line breaks fits its span and is copyable


def test_the_head_scores_every_candidate_or_generate_and_saves_beside_the_weights(tmp_path):
    head = CopyHead(hidden=16)
    n, c = 3, 5
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [False] * 5])
    logits = head(torch.randn(n, 16), torch.randint(0, 50, (n, 6)), torch.eye(4)[:n], torch.rand(n, c, FEATURES),
                  torch.randint(0, 50, (n, c, 6)), mask)
    assert logits.shape == (n, 1 + c) and torch.isinf(logits[1, 3:]).all() and torch.isfinite(logits[:, 0]).all()
    head.save(tmp_path)
    loaded = load_copy_head(tmp_path)
    for name, value in head.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[name]), name
    assert load_copy_head(tmp_path / "elsewhere") is None


def test_a_head_saved_before_computed_candidates_loads_and_scores_shown_values_as_it_did(tmp_path):
    torch.manual_seed(0)
    head = CopyHead(hidden=16)
    head.save(tmp_path)
    config = json.loads((tmp_path / "copy_head.json").read_text())
    weights = load_file(str(tmp_path / "copy_head.safetensors"))
    pair = weights["pair.weight"]  # as an older head saved it: no columns for the call-key and operation features
    weights["pair.weight"] = torch.cat([pair[:, :SHOWN_FEATURES], pair[:, FEATURES:]], dim=1).contiguous()
    save_file(weights, str(tmp_path / "copy_head.safetensors"))
    (tmp_path / "copy_head.json").write_text(json.dumps({**config, "features": SHOWN_FEATURES}))
    loaded = load_copy_head(tmp_path)
    features = torch.rand(2, 4, FEATURES)
    features[..., SHOWN_FEATURES:] = 0  # shown values: no computed operation, no call-selected key
    inputs = (torch.randn(2, 16), torch.randint(0, 50, (2, 6)), torch.eye(4)[:2])
    keys, mask = torch.randint(0, 50, (2, 4, 6)), torch.ones(2, 4, dtype=torch.bool)
    old = torch.nn.functional.linear(torch.cat([features[..., :SHOWN_FEATURES], torch.zeros(2, 4, 16)], -1),
                                     weights["pair.weight"])
    new = loaded.pair.weight @ torch.cat([features, torch.zeros(2, 4, 16)], -1).unsqueeze(-1)
    assert torch.allclose(old, new.squeeze(-1))
    assert torch.allclose(loaded(*inputs, features, keys, mask), head(*inputs, features, keys, mask), atol=1e-6)
    assert loaded.config["features"] == FEATURES  # it saves at the new width


def test_sampling_fills_a_span_whole_with_the_value_the_head_prefers(retail):
    world, call, _, order = retail
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    backend = PrefixCausalBackend(model, tokenizer, "tiny", tokenizer.mask_token_id, tokenizer.pad_token_id, 4096)
    backend.copy_head = rigged_head(32)  # prefers a candidate whose key equals the span's
    backend.prompt_tokens = 2048  # this small tokenizer spends many tokens on the whole order
    generation = generate(backend, world, call, settings=HEAD_ONLY)
    response = json.loads(generation.samples[0].response)
    assert response["order_id"] == order["id"] and response["total_cents"] == order["total_cents"]
    copied = [p for frame in generation.frames for p in frame.copied[0]]
    order_span = next(s for s in generation.canvas.spans if s.path == "order_id")
    assert set(range(order_span.start, order_span.end)) <= set(copied)
    assert all(commit.copied for commit in generation.trace() if commit.position in range(order_span.start,
                                                                                           order_span.end))


class _EndingBackend(PrefixCausalBackend):
    """A model that wants every array to end at once: the end token's logit raised far above the rest."""

    def canvas_outputs(self, canvas_ids, cache):
        logits, hidden = super().canvas_outputs(canvas_ids, cache)
        logits = logits.clone()
        logits[..., self.tokenizer.eos_token_id] += 50.0  # the token a canvas closes arrays with
        return logits, hidden


def test_an_item_the_head_copies_into_is_kept_even_when_the_denoiser_would_end_the_array(retail):
    world, _, _, _ = retail
    order = max(world.initial_state["orders"], key=lambda o: len(o["items"]))
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    backend = _EndingBackend(model, tokenizer, "tiny", tokenizer.mask_token_id, tokenizer.pad_token_id, 4096)
    backend.prompt_tokens = 2048
    bare = json.loads(generate(backend, world, Call("get_order", {"order_id": order["id"]}),
                               settings=HEAD_ONLY).samples[0].response)
    assert bare["items"] == []  # no copy head: the denoiser ends the list before its first item
    backend.copy_head = rigged_head(32)
    generation = generate(backend, world, Call("get_order", {"order_id": order["id"]}), settings=HEAD_ONLY)
    items = json.loads(generation.samples[0].response)["items"]
    copied = {p for frame in generation.frames for p in frame.copied[0]}
    leading = [s for s in generation.canvas.spans if s.path.endswith("].sku") and s.start in copied]
    assert leading and len(items) == 1 + max(int(s.path.split("[")[1].split("]")[0]) for s in leading)
    assert all(item["sku"].startswith("SKU-") for item in items)


def test_only_a_copy_into_an_items_leading_value_keeps_the_item():
    from wmstudio.model.denoising.sampler import items_a_copy_keeps

    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "string"}, "at": {"type": "string"}}}}}}
    canvas = build_canvas(_tokenizer(), schema)
    ends = [s.start for s in canvas.spans if s.kind == "end"]
    ids = [s.start for s in canvas.spans if s.path.endswith("].id")]
    keeps = items_a_copy_keeps(canvas)
    assert [keeps[i] for i in ids] == [ends[:n + 1] for n in range(len(ends))]  # an item and those before it
    assert all(s.start not in keeps for s in canvas.spans if s.path.endswith("].at"))


def rigged_head(hidden: int) -> CopyHead:
    """A head that copies whenever a candidate's key equals the span's (feature 0), else generates."""
    head = CopyHead(hidden)
    with torch.no_grad():
        for parameter in head.parameters():
            parameter.zero_()
        head.pair.weight[0, 0] = 4.0
        head.score[1].weight[0, 0] = 4.0
        head.score[3].weight[0, 0] = 4.0
        head.gate[2].bias.fill_(2.0)
    return head


_TOKENIZER = []


def _tokenizer():
    """One tokenizer for the module, trained on the demo worlds' text (module-level: skeletons need one)."""
    if not _TOKENIZER:
        from wmstudio.model.network.tokenizer import train_tokenizer
        from wmstudio.store.seeding import demo_worlds

        _TOKENIZER.append(train_tokenizer([w.dumps() for w in demo_worlds()] * 2, vocab_size=1500))
    return _TOKENIZER[0]


def test_a_key_the_model_never_trained_on_is_filled_by_a_candidate_of_the_same_key_whatever_its_gate_says():
    from wmstudio.locations import ASSETS_DIR
    from wmstudio.model.generation.generation import copy_plan_for, prepare_canvas
    from wmstudio.model.generation.prompting import prepare_prompt
    from wmstudio.model.serving.backends import load_backend
    from wmstudio.world.spec import load_world

    world = load_world(ASSETS_DIR / "benchmarks" / "tau2-retail" / "world.json")  # a world no one here trained on
    user = "mia_moore_8366"
    record = world.initial_state["users"][user]
    call = Call("get_user_details", {"user_id": user})
    backend = load_backend()
    assert not {"first_name", "zip"} & backend.trained_schemas.key_names()  # keys no demo tool answers with
    canvas = prepare_canvas(backend, world, call, [])
    plan = copy_plan_for(backend, canvas, prepare_prompt(backend, world, call, (), len(canvas)))
    assert {slot.key for slot, ungated in zip(plan.slots, plan.ungated) if ungated} >= {"first_name", "zip"}
    response = json.loads(generate(backend, world, call, settings=HEAD_ONLY).samples[0].response)
    assert response["name"]["first_name"] == record["name"]["first_name"]  # the user's own, copied whole
    assert response["address"]["zip"] == record["address"]["zip"]
    gated = load_backend()
    gated.trained_schemas = None  # no list of trained keys: every slot keeps its gate, which says "generate" here
    plan = copy_plan_for(gated, canvas, prepare_prompt(gated, world, call, (), len(canvas)))
    assert not any(plan.ungated)
    before = json.loads(generate(gated, world, call, settings=HEAD_ONLY).samples[0].response)
    assert before["name"]["first_name"] != record["name"]["first_name"]
