"""One simulated tool call as the studio runs it: validate the request, stream the denoising, save the step.

Plain functions over a StudioContext (`run_simulation`, `run_baseline`, `save_simulation`), so the Simulate
tab, the Rollouts tab and tests share them; every bad input is an InvalidInput naming the field."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wmstudio.model.canvas.canvas import Canvas
from wmstudio.model.denoising.sampler import Frame, SamplerSettings
from wmstudio.model.denoising.trace import DecodeTrace
from wmstudio.model.generation.generation import Generation, generate, generate_stream
from wmstudio.model.serving.backends import ArBaseline
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.store import MadeBy, Step, Store, append_step, create_rollout, get_rollout, get_world
from wmstudio.studio.context import StudioContext
from wmstudio.world.checks.report import argument_problems
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.directives import parse_directives
from wmstudio.world.tools import Tool


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
    traces: list[DecodeTrace] = field(default_factory=list)  # one per sample, grown frame by frame
    generation: Generation | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. arguments that break the parameter schema

    @property
    def done(self) -> bool:
        return self.generation is not None


def run_simulation(ctx: StudioContext, world_id: int | None, call: Call, anchors: Sequence[Anchor] = (),
                   settings: SamplerSettings = SamplerSettings(),
                   history: Sequence[HistoryStep] = (), directives: Sequence[str] = ()) -> Iterator[Simulation]:
    """Denoise the response to `call` in saved world `world_id`, yielding the same Simulation after each step:
    first with no frames (the canvas as laid out), then once per frame, last with `generation` set. `directives`
    steer this run only (after the world's own: a stress preset's, say).

    InvalidInput (before anything is yielded) for an unknown world or tool, a broken call, an anchor naming a
    missing field or holding the wrong type, bad settings, or a canvas longer than the model's context."""
    world = with_directives(world_spec(ctx.store, world_id), directives)
    the_call, pinned = call, list(anchors)
    tool = tool_of(world, the_call)
    backend = ctx.backend()
    if isinstance(backend, ArBaseline):
        raise InvalidInput(f"the studio's world model {backend.name} is autoregressive and cannot denoise: "
                           "start the studio with a masked diffusion model (--model)")
    warnings = argument_problems(tool, the_call)
    simulation = None
    stream = ctx.generation_stream or generate_stream
    for item in stream(backend, world, the_call, pinned, history, settings):
        if isinstance(item, Canvas):  # the layout comes first: draw it before the first step
            simulation = Simulation(world_id, world, tool, the_call, pinned, settings, item, warnings=warnings,
                                    traces=[DecodeTrace() for _ in range(settings.samples)])
        elif isinstance(item, Generation):
            simulation.generation = item
        else:
            for trace, positions, confidences in zip(simulation.traces, item.unmasked, item.confidences):
                trace.add(len(simulation.frames), positions, confidences)
            simulation.frames.append(item)
        yield simulation


def run_baseline(ctx: StudioContext, world_id: int | None, call: Call, anchors: Sequence[Anchor] = (),
                 settings: SamplerSettings = SamplerSettings(), history: Sequence[HistoryStep] = (),
                 directives: Sequence[str] = ()) -> Generation:
    """The autoregressive baseline's responses to the same request (anchors become steering directives, since
    it cannot see a field before writing it), checked like the MDLM's. InvalidInput when none is configured."""
    world = with_directives(world_spec(ctx.store, world_id), directives)
    tool_of(world, call)
    return generate(ctx.ar_baseline(), world, call, anchors, history, settings)


def save_simulation(ctx: StudioContext, simulation: Simulation | None, sample: int = 0, rollout_id: int | None = None,
                    title: str = "") -> Step:
    """Append one sample of a finished simulation to a rollout (a new one titled `title` when `rollout_id` is
    None) with its provenance (model, sampler settings, seed, anchors), check report and decode trace."""
    if simulation is None or simulation.generation is None:
        raise InvalidInput(Problem("simulation", "nothing to save yet: press Run and let it finish first"))
    generation = simulation.generation
    if not whole_in(sample, 0, len(generation.samples) - 1):
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
    outcome = chosen.outcome.to_json() if chosen.outcome is not None else None
    made_by = MadeBy.by_model(generation.model, sampler, simulation.settings.seed, simulation.anchors, outcome)
    return append_step(ctx.store, rollout_id, simulation.call, chosen.response, made_by, chosen.checks,
                       generation.trace(sample))


def with_directives(world: WorldSpec, directives: Sequence[str]) -> WorldSpec:
    """`world` with a run's own directives after its own (each once); InvalidInput names a vocabulary directive with
    a bad value (`page_size: lots`)."""
    extra = [d.strip() for d in directives if d.strip() and d.strip() not in world.directives]
    parse_directives(extra)
    return replace(world, directives=[*world.directives, *dict.fromkeys(extra)]) if extra else world


def default_title(simulation: Simulation) -> str:
    """A rollout title saying what was simulated: the tool and the pinned anchors."""
    pins = ", ".join(str(a) for a in simulation.anchors)
    return f"{simulation.call.name}{f' with {pins}' if pins else ''}"[:200]


def tool_of(world: WorldSpec, call: Call) -> Tool:
    """The tool `call` names; InvalidInput lists the world's tools when there is none."""
    try:
        return world.tool(call.name)
    except KeyError:
        known = ", ".join(t.name for t in world.tools) or "none"
        raise InvalidInput(Problem("call.name", f"no tool {call.name!r} in world {world.name!r}: "
                                                f"choose one of {known}")) from None


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
