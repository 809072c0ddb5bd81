"""The denoising sampler and generate(): schedules, blocks, strategies, seeds, temperature, the repetition
penalty, the exact prompt cache, and checked responses for a simulated world (random tiny models)."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from wmstudio.model.canvas.canvas import build_canvas
from wmstudio.model.denoising.sampler import (
    Frame,
    SamplerSettings,
    choose,
    denoise,
    penalise_repeats,
    sample_tokens,
    score,
)
from wmstudio.model.denoising.text_penalty import TEXT_REPETITION_PENALTY, penalise_span_repeats, text_spans
from wmstudio.model.generation.generation import anchors_as_directives, generate, generate_stream
from wmstudio.model.generation.prompting import prepare_prompt
from wmstudio.model.network.architecture import new_model
from wmstudio.model.network.tokenizer import train_tokenizer
from wmstudio.model.serving.backends import ArBaseline, PrefixCausalBackend
from wmstudio.problems import InvalidInput
from wmstudio.world.prompt.render import render_prompt
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import parse_anchor, parse_anchors

SCHEMA = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["ok", "error"]},
        "count": {"type": "integer", "minimum": 0},
        "name": {"type": "string"},
        "refunded": {"type": "boolean"},
    },
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def world_and_call():
    sim = get_simulator("retail")
    rng = random.Random(0)
    state = sim.initial_state(rng)
    return sim.world(state), sim.valid_call(state, rng)


@pytest.fixture(scope="module")
def tokenizer(world_and_call):
    world, call = world_and_call
    lines = [json.dumps({"status": "ok", "count": i, "name": f"item {i}", "refunded": i % 2 == 0}) for i in range(300)]
    lines += [render_prompt(world, call)] * 20
    return train_tokenizer(lines, vocab_size=1500)


@pytest.fixture(scope="module")
def backend(tokenizer):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=2, hidden=64, heads=4, ffn=128, max_positions=4096)
    return PrefixCausalBackend(model, tokenizer, "tiny", tokenizer.mask_token_id, tokenizer.pad_token_id, 4096)


@pytest.fixture(scope="module")
def canvas(backend):
    return build_canvas(backend.tokenizer, SCHEMA, vocab_size=backend.vocab_size)


PROMPT = [2, 30, 31, 32, 33, 4]


def run(backend, canvas, use_cache=True, **settings) -> list[Frame]:
    return list(denoise(backend, PROMPT, canvas, SamplerSettings(**settings), use_cache=use_cache))


def test_every_masked_slot_is_committed_exactly_once_and_anchors_never_change(backend, canvas):
    frames = run(backend, canvas, samples=3, temperature=1.0)
    masked = set(canvas.masked_positions)
    for k in range(3):
        committed = [p for frame in frames for p in frame.unmasked[k]]
        assert sorted(committed) == sorted(masked)  # each once, nothing else
        final = frames[-1].tokens[k]
        assert all(final[i] == canvas.tokens[i] for i in range(len(canvas)) if i not in masked)
        assert backend.mask_id not in final
    assert frames[-1].done and not any(f.done for f in frames[:-1])
    assert all(len(f.confidences[k]) == len(f.unmasked[k]) for f in frames for k in range(3))
    assert all(0.0 <= c <= 1.0 for f in frames for c in f.confidences[0])


@pytest.fixture(scope="module")
def free(backend):
    return build_canvas(backend.tokenizer, None, mode="free", free_length=20, vocab_size=backend.vocab_size,
                        free_json=False)  # any text: the schedule alone decides the steps


def test_an_end_token_cuts_the_rest_of_the_array_in_the_same_step(backend):
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}}}}}
    canvas = build_canvas(backend.tokenizer, schema, vocab_size=backend.vocab_size)
    ends = [span for span in canvas.spans if span.kind == "end"]
    assert len(ends) == 5
    lengths = set()
    for seed in range(12):
        frames = run(backend, canvas, strategy="random", temperature=2.0, seed=seed)
        for before, frame in zip([None, *frames], frames):
            tokens = frame.tokens[0]
            for span in ends:
                if span.start in frame.unmasked[0] and tokens[span.start] == canvas.end_id:
                    cut = range(span.start + 1, span.until)
                    assert all(tokens[p] != backend.mask_id for p in cut)
                    assert all(tokens[p] in (canvas.pad_id, canvas.end_id) for p in cut if p in frame.unmasked[0])
        value = json.loads(canvas.decode(frames[-1].tokens[0]))
        lengths.add(len(value["rows"]))
    assert len(lengths) > 1  # the random sampler ends the array at different places


def test_a_pad_settles_the_rest_of_its_span_in_the_same_step(backend, canvas, free):
    for target, strategy in ((canvas, "low_confidence"), (free, "random"), (canvas, "random")):
        for seed in range(4):
            masked = [True] * len(target.tokens)
            for frame in run(backend, target, strategy=strategy, temperature=1.0, seed=seed):
                for position in frame.unmasked[0]:
                    masked[position] = False
                tokens = frame.tokens[0]
                for span in target.spans:
                    pads = [p for p in range(span.start, span.end) if not masked[p] and tokens[p] == target.pad_id]
                    if pads:  # values are left-aligned: once a pad is down, everything after it is pad
                        assert all(not masked[p] and tokens[p] == target.pad_id for p in range(pads[0], span.end))


def test_linear_schedule_takes_exactly_the_steps_asked(backend, free):
    for steps in (1, 3, 20):
        frames = run(backend, free, steps=steps, threshold=None, strategy="random")
        assert len(frames) == steps
        sizes = [len(f.unmasked[0]) for f in frames]
        assert max(sizes) - min(sizes) <= 1  # an even split, as LLaDA's num_transfer_tokens


def test_commits_that_would_break_a_span_wait_for_a_later_step(backend, canvas):
    frames = run(backend, canvas, steps=1, threshold=None, temperature=2.0, seed=5)
    assert len(frames) >= 1 and frames[-1].done  # conflicting commits in one span are deferred, never kept
    json.loads(canvas.decode(frames[-1].tokens[0]))


def test_threshold_commits_every_confident_slot_and_at_least_one(backend, free):
    assert len(run(backend, free, threshold=1e-9, steps=100)) == 1  # every confidence is above it (0 is "off")
    frames = run(backend, free, threshold=None, steps=20)
    assert len(frames) == 20 and all(len(f.unmasked[0]) == 1 for f in frames)


def test_default_settings_bound_the_number_of_steps(backend, canvas):
    frames = run(backend, canvas)
    assert len(frames) <= math.ceil(len(canvas.masked_positions) / 4)


def test_an_in_order_model_writes_values_left_to_right_and_commits_a_sure_run_in_one_step(tokenizer, canvas):
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=2, hidden=64, heads=4, ffn=128, max_positions=4096)
    ordered = PrefixCausalBackend(model, tokenizer, "in order", tokenizer.mask_token_id, tokenizer.pad_token_id, 4096)
    ordered.span_order = "left_to_right"
    runs = {threshold: list(denoise(ordered, PROMPT, canvas, SamplerSettings(threshold=threshold)))
            for threshold in (1.0, 1e-9)}
    for frames in runs.values():
        masked = set(canvas.masked_positions)
        for frame in frames:  # a value's written slots are always a prefix of its span: no hole
            masked -= set(frame.unmasked[0])
            for span in canvas.spans:
                open_slots = [p in masked for p in range(span.start, span.end)]
                assert open_slots == sorted(open_slots)
        json.loads(canvas.decode(frames[-1].tokens[0]))
    # every slot is "sure" at a threshold near 0 (0 itself is "off"): each value's run is chained into one step
    assert len(runs[1.0]) > 2 and len(runs[1e-9]) < len(runs[1.0])
    assert len(runs[1e-9][0].unmasked[0]) > len(canvas.spans)


def test_blocks_fill_left_to_right(backend, canvas):
    block = 8
    frames = run(backend, canvas, block=block, steps=12, threshold=None)
    order = [p // block for f in frames for p in sorted(f.unmasked[0])]
    assert order == sorted(order)


def test_a_model_trained_outcome_first_settles_the_outcome_before_any_other_value(backend, canvas):
    outcome = canvas.outcome_span()
    assert outcome is not None and outcome.path == "status"
    plain = run(backend, canvas, samples=2, temperature=1.0)
    backend.decide_first = "status"
    try:
        for settings in ({"samples": 2, "temperature": 1.0}, {"block": 8, "steps": 12, "threshold": None}):
            frames = run(backend, canvas, **settings)
            first = [f for f in frames if any(p in range(outcome.start, outcome.end) for p in f.unmasked[0])][0]
            assert frames.index(first) == 0 and all(p in range(outcome.start, outcome.end)
                                                    for p in frames[0].unmasked[0])
            assert frames[-1].done and json.loads(canvas.decode(frames[-1].tokens[0]))["status"] in ("ok", "error")
        assert len(frames) <= 12 + outcome.length  # its own step, then the asked schedule
        pinned = build_canvas(backend.tokenizer, SCHEMA, parse_anchors(['status="ok"']), vocab_size=backend.vocab_size)
        assert pinned.outcome_span() is None  # a pinned outcome is the user's: nothing to decide
    finally:
        backend.decide_first = None
    assert any(p not in range(outcome.start, outcome.end) for p in plain[0].unmasked[0])  # untrained: any order


def test_same_seed_same_responses_and_greedy_samples_agree(backend, canvas):
    a = run(backend, canvas, temperature=1.0, samples=4, seed=7)[-1].tokens
    b = run(backend, canvas, temperature=1.0, samples=4, seed=7)[-1].tokens
    assert a == b
    assert len({tuple(t) for t in a}) > 1  # K samples in one batch differ at temperature 1
    greedy = run(backend, canvas, temperature=0.0, samples=3)[-1].tokens
    assert greedy[0] == greedy[1] == greedy[2]


def test_cached_and_uncached_prompts_give_the_same_tokens(backend, canvas):
    cached = run(backend, canvas, samples=2, temperature=1.0, seed=3)
    uncached = run(backend, canvas, samples=2, temperature=1.0, seed=3, use_cache=False)
    assert [f.tokens for f in cached] == [f.tokens for f in uncached]


@pytest.mark.parametrize("strategy", ["low_confidence", "margin", "entropy", "random"])
def test_every_strategy_yields_json_that_fits_the_schema(backend, canvas, strategy):
    frames = run(backend, canvas, strategy=strategy, temperature=0.5, samples=2, repetition_penalty=1.3)
    for tokens in frames[-1].tokens:
        value = json.loads(canvas.decode(tokens))
        assert value["status"] in ("ok", "error") and isinstance(value["refunded"], bool)
        assert isinstance(value["count"], int) and value["count"] >= 0


def test_unknown_strategy_is_refused(backend, canvas):
    with pytest.raises(InvalidInput, match="strategy: 'best' is not known"):
        run(backend, canvas, strategy="best")


def test_gumbel_sampling_follows_softmax_and_greedy_takes_the_argmax():
    logits = torch.tensor([[[0.0, math.log(3.0), -math.inf]]]).expand(1, 4000, 3)
    generator = torch.Generator().manual_seed(0)
    draws = sample_tokens(logits, 1.0, generator)
    share = float((draws == 1).float().mean())
    assert abs(share - 0.75) < 0.03 and not bool((draws == 2).any())
    assert sample_tokens(logits, 0.0, generator).eq(1).all()


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    logits = torch.tensor([[[2.0, -2.0, 1.0, 4.0]]])
    tokens = torch.tensor([[0, 1]])
    filled = torch.tensor([[True, True]])
    out = penalise_repeats(logits, tokens, filled, 2.0)
    assert out.tolist() == [[[1.0, -4.0, 1.0, 4.0]]]
    assert penalise_repeats(logits, tokens, torch.tensor([[False, False]]), 2.0).equal(logits)


def test_a_text_span_penalises_the_tokens_it_already_holds_and_nothing_else():
    logits = torch.tensor([[[2.0, 2.0, -2.0, 2.0, 2.0]] * 4])  # (1 sample, 4 slots, 5 tokens)
    tokens = torch.tensor([[3, 1, 0, 3]])  # the span is slots 0-2: it holds token 3 and a pad (1); slot 3 is outside
    filled = torch.tensor([[True, True, False, True]])
    out = penalise_span_repeats(logits, tokens, filled, [(0, 3)], 2.0, pad_id=1)
    assert out[0, 2].tolist() == [2.0, 2.0, -2.0, 1.0, 2.0]  # the span's own token 3, not the pad
    assert out[0, 3].equal(logits[0, 3]) and logits[0, 2, 3] == 2.0  # outside the span, and the input, untouched
    assert penalise_span_repeats(logits, tokens, filled, [], 2.0, pad_id=1) is logits
    assert TEXT_REPETITION_PENALTY == 1.3  # on by default, the paper's serving value


def test_text_spans_are_the_prose_strings_of_a_canvas(backend):
    tool = get_simulator("retail").world().tool("refund_order")
    canvas = build_canvas(backend.tokenizer, tool.response, vocab_size=backend.vocab_size)
    spans = {span.path: (span.start, span.end) for span in canvas.spans}
    assert text_spans(canvas) == [spans["message"]]  # not the ids, the error code or the numbers


def test_scores_and_choice():
    logits = torch.log(torch.tensor([[[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]]]))
    guess = logits.argmax(-1)
    generator = torch.Generator().manual_seed(0)
    torch.testing.assert_close(score(logits, guess, "low_confidence", generator), torch.tensor([[0.7, 0.4]]))
    torch.testing.assert_close(score(logits, guess, "margin", generator), torch.tensor([[0.5, 0.05]]))
    entropy = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    assert abs(float(score(logits, guess, "entropy", generator)[0, 0]) - math.exp(-entropy)) < 1e-5
    confidence = torch.tensor([[0.9, 0.2, 0.95, 0.5]])
    eligible = torch.tensor([[True, True, False, True]])
    assert choose(confidence, eligible, [1], None).tolist() == [[True, False, False, False]]
    assert choose(confidence, eligible, [1], 0.4).tolist() == [[True, False, False, True]]


# ----------------------------------------------------------------------------------------------------
# generate(): a simulated world, its prompt, the canvas, checks.


def test_generate_returns_checked_json_responses_honouring_anchors(backend, world_and_call):
    world, call = world_and_call
    generation = generate(backend, world, call, parse_anchors(['status="error"']), (),
                          SamplerSettings(samples=2, temperature=1.0))
    assert generation.mode == "skeleton" and len(generation.samples) == 2
    for sample in generation.samples:
        assert sample.checks.json_valid and not sample.checks.anchor_violations
        assert json.loads(sample.response)["status"] == "error"
        assert 1 <= sample.steps <= len(generation.frames)
    data = generation.to_json()
    assert data["model"] == "tiny" and data["samples"][0]["checks"]["json_valid"] is True
    trace = generation.trace(0)
    assert len(trace) == len(generation.canvas.masked_positions)


def test_generate_streams_frames_before_the_result(backend, world_and_call):
    world, call = world_and_call
    items = list(generate_stream(backend, world, call, (), (),
                                 SamplerSettings(free=True, free_length=16, steps=4, threshold=None)))
    names = [type(i).__name__ for i in items]
    assert names[0] == "Canvas" and names[-1] == "Generation" and set(names[1:-1]) == {"Frame"}
    assert len(names) - 2 >= 4  # the schedule's steps, and more when the JSON grammar defers a commit
    assert items[-1].mode == "free" and len(items[-1].canvas) == 16
    json.loads(items[-1].samples[0].response)  # free mode writes one JSON value


def test_generate_refuses_a_canvas_longer_than_the_context(tokenizer, world_and_call):
    world, call = world_and_call
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=128)
    small = PrefixCausalBackend(model, tokenizer, "small", tokenizer.mask_token_id, tokenizer.pad_token_id, 128)
    with pytest.raises(InvalidInput, match="over the model's context of 128"):
        generate(small, world, call)
    with pytest.raises(InvalidInput, match="no tool named 'nope'"):
        generate(small, world, Call("nope"))


def test_the_ar_baseline_gets_anchors_as_directives(tokenizer, world_and_call):
    world, call = world_and_call
    anchor = parse_anchor('status="error"')
    steered = anchors_as_directives(world, [anchor])
    assert steered.directives[-1] == 'The response must have status = "error".'
    assert world.directives != steered.directives
    torch.manual_seed(0)
    model = new_model(tokenizer, kind="ar", layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    baseline = ArBaseline(model, tokenizer, "ar-tiny", 4096)
    plain = prepare_prompt(baseline, world, call, canvas_tokens=64)
    told = prepare_prompt(baseline, steered, call, canvas_tokens=64)
    assert '- The response must have status = "error".' in told.rendered.text
    assert "must have status" not in plain.rendered.text
    generation = generate(baseline, world, call, [anchor], (), SamplerSettings(free=True, free_length=8, samples=2))
    assert generation.mode == "autoregressive" and len(generation.samples) == 2
    assert all(isinstance(s.response, str) and s.checks.anchor_violations for s in generation.samples)


# ----------------------------------------------------------------------------------------------------
# The CLI: `wmstudio generate` and `wmstudio bench denoise`.


@pytest.fixture(scope="module")
def files(tokenizer, world_and_call, tmp_path_factory):
    from wmstudio.world.spec import save_world

    folder = tmp_path_factory.mktemp("cli")
    world, call = world_and_call
    save_world(world, folder / "world.json")
    (folder / "call.json").write_text(json.dumps(call.to_json()))
    torch.manual_seed(0)
    model = new_model(tokenizer, layers=1, hidden=32, heads=2, ffn=64, max_positions=4096)
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return folder


def test_cli_generate_json_prints_checked_samples(files):
    from typer.testing import CliRunner

    from wmstudio.cli import app

    args = ["generate", str(files / "world.json"), "--call", str(files / "call.json"), "--model",
            str(files / "model"), "--anchor", 'status="error"', "--samples", "2", "--temperature", "1", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"].endswith("model") and len(data["samples"]) == 2
    for sample in data["samples"]:
        assert json.loads(sample["response"])["status"] == "error"
        assert sample["checks"]["json_valid"] and sample["steps"] >= 1


def test_cli_generate_live_view_and_clear_errors(files):
    from typer.testing import CliRunner

    from wmstudio.cli import app

    base = ["generate", str(files / "world.json"), "--call", str(files / "call.json")]
    result = CliRunner().invoke(app, [*base, "--model", str(files / "model"), "--free", "--free-length", "12"])
    assert result.exit_code == 0 and "--- sample 1" in result.stdout
    missing = CliRunner().invoke(app, [*base, "--model", str(files / "nowhere")])
    assert missing.exit_code == 2 and "no such folder" in missing.stderr
    wrong = CliRunner().invoke(app, [*base, "--model", str(files / "model"), "--anchor", "nope=1"])
    assert wrong.exit_code == 2 and "anchor nope" in wrong.stderr
    strategy = CliRunner().invoke(app, [*base, "--strategy", "best"])
    assert strategy.exit_code == 2 and "--strategy 'best' is not known" in strategy.stderr


def test_bench_times_ours_against_the_reference_loop(files):
    from wmstudio.model.generation.bench import bench_denoise

    report = bench_denoise(model=str(files / "model"), canvases=(32,), prompts=(40, 5000), repeats=1,
                           workloads=("random",))
    [result] = report.results
    assert result.canvas == 32 and result.prompt_tokens == 40 and result.workload == "random" and result.calls == 1
    assert result.steps >= 1 and result.reference_steps >= 1
    assert result.median_ms > 0 and result.reference_median_ms > 0 and result.speedup > 0
    assert report.skipped == ["canvas 32 + prompt 5000 exceeds the context (4096)"]
    data = report.to_json()
    fields = {"canvas", "prompt_tokens", "median_ms", "reference_median_ms", "speedup", "steps"}
    assert set(data["results"][0]) >= fields


def test_bench_real_workload_times_held_out_calls_of_the_demo_worlds(files):
    from wmstudio.model.generation.bench import bench_denoise, real_calls

    report = bench_denoise(model=str(files / "model"), canvases=(100,), prompts=(300,), repeats=2, workloads=("real",))
    [result] = report.results
    assert result.workload == "real" and result.calls == 2 and 75 <= result.canvas <= 125
    assert 270 <= result.prompt_tokens <= 300 and result.median_ms > 0 and result.speedup > 0
    from wmstudio.model.serving.backends import load_backend

    backend = load_backend(str(files / "model"))
    calls = real_calls(backend, 100, 300, 3)
    assert len({tuple(c.prompt) for c in calls}) == 3  # three different calls, each a rendered prompt
    assert all(c.prompt[0] == backend.tokenizer.bos_token_id and 75 <= len(c.canvas) <= 125 for c in calls)
    assert all("Active tool call:" in backend.tokenizer.decode(c.prompt) for c in calls)
    with pytest.raises(InvalidInput, match="unknown workload 'fast'"):
        bench_denoise(model=str(files / "model"), workloads=("fast",))


def test_bench_llada_preset_refuses_the_cpu():
    from typer.testing import CliRunner

    from wmstudio.cli import app

    result = CliRunner().invoke(app, ["bench", "denoise", "--preset", "llada-8b", "--device", "cpu"])
    assert result.exit_code == 2 and "needs a CUDA GPU" in result.stderr
    unknown = CliRunner().invoke(app, ["bench", "denoise", "--preset", "huge", "--device", "cpu"])
    assert unknown.exit_code == 2 and "unknown preset 'huge'" in unknown.stderr



def test_every_strategy_the_settings_admit_has_a_scorer_and_an_unknown_one_is_refused():
    import torch

    from wmstudio.model.denoising.sampler import score
    from wmstudio.model.denoising.sampler_settings import SamplerSettings
    from wmstudio.model.denoising.strategies import STRATEGIES
    from wmstudio.settings import setting_specs

    offered = next(spec for spec in setting_specs(SamplerSettings) if spec.name == "strategy").choices
    assert tuple(offered) == STRATEGIES  # the form's choices are the scorers' table
    logits, guess = torch.randn(2, 5, 11), torch.zeros(2, 5, dtype=torch.long)
    for strategy in STRATEGIES:
        confidence = score(logits, guess, strategy, torch.Generator().manual_seed(0))
        assert confidence.shape == (2, 5) and bool(((confidence >= 0) & (confidence <= 1)).all())
    with pytest.raises(ValueError, match="no scorer for strategy 'fastest'"):
        score(logits, guess, "fastest", torch.Generator())
