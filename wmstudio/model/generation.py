"""One call in, K checked responses out: prompt, canvas, denoising and check reports in one function.

`generate_stream` yields the Canvas (so a view knows the layout), each Frame as it is made, and
finally the Generation; `generate` just returns the Generation. The AR baseline takes the same arguments, with
the anchors turned into steering directives since it cannot see fields it has not written yet."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

from wmstudio.model.backends import ArBaseline, Backend
from wmstudio.model.canvas import FREE, SKELETON, Canvas, SpanBudgets, build_canvas, check_fits
from wmstudio.model.sampler import DEFAULT_THRESHOLD, Frame, denoise
from wmstudio.model.tokenizer import SEP_TOKEN, encode_prompt, encode_text
from wmstudio.world.anchors import Anchor, parse_anchors
from wmstudio.world.checks import CheckReport, check_step
from wmstudio.problems import InvalidInput
from wmstudio.world.prompt import render_chat, render_prompt
from wmstudio.world.spec import Call, WorldSpec

PROMPT_MAX_CHARS = 3000  # the history budget training rows were rendered with (model/examples.py)


@dataclass
class Sample:
    """One generated response: its text, its check report, and the steps that committed something."""

    response: str
    checks: CheckReport
    steps: int
    tokens: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"response": self.response, "checks": self.checks.to_json(), "steps": self.steps}


@dataclass
class Generation:
    """The result of one `generate`: samples, the canvas they came from, the frames, and timing."""

    model: str
    mode: str
    samples: list[Sample]
    settings: dict[str, Any]
    prompt_tokens: int
    canvas: Canvas | None = None
    frames: list[Frame] = field(default_factory=list)
    elapsed_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mode": self.mode,
            "prompt_tokens": self.prompt_tokens,
            "canvas_tokens": len(self.canvas) if self.canvas is not None else None,
            "settings": self.settings,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "samples": [s.to_json() for s in self.samples],
        }

    def trace(self, sample: int = 0) -> list[dict[str, Any]]:
        """The compact decode trace of one sample: per step, the positions committed, tokens and confidences."""
        out = []
        for frame in self.frames:
            positions = frame.unmasked[sample]
            if positions:
                tokens = [frame.tokens[sample][p] for p in positions]
                confidences = [round(c, 4) for c in frame.confidences[sample]]
                out.append({"step": frame.step, "positions": positions, "tokens": tokens, "confidences": confidences})
        return out


def prompt_ids_for(backend: Backend | ArBaseline, world: WorldSpec, call: Call,
                   history: Sequence[Any] = ()) -> list[int]:
    """The prompt ids the model expects: our `[bos] prompt [sep]` framing, else the tokenizer's chat template."""
    tokenizer = backend.tokenizer
    if getattr(tokenizer, "sep_token", None) == SEP_TOKEN:
        return encode_prompt(tokenizer, render_prompt(world, call, history, max_chars=PROMPT_MAX_CHARS), 10**9)
    if getattr(tokenizer, "chat_template", None):
        messages = render_chat(world, call, history, max_chars=PROMPT_MAX_CHARS)["messages"]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    return encode_text(tokenizer, render_prompt(world, call, history, max_chars=PROMPT_MAX_CHARS))


def prepare_canvas(backend: Backend, world: WorldSpec, call: Call, anchors: Sequence[Anchor], free: bool = False,
                   free_length: int = 64, budgets: SpanBudgets = SpanBudgets()) -> Canvas:
    """The canvas for `call`'s response: skeleton when the tool has a response schema (and not `free`)."""
    tool = _tool(world, call)
    mode = FREE if free or tool.response is None else SKELETON
    return build_canvas(backend.tokenizer, tool.response, anchors, mode=mode, free_length=free_length,
                        budgets=budgets, vocab_size=backend.vocab_size, mask_id=backend.mask_id,
                        pad_id=backend.span_pad_id)


def generate_stream(
    backend: Backend | ArBaseline,
    world: WorldSpec,
    call: Call | dict[str, Any],
    anchors: Sequence[Anchor | str] = (),
    history: Sequence[Any] = (),
    free: bool = False,
    free_length: int = 64,
    steps: int | None = None,
    strategy: str = "low_confidence",
    threshold: float | None = DEFAULT_THRESHOLD,
    block: int | None = None,
    temperature: float = 0.0,
    repetition_penalty: float = 1.0,
    samples: int = 1,
    seed: int = 0,
) -> Iterator[Canvas | Frame | Generation]:
    """Yield the Canvas, a Frame per denoising step, then the Generation (responses checked against the world).
    The AR baseline yields only the Generation.

    InvalidInput for an unknown tool, bad anchors, or a prompt + canvas longer than the model's context."""
    the_call = call if isinstance(call, Call) else Call.from_json(call)
    pinned = parse_anchors(anchors)
    settings = {"steps": steps, "strategy": strategy, "threshold": threshold, "block": block,
                "temperature": temperature, "repetition_penalty": repetition_penalty, "samples": samples,
                "seed": seed, "anchors": [a.to_json() for a in pinned]}
    started = time.perf_counter()
    if isinstance(backend, ArBaseline):
        yield _generate_ar(backend, world, the_call, pinned, history, free, free_length, settings, started)
        return
    canvas = prepare_canvas(backend, world, the_call, pinned, free, free_length)
    prompt_ids = prompt_ids_for(backend, world, the_call, history)
    check_fits(len(prompt_ids), len(canvas), backend.max_length)
    yield canvas
    frames: list[Frame] = []
    for frame in denoise(backend, prompt_ids, canvas, steps=steps, strategy=strategy, threshold=threshold,
                         block=block, temperature=temperature, repetition_penalty=repetition_penalty,
                         samples=samples, seed=seed):
        frames.append(frame)
        yield frame
    final = frames[-1].tokens if frames else [list(canvas.tokens)] * samples
    results = []
    for k, tokens in enumerate(final):
        text = canvas.decode(tokens)
        report = check_step(world, the_call, text, anchors=pinned, history=history)
        results.append(Sample(text, report, sum(1 for f in frames if f.unmasked[k]), tokens))
    yield Generation(backend.name, canvas.mode, results, settings, len(prompt_ids), canvas, frames,
                     (time.perf_counter() - started) * 1000)


def generate(backend: Backend | ArBaseline, world: WorldSpec, call: Call | dict[str, Any],
             anchors: Sequence[Anchor | str] = (), on_frame: Callable[[Frame], None] | None = None,
             **settings: Any) -> Generation:
    """`generate_stream` run to the end; `on_frame` sees each Frame as it is made (e.g. a progress view)."""
    for item in generate_stream(backend, world, call, anchors, **settings):
        if isinstance(item, Generation):
            return item
        if on_frame is not None and isinstance(item, Frame):
            on_frame(item)
    raise RuntimeError("generation ended without a result")  # pragma: no cover - generate_stream always returns one


def anchors_as_directives(world: WorldSpec, anchors: Sequence[Anchor]) -> WorldSpec:
    """A copy of `world` whose directives also state each anchor (how an AR model is told about them)."""
    extra = [f"The response must have {a.path} = {json.dumps(a.value, ensure_ascii=False)}." for a in anchors]
    return replace(world, directives=[*world.directives, *extra])


def _generate_ar(backend: ArBaseline, world: WorldSpec, call: Call, anchors: list[Anchor], history: Sequence[Any],
                 free: bool, free_length: int, settings: dict[str, Any], started: float) -> Generation:
    """Anchors become directives; the token budget is the skeleton's length (+16) or `free_length`."""
    steered = anchors_as_directives(world, anchors)
    prompt_ids = prompt_ids_for(backend, steered, call, history)
    tool = _tool(world, call)
    budget = free_length
    if tool.response is not None and not free:
        has_mask = backend.tokenizer.mask_token_id is not None
        budget = len(build_canvas(backend.tokenizer, tool.response, anchors)) + 16 if has_mask else 256
    check_fits(len(prompt_ids), budget, backend.max_length)
    outputs = backend.generate(prompt_ids, max_new_tokens=budget, temperature=settings["temperature"],
                               repetition_penalty=settings["repetition_penalty"], samples=settings["samples"],
                               seed=settings["seed"])
    results = []
    for ids in outputs:
        text = backend.tokenizer.decode(ids, skip_special_tokens=True)
        report = check_step(world, call, text, anchors=anchors, history=history)
        results.append(Sample(text, report, len(ids), ids))
    return Generation(backend.name, "autoregressive", results, settings, len(prompt_ids), None, [],
                      (time.perf_counter() - started) * 1000)


def _tool(world: WorldSpec, call: Call):
    try:
        return world.tool(call.name)
    except KeyError as err:
        raise InvalidInput(str(err.args[0]) if err.args else f"no tool named {call.name!r}") from None
