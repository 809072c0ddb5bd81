"""Backends: a tiny model of each family, built here and saved to disk, loads with `load_backend` and samples;
our prompt cache is exact; remote code, unknown models and bad devices get clear errors."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, ModernBertConfig, ModernBertForMaskedLM

from wmstudio.model.canvas.canvas import build_canvas
from wmstudio.model.denoising.sampler import SamplerSettings, denoise
from wmstudio.model.network.architecture import new_model, prefix_causal_mask
from wmstudio.model.network.tokenizer import encode_prompt, train_tokenizer
from wmstudio.model.serving.backends import (
    ArBaseline,
    BidirectionalBackend,
    DreamBackend,
    PrefixCausalBackend,
    load_backend,
    pick_device,
)
from wmstudio.problems import InvalidInput
from wmstudio.world.steering.anchors import parse_anchors

SCHEMA = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["ok", "error"]},
        "count": {"type": "integer"},
        "name": {"type": "string"},
    },
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tokenizer():
    lines = [json.dumps({"status": "ok", "count": i, "name": f"item {i}", "price": i * 1.5}) for i in range(300)]
    lines += [f"## TASK CONTEXT\nList the orders of customer {i}.\nAction: list_orders" for i in range(100)]
    return train_tokenizer(lines, vocab_size=400)


def save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def ours(tokenizer, tmp_path_factory):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=2, hidden=64, heads=4, ffn=128, max_positions=512)
    return save(model, tokenizer, tmp_path_factory.mktemp("mdlm"))


def prompt_ids(tokenizer, text="## TASK CONTEXT\nList the orders of customer 7.\nAction: list_orders"):
    return encode_prompt(tokenizer, text, 200)


def test_a_prompt_over_its_budget_loses_its_middle_never_the_call_or_the_target(tokenizer):
    text = "Active tool call: list_orders\n" + "filler row of the state " * 200 + "\nPREDICTION TARGET: list_orders"
    ids = encode_prompt(tokenizer, text, 60)
    assert len(ids) == 60 and ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.sep_token_id
    kept = tokenizer.decode(ids[1:-1])
    assert kept.startswith("Active tool call: list_orders") and kept.endswith("PREDICTION TARGET: list_orders")
    assert encode_prompt(tokenizer, "Action: list_orders", 60)[1:-1] == tokenizer.encode("Action: list_orders",
                                                                                      add_special_tokens=False)


def test_our_checkpoint_loads_with_its_marker_and_samples_json(ours, tokenizer):
    backend = load_backend(ours)
    assert isinstance(backend, PrefixCausalBackend)
    assert backend.mask_id == tokenizer.mask_token_id and backend.span_pad_id == tokenizer.pad_token_id
    assert backend.device.type == "cpu" and backend.dtype == torch.float32
    canvas = build_canvas(backend.tokenizer, SCHEMA, parse_anchors(['status="error"']), vocab_size=backend.vocab_size)
    frames = list(denoise(backend, prompt_ids(tokenizer), canvas, SamplerSettings(samples=2, temperature=1.0)))
    for tokens in frames[-1].tokens:
        value = json.loads(canvas.decode(tokens))
        assert value["status"] == "error" and isinstance(value["count"], int) and isinstance(value["name"], str)


def test_cached_prompt_gives_the_same_logits_as_the_full_forward(ours, tokenizer):
    backend = load_backend(ours)
    prompt = prompt_ids(tokenizer)
    cache = backend.encode_prompt(prompt)
    generator = torch.Generator().manual_seed(1)
    for batch in (1, 3, 3):  # the third call re-uses the preallocated buffer: it must not grow or go stale
        canvas = torch.randint(5, len(tokenizer), (batch, 24), generator=generator)
        cached = backend.logits(canvas, cache)
        full = backend.full_logits(torch.tensor([prompt]), canvas)
        assert cached.shape == (batch, 24, backend.vocab_size)
        torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)
    assert cache.buffer.keys[0].shape[2] == len(prompt) + 24


def test_prefix_causal_mask_keeps_the_prompt_independent_of_the_canvas(ours, tokenizer):
    backend = load_backend(ours)
    prompt = torch.tensor([prompt_ids(tokenizer)])
    a = torch.cat([prompt, torch.full((1, 10), 7)], dim=1)
    b = torch.cat([prompt, torch.full((1, 10), 9)], dim=1)
    mask = prefix_causal_mask(prompt.shape[1], 10)
    with torch.inference_mode():
        la = backend.model(input_ids=a, attention_mask=mask).logits
        lb = backend.model(input_ids=b, attention_mask=mask).logits
    torch.testing.assert_close(la[:, : prompt.shape[1]], lb[:, : prompt.shape[1]])
    assert not torch.allclose(la[:, -10:], lb[:, -10:])


def test_prefix_causal_mask_per_row_lengths_for_padded_batches():
    mask = prefix_causal_mask([2, 3], [2, 1])
    assert mask.shape == (2, 1, 4, 4)
    assert mask[0, 0].tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert mask[1, 0].tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    additive = prefix_causal_mask(1, 1, dtype=torch.float32)
    assert additive[0, 0, 0, 1] == torch.finfo(torch.float32).min and additive[0, 0, 1, 0] == 0


def test_native_masked_lm_loads_and_samples(tokenizer, tmp_path):
    config = ModernBertConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, cls_token_id=tokenizer.bos_token_id, sep_token_id=tokenizer.sep_token_id,
        global_attn_every_n_layers=1,
    )
    path = save(ModernBertForMaskedLM(config), tokenizer, tmp_path / "modernbert")
    backend = load_backend(path)
    assert isinstance(backend, BidirectionalBackend) and not backend.exact_cache
    canvas = build_canvas(backend.tokenizer, None, mode="free", free_length=12, vocab_size=backend.vocab_size)
    frames = list(denoise(backend, prompt_ids(tokenizer), canvas, SamplerSettings(steps=4, threshold=None)))
    assert len(frames) == 4 and frames[-1].done
    assert backend.mask_id not in frames[-1].tokens[0]
    with pytest.raises(InvalidInput, match="cache"):
        load_backend(path, approximate_cache=True).encode_prompt(prompt_ids(tokenizer))


def test_autoregressive_baseline_loads_and_generates(tokenizer, tmp_path):
    torch.manual_seed(0)
    path = save(new_model(tokenizer, kind="ar", layers=1, hidden=32, heads=2, ffn=64), tokenizer, tmp_path / "ar")
    baseline = load_backend(path)
    assert isinstance(baseline, ArBaseline)
    greedy = baseline.generate(prompt_ids(tokenizer), max_new_tokens=8, samples=2)
    assert greedy[0] == greedy[1] and 0 < len(greedy[0]) <= 8
    sampled = baseline.generate(prompt_ids(tokenizer), max_new_tokens=8, temperature=1.0, samples=2, seed=3)
    assert sampled == baseline.generate(prompt_ids(tokenizer), max_new_tokens=8, temperature=1.0, samples=2, seed=3)


def test_a_plain_causal_lm_is_taken_as_the_ar_baseline(tokenizer, tmp_path):
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, eos_token_id=tokenizer.eos_token_id)
    path = save(LlamaForCausalLM(config), tokenizer, tmp_path / "llama")
    assert isinstance(load_backend(path), ArBaseline)


def test_dream_logits_are_shifted_right_by_one(tokenizer):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64)
    dream = DreamBackend(model, tokenizer, "dream-like", tokenizer.mask_token_id, tokenizer.pad_token_id, 512)
    prompt, canvas = torch.tensor([[2, 10, 11, 12]]), torch.tensor([[20, 21, 22]])
    with torch.inference_mode():
        raw = model(input_ids=torch.cat([prompt, canvas], dim=1)).logits
    shifted = dream.full_logits(prompt, canvas)
    torch.testing.assert_close(shifted, raw[:, 3:6])  # canvas position j reads logits at j - 1


@pytest.mark.parametrize("model_type", ["llada", "dream"])
def test_remote_code_needs_an_explicit_opt_in(tmp_path, model_type):
    folder = tmp_path / model_type
    folder.mkdir()
    config = {"model_type": model_type, "architectures": ["X"], "auto_map": {"AutoModel": "modeling_x.XModel"}}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInput, match="--trust-remote-code"):
        load_backend(str(folder))


def test_unknown_models_get_clear_errors(tmp_path):
    with pytest.raises(InvalidInput, match="no such folder"):
        load_backend(str(tmp_path / "missing-model"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInput, match="no config.json"):
        load_backend(str(empty))
    (empty / "config.json").write_text("{not json")
    with pytest.raises(InvalidInput, match="unreadable config.json"):
        load_backend(str(empty))
    t5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}
    (empty / "config.json").write_text(json.dumps(t5))
    with pytest.raises(InvalidInput, match="not a world model"):
        load_backend(str(empty))


def test_device_is_picked_and_a_missing_gpu_is_refused():
    assert pick_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        assert pick_device().type in ("cpu", "mps")
        with pytest.raises(InvalidInput, match="no CUDA GPU"):
            pick_device("cuda")


def test_a_hub_id_that_cannot_be_fetched_is_a_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never touch the network in tests
    with pytest.raises(InvalidInput, match="not a local folder and not loadable from the Hugging Face hub"):
        load_backend("someone/no-such-world-model")


def test_small_models_run_on_one_cpu_thread_unless_told_otherwise(ours, monkeypatch):
    from wmstudio.model.serving.backends import set_cpu_threads

    backend = load_backend(ours)
    assert torch.get_num_threads() == 1
    monkeypatch.setenv("WMSTUDIO_THREADS", "2")
    assert set_cpu_threads(backend.model) == 2
    monkeypatch.delenv("WMSTUDIO_THREADS")
    assert set_cpu_threads(backend.model) == 1


def test_a_model_reads_prompts_at_the_budget_its_config_chose_else_the_trained_one(tmp_path):
    """The shipped model was trained on 768-token prompts and reads 1,024 (measured: docs/results.md); a config
    without the choice reads at the trained budget."""
    import shutil

    from wmstudio.locations import MODELS_DIR

    shipped = load_backend(str(MODELS_DIR / "wm-mdlm-small"))
    assert shipped.prompt_tokens == 1024
    copy = tmp_path / "model"
    shutil.copytree(MODELS_DIR / "wm-mdlm-small", copy)
    config = json.loads((copy / "config.json").read_text())
    assert config["wmstudio"]["prompt_tokens"] == 768
    del config["wmstudio"]["read_prompt_tokens"]
    (copy / "config.json").write_text(json.dumps(config))
    assert load_backend(str(copy)).prompt_tokens == 768


def test_the_canvas_pass_matches_transformers_forward_with_grouped_query_attention(tokenizer, tmp_path):
    """Our step runs the canvas rows without transformers' call stack; a checkpoint whose key heads serve several
    query heads gets the same logits and copy-head states as the model's own forward."""
    model = new_model(tokenizer, layers=2, hidden=64, heads=4, ffn=128)
    config = model.config
    config.num_key_value_heads = 2
    grouped = LlamaForCausalLM(config)
    grouped.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    backend = load_backend(tmp_path)
    assert isinstance(backend, PrefixCausalBackend)
    prompt = prompt_ids(tokenizer)
    canvas = torch.randint(5, len(tokenizer), (2, 16), generator=torch.Generator().manual_seed(2))
    fast = backend.logits(canvas, backend.encode_prompt(prompt))
    backend.fast_canvas = False
    slow = backend.logits(canvas, backend.encode_prompt(prompt))
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, backend.full_logits(torch.tensor([prompt]), canvas), atol=1e-5, rtol=1e-5)


def test_the_shipped_model_answers_the_same_through_its_canvas_pass():
    """On tau2-retail calls (long prompts, the denoiser writing every value: no record copy), sampled, the shipped
    MDLM's answers through the canvas pass are those of transformers' own forward, token for token."""
    from wmstudio.locations import ASSETS_DIR
    from wmstudio.model.generation.generation import generate
    from wmstudio.world.spec import Call, load_world

    tau = ASSETS_DIR / "benchmarks" / "tau2-retail"
    world = load_world(tau / "world.json")
    cases = [json.loads(line) for line in (tau / "cases.jsonl").read_text().splitlines() if line.strip()][:6]
    backend = load_backend()
    settings = SamplerSettings(record_copy=False, temperature=1.0, samples=2, seed=5)

    def answers() -> list[str]:
        return [s.response for case in cases
                for s in generate(backend, world, Call(case["tool"], case["arguments"]), settings=settings).samples]

    fast = answers()
    backend.fast_canvas = False
    assert answers() == fast
