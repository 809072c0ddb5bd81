"""Speed benchmark: our sampler (cached prompt, threshold decoding) against LLaDA's reference loop.

The reference re-runs the whole prompt + canvas at every step and commits a fixed number of tokens
per step (LLaDA's generate(), one block, greedy). Both run on the same model, canvas and prompt,
interleaved in one process, so machine noise hits both alike; medians are reported. Two workloads:
`random` (random prompt tokens, a synthetic canvas: the model writes garbage, often a slot a step, the
worst case) and `real` (held-out calls of the demo worlds: what a user's step costs)."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from wmstudio.locations import DEFAULT_MODEL
from wmstudio.model.canvas.canvas import Canvas, build_canvas
from wmstudio.model.denoising.sampler import SamplerSettings, denoise
from wmstudio.model.generation.generation import copy_plan_for, prepare_canvas, response_schema
from wmstudio.model.generation.outcome_choice import choose_outcomes
from wmstudio.model.generation.prompting import prepare_prompt
from wmstudio.model.heads.copy_head import CopyPlan
from wmstudio.model.network.architecture import MDLM, new_model
from wmstudio.model.network.sources import resolve_model_path
from wmstudio.model.network.tokenizer import train_tokenizer
from wmstudio.model.serving.backends import (
    Backend,
    PrefixCausalBackend,
    load_backend,
    pick_device,
    set_cpu_threads,
)
from wmstudio.problems import InvalidInput
from wmstudio.world.corpus.rows import iter_corpus
from wmstudio.world.history import parse_history
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

PRESETS = ("default", "llada-8b")
WORKLOADS = ("random", "real")
LLADA_8B_SHAPE = {"hidden": 4096, "layers": 32, "heads": 32, "ffn": 12288, "vocab": 126464}
REFERENCE_TOKENS_PER_STEP = 2
REAL_SEED = 1  # the corpus seed eval-wm's held-out rows come from: no model here trained on it
REAL_SCAN = 600  # corpus rows looked through for calls of a canvas and prompt size


@dataclass
class BenchResult:
    """One (canvas, prompt) configuration: medians over its calls (each its own prompt), ours against the reference."""

    canvas: int
    prompt_tokens: int
    median_ms: float
    reference_median_ms: float
    speedup: float
    steps: int
    reference_steps: int
    tokens_per_s: float
    reference_tokens_per_s: float
    cache_only_median_ms: float  # ours with the cache but the reference's schedule: the cache's share
    workload: str = "random"
    calls: int = 1  # distinct (prompt, canvas) pairs timed; canvas and prompt_tokens are their medians


@dataclass
class BenchReport:
    """Everything `wmstudio bench denoise --json` prints."""

    preset: str
    model: str
    device: str
    dtype: str
    threads: int
    repeats: int
    settings: dict[str, Any]
    results: list[BenchResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["results"] = [asdict(r) for r in self.results]
        return data


def bench_denoise(
    preset: str = "default",
    device: str | None = None,
    canvases: Sequence[int] = (32, 64, 128),
    prompts: Sequence[int] = (400, 1024),
    repeats: int = 5,
    model: str | None = None,
    progress: Callable[[str], None] | None = None,
    workloads: Sequence[str] = WORKLOADS,
) -> BenchReport:
    """Time our default sampler and the reference loop on every (canvas, prompt) pair of each workload,
    interleaved; `real` only for a trained model (the llada-8b preset is random weights)."""
    if preset not in PRESETS:
        raise InvalidInput(f"unknown preset {preset!r}: use {' or '.join(PRESETS)}")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise InvalidInput(f"unknown workload {unknown[0]!r}: use {' or '.join(WORKLOADS)}")
    backend = bench_backend(preset, device, model)
    report = BenchReport(preset, backend.name, str(backend.device), str(backend.dtype).replace("torch.", ""),
                         torch.get_num_threads(), repeats,
                         {"ours": "defaults (threshold 0.9, >= 4 tokens/step, cached prompt, copy head on real "
                                  "calls)",
                          "reference": f"full forward per step, {REFERENCE_TOKENS_PER_STEP} tokens/step, greedy"})
    generator = torch.Generator().manual_seed(0)
    for workload in workloads:
        if workload == "real" and preset != "default":
            report.skipped.append(f"real calls: the {preset} preset has random weights")
            continue
        for prompt_len in prompts:
            for canvas_len in canvases:
                if prompt_len + canvas_len > backend.max_length:
                    report.skipped.append(f"canvas {canvas_len} + prompt {prompt_len} exceeds the context "
                                          f"({backend.max_length})")
                    continue
                if workload == "random":
                    canvas = bench_canvas(backend, canvas_len)
                    calls = [BenchCall(random_prompt(backend, prompt_len, generator), canvas, None)
                             for _ in range(repeats)]
                else:
                    calls = real_calls(backend, canvas_len, prompt_len, repeats)
                    if not calls:
                        report.skipped.append(f"real calls: none of {REAL_SCAN} held-out rows has a canvas of about "
                                              f"{canvas_len} tokens and a prompt that fills {prompt_len}")
                        continue
                result = _time_calls(backend, calls, workload)
                report.results.append(result)
                if progress:
                    progress(f"{workload:6s} canvas {result.canvas:4d} prompt {result.prompt_tokens:5d}: "
                             f"{result.median_ms:8.1f} ms vs {result.reference_median_ms:8.1f} ms "
                             f"({result.speedup:.1f}x, {result.steps} steps)")
    return report


@dataclass
class BenchCall:
    """One (prompt, canvas) pair to time, with the copy plan the sampler gets for it (None: no copy head)."""

    prompt: list[int]
    canvas: Canvas
    copy: CopyPlan | None


def real_calls(backend: Backend, canvas_len: int, prompt_len: int, count: int) -> list[BenchCall]:
    """The first `count` held-out calls of the demo worlds (corpus seed REAL_SEED) whose response canvas is within a
    quarter of `canvas_len` tokens and whose prompt, rendered within `prompt_len` tokens as generation renders it,
    fills at least 90% of them: prompts, canvases and copy plans as `generate` makes them (with the outcome head's
    status and error code written in, about a millisecond, when the model has one)."""
    calls: list[BenchCall] = []
    for row in iter_corpus(REAL_SCAN, REAL_SEED):
        meta = row.data["meta"]
        world = get_simulator(meta["world"]).world(meta["initial_state"], meta["directives"])
        call, history = Call.from_json(meta["call"]), parse_history(meta["history"])
        schema = response_schema(world, call, history)
        try:
            canvas = prepare_canvas(backend, world, call, (), history=history, schema=schema)
        except InvalidInput:
            continue
        if abs(len(canvas) - canvas_len) > canvas_len / 4:
            continue
        outcomes = choose_outcomes(backend, world, call, (), history, SamplerSettings(), schema)
        if outcomes:
            canvas = canvas.with_values(outcomes[0].values(schema))
        prompt = prepare_prompt(backend, world, call, history, len(canvas), prompt_tokens=prompt_len)
        if len(prompt.ids) < 0.9 * prompt_len:
            continue
        calls.append(BenchCall(prompt.ids, canvas, copy_plan_for(backend, canvas, prompt)))
        if len(calls) == count:
            break
    return calls


def _time_calls(backend: Backend, calls: list[BenchCall], workload: str) -> BenchResult:
    """Time ours, the reference and the cache alone once on each call, interleaved; medians over the calls."""
    runs: dict[str, list[float]] = {"ours": [], "reference": [], "cache_only": []}
    steps, ref_steps = [], []
    for number, call in enumerate(calls):
        prompt, canvas = call.prompt, call.canvas
        masked = len(canvas.masked_positions)
        ref_steps.append(math.ceil(masked / REFERENCE_TOKENS_PER_STEP))
        linear = SamplerSettings(steps=ref_steps[-1], threshold=None)
        jobs = {
            "ours": lambda: len(list(denoise(backend, prompt, canvas, copy=call.copy))),
            "reference": lambda: reference_generate(backend, prompt, canvas, REFERENCE_TOKENS_PER_STEP),
            "cache_only": lambda: len(list(denoise(backend, prompt, canvas, linear))),
        }
        for name, job in jobs.items():  # warm-up: this canvas's grammar tables; allocator and kernels once
            if number == 0 or name != "reference":
                job()
        for name, job in jobs.items():
            _sync(backend)
            started = time.perf_counter()
            count = job()
            _sync(backend)
            runs[name].append((time.perf_counter() - started) * 1000)
            if name == "ours":
                steps.append(count)
    ours, reference = statistics.median(runs["ours"]), statistics.median(runs["reference"])
    canvas_len = int(statistics.median(len(c.canvas) for c in calls))
    return BenchResult(
        canvas=canvas_len, prompt_tokens=int(statistics.median(len(c.prompt) for c in calls)),
        median_ms=round(ours, 2), reference_median_ms=round(reference, 2), speedup=round(reference / ours, 2),
        steps=int(statistics.median(steps)), reference_steps=int(statistics.median(ref_steps)),
        tokens_per_s=round(canvas_len / ours * 1000, 1),
        reference_tokens_per_s=round(canvas_len / reference * 1000, 1),
        cache_only_median_ms=round(statistics.median(runs["cache_only"]), 2),
        workload=workload, calls=len(calls),
    )


@torch.inference_mode()
def reference_generate(backend: Backend, prompt: list[int], canvas: Canvas, tokens_per_step: int) -> int:
    """LLaDA's generate() (one block, greedy, low-confidence remasking): the whole prompt + canvas through
    the model at every step, a fixed number of tokens committed per step. Returns the step count."""
    device = backend.device
    x = torch.tensor([canvas.tokens], device=device)
    masked = torch.tensor([[s >= 0 for s in canvas.span_of]], device=device)
    x[masked] = backend.mask_id
    prompt_ids = torch.tensor([prompt], device=device)
    steps = math.ceil(int(masked.sum()) / tokens_per_step)
    for step in range(steps):
        logits = backend.full_logits(prompt_ids, x)
        guess = logits.argmax(dim=-1)
        confidence = torch.softmax(logits.float(), dim=-1).gather(-1, guess.unsqueeze(-1)).squeeze(-1)
        confidence = confidence.masked_fill(~masked, -math.inf)
        count = min(tokens_per_step, int(masked.sum()))
        chosen = torch.zeros_like(masked)
        chosen[0, confidence[0].topk(count).indices] = True
        x = torch.where(chosen, guess, x)
        masked &= ~chosen
    return steps


def bench_backend(preset: str, device: str | None, model: str | None) -> Backend:
    """The model to time: a given one; for `default` the shipped MDLM (or a random one of its shape);
    for `llada-8b` a random model of LLaDA-8B's dimensions on a CUDA GPU."""
    where = pick_device(device)
    if preset == "llada-8b":
        if where.type != "cuda":
            raise InvalidInput("the llada-8b preset needs a CUDA GPU (16 GB of bf16 weights; a CPU step takes "
                               "minutes): run it with --device cuda on a GPU machine, or use --preset default")
        shape = LLADA_8B_SHAPE
        tokenizer = _bench_tokenizer()
        return _random_backend(tokenizer, "random LLaDA-8B shape", where, torch.bfloat16, layers=shape["layers"],
                               hidden=shape["hidden"], heads=shape["heads"], ffn=shape["ffn"], vocab=shape["vocab"])
    source = model or DEFAULT_MODEL
    if model is not None or Path(resolve_model_path(source)).is_dir():
        backend = load_backend(source, device=str(where))
        if not isinstance(backend, PrefixCausalBackend):
            raise InvalidInput(f"{source} is not a wmstudio MDLM: the benchmark times our prefix-causal sampler")
        return backend
    dtype = torch.bfloat16 if where.type == "cuda" else torch.float32
    tokenizer = _bench_tokenizer()
    return _random_backend(tokenizer, "random default shape (no shipped model)", where, dtype,
                           vocab=max(4096, len(tokenizer)))


def _random_backend(tokenizer: Any, name: str, device: torch.device, dtype: torch.dtype, vocab: int | None = None,
                    **shape: int) -> Backend:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = new_model(tokenizer, kind=MDLM, max_positions=2048, **shape)
            if vocab is not None and vocab != model.config.vocab_size:
                model.resize_token_embeddings(vocab, mean_resizing=False)
    finally:
        torch.set_default_dtype(previous)
    if device.type == "cpu":
        set_cpu_threads(model)
    return PrefixCausalBackend(model, tokenizer, name, tokenizer.mask_token_id, tokenizer.pad_token_id, 2048)


def _bench_tokenizer() -> Any:
    """The shipped tokenizer when there is one, else a 4096-token one trained on synthetic JSON lines."""
    shipped = Path(resolve_model_path(DEFAULT_MODEL))
    if (shipped / "tokenizer.json").exists():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(shipped)
    lines = [f'{{"id":"ord_{i:05d}","status":"{["ok", "error"][i % 2]}","total_cents":{i * 37},'
             f'"items":[{{"sku":"SKU-{i % 97}","qty":{i % 5}}}],"message":"order {i} of customer c{i % 31}"}}'
             for i in range(3000)]
    return train_tokenizer(lines, vocab_size=4096)


def bench_canvas(backend: Backend, length: int) -> Canvas:
    """A skeleton canvas of exactly `length` tokens: typed fields, the last a string sized to fit."""
    tokenizer = backend.tokenizer
    fields: dict[str, Any] = {}
    kinds = [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}, {"type": "number"},
             {"type": "string", "enum": ["ok", "error"]}]
    while True:
        schema = {"type": "object", "properties": {**fields, "last": {"type": "string", "maxLength": 1}}}
        base = len(build_canvas(tokenizer, schema, vocab_size=backend.vocab_size))
        room = length - base + 1
        if 1 <= room <= 48:
            schema["properties"]["last"]["maxLength"] = room
            canvas = build_canvas(tokenizer, schema, vocab_size=backend.vocab_size)
            if len(canvas) == length:
                return canvas
        if room < 1 or len(fields) > 200:
            free = max(1, length - 2)
            return build_canvas(tokenizer, None, mode="free", free_length=free, text_anchors=[(0, "{"), (free, "}")],
                                vocab_size=backend.vocab_size)
        fields[f"f{len(fields)}"] = kinds[len(fields) % len(kinds)]


def random_prompt(backend: Backend, length: int, generator: torch.Generator) -> list[int]:
    """`[bos] + random ordinary tokens + [sep]`, `length` ids in all (timing does not depend on content)."""
    tokenizer = backend.tokenizer
    special = set(tokenizer.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    body = ordinary[torch.randint(len(ordinary), (max(0, length - 2),), generator=generator)].tolist()
    return [tokenizer.bos_token_id, *body, tokenizer.sep_token_id]


def _sync(backend: Backend) -> None:
    if backend.device.type == "cuda":
        torch.cuda.synchronize(backend.device)
