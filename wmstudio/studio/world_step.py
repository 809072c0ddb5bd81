"""One world-model step asked for from outside the studio: a trainer's call in, the checked response out.

`read_step_request` turns a parsed JSON body into typed objects (a world given whole or by saved name, history,
call, anchors, sampler settings, and a `state` that replaces the world's initial state), naming every bad field and
holding what the request brings to the request limits (studio/request_budget.py); `world_step` runs it on any
backend, so the HTTP server, the OpenEnv environment and tests share one path. Its answer records the grounding
and where each part of the world came from."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.problems import InvalidInput, Problem, join_key
from wmstudio.store import Store
from wmstudio.store.worlds import latest_world
from wmstudio.studio.request_budget import limit_history, limit_state, limit_world_data
from wmstudio.studio.request_world import request_world
from wmstudio.studio.simulation import tool_of, world_spec
from wmstudio.world.episode.state import episode_state
from wmstudio.world.history import HistoryStep, parse_history
from wmstudio.world.prompt.sections import StatedEnvironment
from wmstudio.world.spec import Call, WorldSpec, parse_world
from wmstudio.world.steering.anchors import Anchor, read_anchors

STEP_FIELDS = ("world", "state", "history", "call", "anchors", "sampler", "repair")
MAX_ID = 2**63 - 1  # SQLite's largest integer: a larger id names no saved world
MIN_TEMPERATURE = 1e-6  # a temperature above 0 and below this samples greedily anyway; a subnormal one overflows
MISSING = {"world": "missing: give a world object or the name of a world saved in the studio",
           "call": 'missing: give the tool call {"name": TOOL, "arguments": {...}}'}


@dataclass
class StepRequest:
    """A world step, parsed: the world (the request's state in it), the earlier steps, the call, the pinned
    anchors, the sampler, and where each part of the world came from."""

    world: WorldSpec
    call: Call
    history: list[HistoryStep] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    settings: SamplerSettings = SamplerSettings()
    sources: dict[str, Any] = field(default_factory=dict)


def read_step_request(body: Any, store: Store | None) -> StepRequest:
    """A StepRequest from `{"world", "state", "history", "call", "anchors", "sampler", "repair"}`; InvalidInput
    names each bad field (`call.name`, `sampler.temperature`, `anchors.status`) with its fix."""
    if not isinstance(body, dict):
        raise InvalidInput(Problem("", 'the body must be a JSON object {"world": ..., "call": {...}}'))
    problems = [Problem(join_key("", name), f"unknown field: use {', '.join(STEP_FIELDS)}") for name in body
                if name not in STEP_FIELDS]
    parsed: dict[str, Any] = {}
    readers = {"world": lambda raw: resolve_world(raw, store), "call": Call.from_json, "history": parse_history,
               "anchors": read_anchors, "settings": lambda _: read_sampler(body.get("sampler"), body.get("repair"))}
    for name, read in readers.items():
        if name in ("world", "call") and name not in body:
            problems.append(Problem(name, MISSING[name]))
            continue
        try:
            parsed[name] = read(body.get(name))
        except InvalidInput as err:
            problems.extend(err.problems)
    for name, limit in (("state", limit_state), ("history", limit_history)):
        try:
            limit(body.get(name) if name == "state" else parsed.get(name, []), name)
        except InvalidInput as err:
            problems.extend(err.problems)
    if "world" in parsed and "call" in parsed:
        try:
            tool_of(parsed["world"], parsed["call"])
        except InvalidInput as err:
            problems.extend(err.problems)
    if problems:
        raise InvalidInput(problems)
    stated = StatedEnvironment(state=body["state"]) if body.get("state") is not None else None
    made = request_world(parsed["world"], stated, parsed["call"], parsed["history"])
    return StepRequest(made.world, parsed["call"], made.history, parsed["anchors"], parsed["settings"], made.sources)


def resolve_world(raw: Any, store: Store | None) -> WorldSpec:
    """A world given whole (a world object) or by the name (or numeric id) of a world saved in the studio."""
    if isinstance(raw, dict):
        limit_world_data(raw)
        try:
            return parse_world(raw)
        except InvalidInput as err:  # a field the world object holds is named as one key, whatever its text
            raise InvalidInput([Problem(join_key("world", p.path) if p.path in raw else
                                        f"world.{p.path}" if p.path else "world", p.message)
                                for p in err.problems]) from None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
        raise InvalidInput(Problem("world", "must be a world object or the name of a saved world"))
    if store is None:
        raise InvalidInput(Problem("world", "this server has no saved worlds: send the world object itself"))
    if isinstance(raw, int) or raw.isascii() and raw.isdigit():
        number = int(raw) if isinstance(raw, int) or len(raw) <= 19 else MAX_ID + 1
        try:
            if not 1 <= number <= MAX_ID:
                raise InvalidInput("out of range")
            return world_spec(store, number)
        except InvalidInput:
            shown = str(raw) if len(str(raw)) <= 24 else f"{str(raw)[:20]}..."
            raise InvalidInput(Problem("world", f"no saved world version with id {shown}")) from None
    saved = latest_world(store, raw)
    if saved is None:
        raise InvalidInput(Problem("world", f"no saved world named {raw!r}: save it in the studio or send it whole"))
    return world_spec(store, saved.id)  # parsed once per version


def read_sampler(raw: Any, repair: Any = None) -> SamplerSettings:
    """SamplerSettings from a JSON object of settings (the names `wmstudio simulate` takes) and the repair switch."""
    raw = {} if raw is None else raw
    repair = False if repair is None else repair
    if not isinstance(raw, dict):
        raise InvalidInput(Problem("sampler", "must be an object of sampler settings, e.g. {\"temperature\": 0.7}"))
    known = {f.name for f in fields(SamplerSettings)} - {"repair"}
    problems = [Problem(join_key("sampler", name), f"not a sampler setting: use {', '.join(sorted(known))}")
                for name in raw if name not in known]
    if not isinstance(repair, bool):
        problems.append(Problem("repair", f"must be true or false, got {repair!r}"))
    temperature = raw.get("temperature")
    if isinstance(temperature, float) and 0 < temperature < MIN_TEMPERATURE:  # 1e-310 overflows the sampler
        problems.append(Problem("sampler.temperature", f"must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, got "
                                                       f"{temperature!r}"))
    if problems:
        raise InvalidInput(problems)
    try:
        return SamplerSettings(**raw, repair=repair)
    except InvalidInput as err:
        raise InvalidInput([Problem(f"sampler.{p.path}" if p.path else "sampler", p.message)
                            for p in err.problems]) from None


def world_step(backend: Backend | ArBaseline, request: StepRequest) -> dict[str, Any]:
    """Generate and check the response to one call: `{"response", "checks", "timing_ms", "model", "grounding",
    "sources", "state_after", "state_change"}` (the state once this answer took effect, and what it changed) (and every sample's response and checks under `samples` when more than one was asked for)."""
    try:
        generation = generate(backend, request.world, request.call, request.anchors, request.history,
                              request.settings)
    except InvalidInput as err:  # the canvas names an anchor as "anchor PATH": the request's field is anchors.PATH
        raise InvalidInput([_request_field(p, request) for p in err.problems]) from None
    first = generation.samples[0]
    result: dict[str, Any] = {"response": first.response, "checks": first.checks.to_json(),
                              "timing_ms": round(generation.elapsed_ms, 1), "model": generation.model,
                              "grounding": request.settings.grounding, "sources": request.sources}
    tracked = episode_state(request.world, [*request.history, HistoryStep(request.call, first.response)])
    result["state_after"] = tracked.state  # the episode's state once this answer took effect
    result["state_change"] = [change.to_json() for change in tracked.steps[-1]]
    if generation.prompt_cut:
        result["prompt_cut"] = list(generation.prompt_cut)
    if len(generation.samples) > 1:
        result["samples"] = [{"response": s.response, "checks": s.checks.to_json()} for s in generation.samples]
    return result


def _request_field(problem: Problem, request: StepRequest) -> Problem:
    """A generation problem under the request's field: `anchor PATH` is anchors.PATH; a canvas too long for the
    model is the anchors' doing when some are pinned (the longest named), else the world's response schema's."""
    if problem.path.startswith("anchor "):
        return Problem(join_key("anchors", problem.path.removeprefix("anchor ").split("=")[0]), problem.message)
    if problem.path or "canvas" not in problem.message:
        return problem
    if request.anchors:
        longest = max(request.anchors, key=lambda a: len(str(a.value)))
        return Problem(join_key("anchors", longest.path), f"{problem.message}; the pinned anchors take part of it: "
                                                          "shorten them")
    return Problem("world", problem.message)
