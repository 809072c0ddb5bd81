"""Training the world models: the MDLM objective on a hand-built batch, and short real runs that save
folders loading with the Auto classes and with the engine's `load_backend`."""

import itertools
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.copy_head import load_copy_head
from wmstudio.model.network.architecture import new_model, prefix_causal_mask
from wmstudio.model.network.tokenizer import train_tokenizer
from wmstudio.model.serving.backends import ArBaseline, load_backend
from wmstudio.problems import InvalidInput
from wmstudio.train.world_model.batch_stream import BatchStream, stream_batches
from wmstudio.train.world_model.batches import (
    _attention_mask,
    ar_batch,
    mdlm_batch,
    mdlm_split_batch,
    noise_canvas,
    plan_batches,
)
from wmstudio.train.world_model.examples import CanvasTarget, TrainingExample
from wmstudio.train.world_model.training import TrainConfig, batch_loss, train_world_model, uses_split_batches
from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.history import parse_history
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 600, "layers": 2, "hidden": 64, "heads": 2, "ffn": 128, "batch_tokens": 12000,
        "eval_rows": 4, "threads": 2, "learning_rate": 4e-3, "warmup_steps": 3}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus(folder, rows=30, seed=3)
    return folder


@pytest.fixture(scope="module")
def trained_mdlm(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "mdlm"
    config = TrainConfig(corpus=corpus, out=out, arch="mdlm", minutes=5, steps=16, **TINY)
    return config, train_world_model(config)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(['{"status":"ok","total":12}', "prompt text about orders 12345"] * 20, vocab_size=300)


def test_mdlm_loss_counts_only_masked_response_positions(tokenizer):
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64)
    prompt = [tokenizer.bos_token_id, 40, 41, 42, tokenizer.sep_token_id]
    canvas = CanvasTarget(tokens=[50, 51, 52, 53, 54, 55], maskable=[False, True, True, False, True, True],
                          style="skeleton")
    example = TrainingExample(prompt_ids=prompt, canvases=[canvas])
    mask_id = tokenizer.mask_token_id
    batch = None
    for seed in range(50):  # a draw that masks some maskable positions but not all
        candidate = mdlm_batch([example], mask_id, tokenizer.pad_token_id, torch.Generator().manual_seed(seed))
        if 0 < len(candidate.loss_cols) < 4:
            batch = candidate
            break
    assert batch is not None
    scored = batch.loss_cols.tolist()
    maskable_cols = {len(prompt) + i for i, m in enumerate(canvas.maskable) if m}
    assert set(scored) <= maskable_cols  # never a prompt position, never a structural anchor
    row = batch.input_ids[0].tolist()
    for col in range(len(prompt) + len(canvas.tokens)):
        if col in scored:
            assert row[col] == mask_id
        else:
            assert row[col] != mask_id  # everything not scored is left as it was
    assert batch.targets.tolist() == [canvas.tokens[c - len(prompt)] for c in scored]
    # weight 1/(t * maskable count) is the same for every scored position of a canvas, and >= 1/4
    assert len(set(batch.weights.tolist())) == 1 and batch.weights[0].item() >= 0.25
    # the loss equals the weighted cross-entropy computed from the full logits at those positions
    logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                   attention_mask=batch.attention_mask).logits[0]
    manual = sum(
        w * torch.nn.functional.cross_entropy(logits[c], torch.tensor(t))
        for c, t, w in zip(scored, batch.targets.tolist(), batch.weights.tolist())
    )
    assert batch_loss(model, batch).total.item() == pytest.approx(manual.item(), rel=1e-5)


def test_packed_mask_matches_the_engine_for_one_canvas_and_isolates_several():
    mine = _attention_mask([(5, [4])], 9)
    assert torch.equal(mine, prefix_causal_mask(5, 4))
    two = _attention_mask([(3, [2, 2])], 7)[0, 0]
    assert two[3, 4] and two[3, 0] and two[3, 2]  # canvas 1 sees its own slots and the prompt
    assert not two[3, 5] and not two[5, 3]  # the two canvases never see each other
    assert not two[0, 1]  # the prompt stays causal


def test_ar_batch_scores_response_tokens_with_the_shift(tokenizer):
    example = TrainingExample(prompt_ids=[1, 40, 41, 4], response_ids=[50, 51, 3])
    batch = ar_batch([example], tokenizer.pad_token_id)
    assert batch.loss_cols.tolist() == [3, 4, 5]  # positions before each response token
    assert batch.targets.tolist() == [50, 51, 3]


def test_training_lowers_the_loss_and_saves_a_loadable_model(trained_mdlm, corpus):
    config, result = trained_mdlm
    evals = [point["eval_loss"] for point in result.loss_curve if "eval_loss" in point]
    assert evals[-1] < evals[0] - 0.5, result.loss_curve
    assert result.steps == 16
    out = config.out
    for name in ("config.json", "model.safetensors", "tokenizer.json", "training.json", "README.md"):
        assert (out / name).exists(), name
    model = AutoModelForCausalLM.from_pretrained(out)  # plain transformers, no custom code
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.wmstudio["kind"] == "mdlm"
    assert tokenizer.mask_token == "<|mask|>" and tokenizer.sep_token == "<|sep|>"
    card = (out / "README.md").read_text()
    assert "masked diffusion" in card and f"{result.parameters:,} parameters" in card
    assert (out / "copy_head.safetensors").exists() and model.config.wmstudio["span_order"] == "left_to_right"
    copy_points = [p for p in result.loss_curve if "eval_copy_accuracy" in p]
    assert copy_points and 0.0 <= copy_points[-1]["eval_copy_accuracy"] <= 1.0

    backend = load_backend(out)
    assert backend.decide_first == "status"  # trained outcome first (the default), so its sampler decides it first
    row = json.loads((corpus / "test.jsonl").read_text().splitlines()[0])
    meta = row["meta"]
    world = get_simulator(meta["world"]).world(meta["initial_state"], meta["directives"])
    assert backend.outcome_head is not None  # fitted after training, on the same rows
    fitted = json.loads((out / "outcome_head.json").read_text())["fitted"]
    recorded = json.loads((out / "training.json").read_text())["outcome_head"]
    assert fitted["rows"] > 0 and {key: value for key, value in recorded.items() if key != "messages"} == fitted
    assert recorded["messages"]["templates"] > 0 and (out / "message_templates.json").exists()  # what it writes
    kept = json.loads((out / "trained_schemas.json").read_text())  # for a world that leaves a tool's schema out
    assert kept["fitted"]["tools"] == len(kept["schemas"]) > 0 and backend.trained_schemas is not None
    assert "`trained_schemas.json`" in card  # the card says what is kept beside the weights, and that it is a lookup
    generation = generate(backend, world, Call.from_json(meta["call"]), (), parse_history(meta["history"]),
                          SamplerSettings(outcome_head=False))
    assert generation.samples[0].checks.json_valid  # the skeleton canvas makes any model's output parse
    outcome = generation.canvas.outcome_span()
    assert generation.frames[0].unmasked[0] == [outcome.start]


def test_a_model_trained_without_outcome_first_is_not_decoded_outcome_first(corpus, tmp_path):
    config = TrainConfig(corpus=corpus, out=tmp_path / "plain", steps=1, outcome_first=0.0, max_rows=8, **TINY)
    train_world_model(config)
    assert "decide_first" not in json.loads((tmp_path / "plain" / "config.json").read_text())["wmstudio"]
    assert load_backend(tmp_path / "plain").decide_first is None
    with pytest.raises(InvalidInput, match="outcome_first"):
        TrainConfig(corpus=corpus, out=tmp_path / "x", outcome_first=1.5)


def test_ar_baseline_trains_on_the_same_rows_and_loads_as_ar(corpus, tmp_path):
    config = TrainConfig(corpus=corpus, out=tmp_path / "ar", arch="ar", minutes=5, steps=4, **TINY)
    result = train_world_model(config)
    assert result.steps == 4 and result.examples > 0
    assert isinstance(load_backend(tmp_path / "ar"), ArBaseline)


def test_public_chat_rows_without_meta_train_free_style(tmp_path, corpus):
    rows = [json.loads(line) for line in (corpus / "train.jsonl").read_text().splitlines()[:6]]
    folder = tmp_path / "public"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({"messages": r["messages"]}) + "\n" for r in rows))
    result = train_world_model(TrainConfig(corpus=folder, out=tmp_path / "m", steps=2, **TINY))
    assert result.examples == 6
    assert not (tmp_path / "m" / "outcome_head.json").exists()  # no world to read an outcome from
    assert not (tmp_path / "m" / "trained_schemas.json").exists()  # nor a tool's schema


def test_base_checkpoint_is_fine_tuned_with_its_own_tokenizer(trained_mdlm, corpus, tmp_path):
    config, _ = trained_mdlm
    tuned = train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "tuned", base=str(config.out), steps=2,
                                          max_rows=8, **{**TINY, "vocab_size": 50}))
    assert tuned.steps == 2
    before = AutoTokenizer.from_pretrained(config.out)
    after = AutoTokenizer.from_pretrained(tmp_path / "tuned")
    assert after.get_vocab() == before.get_vocab()  # the base's tokenizer is kept, not retrained
    lineage = json.loads((tmp_path / "tuned" / "training.json").read_text())["lineage"]
    assert [(stage["base"], stage["steps"]) for stage in lineage] == [(None, 16)]  # what the base took is kept
    card = (tmp_path / "tuned" / "README.md").read_text()
    assert "stage 1, from scratch (16 steps" in card and "stage 2 (this run)" in card and "/tmp/" not in card
    kept = train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "kept", base=str(config.out), steps=1,
                                         max_rows=8, **{**TINY, "learning_rate": 1e-12}))
    assert kept.steps == 1
    base_head, kept_head = load_copy_head(config.out), load_copy_head(tmp_path / "kept")
    for name, weight in base_head.state_dict().items():  # the base's copy head goes on training, not a new one
        assert torch.allclose(weight, kept_head.state_dict()[name], atol=1e-6), name


def test_bad_corpus_rows_are_named_by_file_and_line(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"messages": []}\nnot json\n')
    with pytest.raises(InvalidInput) as err:
        train_world_model(TrainConfig(corpus=folder, out=tmp_path / "m", steps=1, **TINY))
    text = str(err.value)
    assert "train.jsonl:1" in text and "train.jsonl:2" in text and "invalid JSON" in text
    with pytest.raises(InvalidInput, match="not a folder"):
        train_world_model(TrainConfig(corpus=tmp_path / "missing", out=tmp_path / "m", steps=1, **TINY))
    with pytest.raises(InvalidInput, match="mdlm or ar"):
        train_world_model(TrainConfig(corpus=folder, out=tmp_path / "m", arch="gpt", steps=1, **TINY))


def test_two_pass_loss_equals_the_packed_loss_and_its_gradients(tokenizer):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=2, hidden=32, heads=2, ffn=64)
    examples = [
        TrainingExample(prompt_ids=[2, 40, 41, 42, 4], canvases=[
            CanvasTarget(tokens=[50, 51, 52, 53], maskable=[True, True, False, True], style="skeleton"),
            CanvasTarget(tokens=[50, 51, 52, 53], maskable=[True, True, False, True], style="skeleton"),
            CanvasTarget(tokens=[60, 61, 62, 1, 1, 1], maskable=[True] * 6, style="free")]),
        TrainingExample(prompt_ids=[2, 43, 44, 45, 46, 47, 48, 4], canvases=[
            CanvasTarget(tokens=[70, 71], maskable=[True, True], style="skeleton")]),
    ]
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id
    packed = mdlm_batch(examples, mask_id, pad_id, torch.Generator().manual_seed(3))
    split = mdlm_split_batch(examples, mask_id, pad_id, torch.Generator().manual_seed(3))
    assert split.targets.tolist() == packed.targets.tolist()  # one seed, one noise
    losses = []
    for batch in (packed, split):
        model.zero_grad()
        loss = batch_loss(model, batch).total
        loss.backward()
        losses.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
    assert losses[1][0] == pytest.approx(losses[0][0], rel=1e-5)
    for a, b in zip(losses[0][1], losses[1][1]):
        assert torch.allclose(a, b, atol=1e-6)
    assert uses_split_batches(model, "mdlm") and not uses_split_batches(model, "ar")


def test_free_canvases_take_any_size_that_holds_the_response(tokenizer):
    import random

    from wmstudio.train.world_model.examples import FREE_LENGTHS, free_canvas

    rnd = random.Random(0)
    response = list(range(40, 90))  # 50 tokens
    canvases = [free_canvas(tokenizer, response, rnd) for _ in range(200)]
    assert {len(c.tokens) for c in canvases} == set(FREE_LENGTHS)  # a user may pick any size that fits
    for canvas in canvases:
        assert canvas.tokens[:50] == response and set(canvas.tokens[50:]) == {tokenizer.pad_token_id}
        assert all(canvas.maskable)


def test_a_skeleton_scores_each_values_content_and_first_pad_and_may_be_masked_span_by_span(tokenizer):
    canvas = CanvasTarget(tokens=[50, 51, 1, 1, 9, 60, 1, 1], maskable=[True, True, True, True, False, True, True,
                                                                       True], style="skeleton",
                          scored=[True, True, True, False, False, True, True, False], spans=[(0, 4), (5, 3)])
    span_wise = 0
    for seed in range(200):
        noisy, scored, weight = noise_canvas(canvas, 99, torch.Generator().manual_seed(seed))
        masked = noisy == 99
        assert not bool(scored[[3, 7]].any())  # trailing pads are settled by the sampler, never scored
        assert set(scored.nonzero().flatten().tolist()) <= set(masked.nonzero().flatten().tolist())
        span_wise += all(bool(masked[s:s + n].all()) or not bool(masked[s:s + n].any()) for s, n in canvas.spans)
        assert bool((weight > 0).all())
    assert 100 < span_wise < 200  # about half the draws mask whole values (and some token draws happen to)


def test_outcome_first_draws_mask_the_whole_canvas_and_weigh_the_outcome_like_the_rest(tokenizer):
    canvas = CanvasTarget(tokens=[50, 51, 1, 1, 9, 60, 1, 70], maskable=[True, True, True, True, False, True, True,
                                                                       True], style="skeleton",
                          scored=[True, True, True, False, False, True, True, True], spans=[(0, 4), (5, 2), (7, 1)],
                          outcome=(7, 1))
    whole = 0
    for seed in range(200):
        noisy, scored, weight = noise_canvas(canvas, 99, torch.Generator().manual_seed(seed), outcome_first=0.25)
        if bool((noisy[[0, 1, 2, 3, 5, 6, 7]] == 99).all()) and float(weight[7]) > 1:
            whole += 1
            scored_weight = torch.full((6,), 1 / 6)  # six scored positions, t = 1
            assert torch.allclose(weight[[0, 1, 2, 5, 6]], scored_weight[:5])
            assert float(weight[7]) == pytest.approx(1 / 6 + float(scored_weight.sum()))  # outcome: + the canvas
            assert scored.tolist() == [True, True, True, False, False, True, True, True]
    assert 30 < whole < 75  # about a quarter of the draws
    plain = [noise_canvas(canvas, 99, torch.Generator().manual_seed(seed))[2] for seed in range(50)]
    assert all(torch.allclose(w, w[0].expand_as(w)) for w in plain)  # off: one weight per canvas, as before


def test_worker_processes_build_every_batch_of_an_epoch_in_the_loops_order(tokenizer):
    """Batches built ahead by two worker processes arrive in the order the loop would build them, cover every
    example once per epoch, and draw their own noise."""
    examples = [TrainingExample(prompt_ids=[tokenizer.bos_token_id, 40 + i, tokenizer.sep_token_id],
                                canvases=[CanvasTarget(tokens=[50, 51, 52, 53], maskable=[False, True, True, True],
                                                       style="skeleton")]) for i in range(12)]
    ids = {"mask": tokenizer.mask_token_id, "pad": tokenizer.pad_token_id}
    stream = BatchStream(examples, "mdlm", ids, batch_tokens=20, seed=5, split=True, outcome_first=0.0)
    plans = plan_batches(examples, "mdlm", 20, 5)
    inline = list(itertools.islice(stream_batches(stream, 0), len(plans) + 1))
    ahead = list(itertools.islice(stream_batches(stream, 2), len(plans) + 1))
    for built in (inline, ahead):
        assert [epoch for epoch, _ in built] == [0] * len(plans) + [1]
        prompts = [sorted(batch.prompts[:, 1].tolist()) for _, batch in built[:len(plans)]]
        assert prompts == [sorted(40 + i for i in plan) for plan in plans]
    assert sorted(p for _, batch in ahead[:len(plans)] for p in batch.prompts[:, 1].tolist()) == \
        [40 + i for i in range(12)]


def test_loader_workers_must_be_a_whole_number(corpus, tmp_path):
    with pytest.raises(InvalidInput, match="loader_workers"):
        TrainConfig(corpus=corpus, out=tmp_path / "m", loader_workers=-1)


def test_a_model_trained_on_sketches_says_so_and_one_trained_without_does_not(corpus, tmp_path):
    train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "sketch", steps=1, shape_share=1.0, max_rows=8, **TINY))
    train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "plain", steps=1, max_rows=8, **TINY))
    assert load_backend(tmp_path / "sketch").writes_shape and not load_backend(tmp_path / "plain").writes_shape
    train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "after", base=str(tmp_path / "sketch"), steps=1,
                                  max_rows=8, **TINY))
    lineage = json.loads((tmp_path / "after" / "training.json").read_text())["lineage"]
    assert [stage["shape_share"] for stage in lineage] == [1.0]  # the card says which stage learned sketches
    assert "sketch share 1.0" in (tmp_path / "after" / "README.md").read_text()


def test_the_shape_share_must_be_a_share(corpus, tmp_path):
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(InvalidInput, match="shape_share"):
            TrainConfig(corpus=corpus, out=tmp_path / "m", shape_share=bad)
