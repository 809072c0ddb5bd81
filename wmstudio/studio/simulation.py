"""One simulated tool call as the studio runs it: validate the request, stream the denoising, save the step.

Plain functions over a StudioContext (`run_simulation`, `run_baseline`, `save_simulation`), so the Simulate
tab, the Rollouts tab and tests share them; every bad input is an InvalidInput naming the field."""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jsonschema.validators import validator_for

from wmstudio.model.backends import ArBaseline
from wmstudio.model.canvas import MAX_CANVAS_TOKENS, Canvas
from wmstudio.model.generation import (
    Generation,
    generate,
    generate_stream,
)
from wmstudio.model.sampler import DEFAULT_THRESHOLD, STRATEGIES, Frame
from wmstudio.store import (
    MadeBy,
    Step,
    Store,
    TraceEntry,
    append_step,
    create_rollout,
    get_rollout,
    get_world,
)
from wmstudio.studio.context import StudioContext
from wmstudio.ui.denoise_view import Commits
from wmstudio.ui.forms import parse_json_field
from wmstudio.world.anchors import Anchor, parse_anchors
from wmstudio.world.jsonpath import format_path
from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool

MAX_SAMPLES = 8
MAX_STEPS = 512
MAX_TEMPERATURE = 5.0
MAX_REPETITION_PENALTY = 5.0


@dataclass(frozen=True)
class SamplerSettings:
    """How to denoise: step budget (None = automatic), slot scoring, confidence threshold (None = off), block size
    (None = one block), temperature, repetition penalty, samples, seed; `free` ignores the response schema and
    denoises `free_length` free tokens. Out-of-range values raise InvalidInput naming the setting."""

    steps: int | None = None
    strategy: str = "low_confidence"
    threshold: float | None = DEFAULT_THRESHOLD
    block: int | None = None
    temperature: float = 0.0
    repetition_penalty: float = 1.0
    samples: int = 1
    seed: int = 0
    free: bool = False
    free_length: int = 64

    def __post_init__(self) -> None:
        problems = []

        def whole(name: str, value: Any, low: int, high: int, none_ok: bool = False) -> None:
            if value is None and none_ok:
                return
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                empty = " (or empty for automatic)" if none_ok else ""
                problems.append(Problem(name, f"must be a whole number from {low} to {high}{empty}, got {value!r}"))

        def number(name: str, value: Any, low: float, high: float, none_ok: bool = False) -> None:
            if value is None and none_ok:
                return
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                problems.append(Problem(name, f"must be a number from {low:g} to {high:g}, got {value!r}"))

        whole("steps", self.steps, 1, MAX_STEPS, none_ok=True)
        if self.strategy not in STRATEGIES:
            problems.append(Problem("strategy", f"{self.strategy!r} is not a strategy: use {', '.join(STRATEGIES)}"))
        number("threshold", self.threshold, 0.0, 1.0, none_ok=True)
        whole("block", self.block, 1, MAX_CANVAS_TOKENS, none_ok=True)
        number("temperature", self.temperature, 0.0, MAX_TEMPERATURE)
        number("repetition_penalty", self.repetition_penalty, 1.0, MAX_REPETITION_PENALTY)
        whole("samples", self.samples, 1, MAX_SAMPLES)
        whole("seed", self.seed, 0, 2**63 - 1)
        if not isinstance(self.free, bool):
            problems.append(Problem("free", f"must be true or false, got {self.free!r}"))
        whole("free_length", self.free_length, 1, MAX_CANVAS_TOKENS)
        if problems:
            raise InvalidInput(problems)

    @classmethod
    def from_form(cls, steps: Any = None, strategy: Any = "low_confidence", threshold: Any = DEFAULT_THRESHOLD,
                  block: Any = None, temperature: Any = 0.0, repetition_penalty: Any = 1.0, samples: Any = 1,
                  seed: Any = 0, free: Any = False, free_length: Any = 64) -> SamplerSettings:
        """Settings from form widgets: numbers may arrive as floats; 0 or empty steps/block/threshold mean
        automatic / one block / off."""
        return cls(
            steps=_whole_or_none(steps),
            strategy=strategy or "low_confidence",
            threshold=None if threshold in (None, "", 0) else _number(threshold),
            block=_whole_or_none(block),
            temperature=_number(temperature if temperature is not None else 0.0),
            repetition_penalty=_number(repetition_penalty if repetition_penalty is not None else 1.0),
            samples=_whole(samples if samples is not None else 1),
            seed=_whole(seed if seed is not None else 0),
            free=bool(free),
            free_length=_whole(free_length if free_length is not None else 64),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def generate_kwargs(self) -> dict[str, Any]:
        """These settings as `generate_stream` keyword arguments."""
        return asdict(self)


@dataclass
class Simulation:
    """One Run: the request (world version, call, anchors, settings), the canvas, the frames so far and, once
    the denoising is over, the Generation with every sample's response and check report."""

    world_id: int
    world: WorldSpec
    tool: Tool
    call: Call
    anchors: list[Anchor]
    settings: SamplerSettings
    canvas: Canvas
    frames: list[Frame] = field(default_factory=list)
    commits: Commits = field(default_factory=Commits)
    generation: Generation | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. arguments that break the parameter schema

    @property
    def done(self) -> bool:
        return self.generation is not None


def run_simulation(ctx: StudioContext, world_id: int | None, call: Call | dict[str, Any] | str,
                   anchors: Sequence[Anchor | str] = (), settings: SamplerSettings = SamplerSettings(),
                   history: Sequence[Any] = ()) -> Iterator[Simulation]:
    """Denoise the response to `call` in saved world `world_id`, yielding the same Simulation after each step:
    first with no frames (the canvas as laid out), then once per frame, last with `generation` set.

    InvalidInput (before anything is yielded) for an unknown world or tool, a broken call, an anchor naming a
    missing field or holding the wrong type, bad settings, or a canvas longer than the model's context."""
    world = world_spec(ctx.store, world_id)
    the_call = read_call(call)
    tool = tool_of(world, the_call)
    pinned = parse_anchors(anchors)
    backend = ctx.backend()
    if isinstance(backend, ArBaseline):
        raise InvalidInput(f"the studio's world model {backend.name} is autoregressive and cannot denoise: "
                           "start the studio with a masked diffusion model (--model)")
    warnings = argument_problems(tool, the_call)
    simulation = None
    for item in generate_stream(backend, world, the_call, pinned, history, **settings.generate_kwargs()):
        if isinstance(item, Canvas):  # the layout comes first: draw it before the first step
            simulation = Simulation(world_id, world, tool, the_call, pinned, settings, item, warnings=warnings)
        elif isinstance(item, Generation):
            simulation.generation = item
        else:
            simulation.commits.add(len(simulation.frames), item)
            simulation.frames.append(item)
        yield simulation


def run_baseline(ctx: StudioContext, world_id: int | None, call: Call | dict[str, Any] | str,
                 anchors: Sequence[Anchor | str] = (), settings: SamplerSettings = SamplerSettings(),
                 history: Sequence[Any] = ()) -> Generation:
    """The autoregressive baseline's responses to the same request (anchors become steering directives, since
    it cannot see a field before writing it), checked like the MDLM's. InvalidInput when none is configured."""
    world = world_spec(ctx.store, world_id)
    the_call = read_call(call)
    tool_of(world, the_call)
    pinned = parse_anchors(anchors)
    return generate(ctx.ar_baseline(), world, the_call, pinned, history=history, **settings.generate_kwargs())


def save_simulation(ctx: StudioContext, simulation: Simulation | None, sample: int = 0, rollout_id: int | None = None,
                    title: str = "") -> Step:
    """Append one sample of a finished simulation to a rollout (a new one titled `title` when `rollout_id` is
    None) with its provenance (model, sampler settings, seed, anchors), check report and decode trace."""
    if simulation is None or simulation.generation is None:
        raise InvalidInput(Problem("simulation", "nothing to save yet: press Run and let it finish first"))
    generation = simulation.generation
    if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample < len(generation.samples):
        raise InvalidInput(Problem("sample", f"choose a sample from 1 to {len(generation.samples)}"))
    if rollout_id is None:
        rollout_id = create_rollout(ctx.store, simulation.world_id, title or default_title(simulation)).id
    else:
        rollout = get_rollout(ctx.store, rollout_id)
        if rollout.world_id != simulation.world_id:
            raise InvalidInput(Problem("rollout_id", f"rollout {rollout_id} runs in another world version: "
                                                     "save into a rollout of this world, or a new one"))
    chosen = generation.samples[sample]
    sampler = {**simulation.settings.to_json(), "sample_index": sample}
    sampler.pop("seed")
    made_by = MadeBy.by_model(generation.model, sampler, simulation.settings.seed, simulation.anchors)
    return append_step(ctx.store, rollout_id, simulation.call, chosen.response, made_by, chosen.checks,
                       decode_trace(generation, sample))


def decode_trace(generation: Generation, sample: int = 0) -> list[TraceEntry]:
    """`Generation.trace()` as the store's entries: (canvas position, frame, confidence) per committed token."""
    entries = []
    for step in generation.trace(sample):
        for position, confidence in zip(step["positions"], step["confidences"], strict=True):
            entries.append(TraceEntry(position, step["step"], confidence if math.isfinite(confidence) else 0.0))
    return entries


def default_title(simulation: Simulation) -> str:
    """A rollout title saying what was simulated: the tool and the pinned anchors."""
    pins = ", ".join(str(a) for a in simulation.anchors)
    return f"{simulation.call.name}{f' with {pins}' if pins else ''}"[:200]


def read_call(call: Call | dict[str, Any] | str) -> Call:
    """A Call from a Call, a parsed `{"name", "arguments"}` object, or its JSON text."""
    if isinstance(call, Call):
        return call
    if isinstance(call, str):
        call = parse_json_field(call, "call")
    return Call.from_json(call, "call")


def tool_of(world: WorldSpec, call: Call) -> Tool:
    """The tool `call` names; InvalidInput lists the world's tools when there is none."""
    try:
        return world.tool(call.name)
    except KeyError:
        known = ", ".join(t.name for t in world.tools) or "none"
        raise InvalidInput(Problem("call.name", f"no tool {call.name!r} in world {world.name!r}: "
                                                f"choose one of {known}")) from None


def argument_problems(tool: Tool, call: Call) -> list[str]:
    """Where the call's arguments break the tool's parameter schema (`arguments.amount_cents: ...`).

    Not an error: agents do send bad calls, and how the world answers them is worth simulating."""
    try:
        validator = validator_for(tool.parameters)(tool.parameters)
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(map(str, e.absolute_path)))
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot apply was reported when the world was saved
        return []
    return [f"arguments{'.' + format_path(list(e.absolute_path)) if e.absolute_path else ''}: {e.message}"
            for e in errors]


_WORLDS: weakref.WeakKeyDictionary[Store, dict[int, WorldSpec]] = weakref.WeakKeyDictionary()
_WORLDS_LOCK = threading.Lock()


def world_spec(store: Store, world_id: Any) -> WorldSpec:
    """The saved world version `world_id`, parsed once per store (versions never change)."""
    if world_id in (None, ""):
        raise InvalidInput(Problem("world", "choose a world first (save one in the World tab if the list is empty)"))
    if isinstance(world_id, bool) or not isinstance(world_id, (int, float, str)) or not str(world_id).isdigit():
        raise InvalidInput(Problem("world", f"{world_id!r} is not a world id"))
    world_id = int(world_id)
    with _WORLDS_LOCK:
        cached = _WORLDS.setdefault(store, {}).get(world_id)
    if cached is not None:
        return cached
    world = get_world(store, world_id).spec()
    with _WORLDS_LOCK:
        _WORLDS[store][world_id] = world
    return world


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _whole_or_none(value: Any) -> Any:
    value = _whole(value)
    return None if value in (None, "", 0) else value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value

