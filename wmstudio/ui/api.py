"""The studio's named API for scripts (`gradio_client`): a few endpoints with named, typed parameters that answer
JSON, beside the tabs' own events, which `view_api` does not list.

    worlds -> tools -> simulate -> save_step -> next_to_rate / rate, and start_run / run_status for training.

Every answer is one JSON text (`json.loads(client.predict(..., api_name="/simulate"))`): gradio_client takes any
object holding a text `path` in an answer (a call's, a directory listing's) for a file and tries to download it.
The endpoints are plain functions over the StudioContext (`*_json` below, which tests and other callers use as
they are); `build_api` wires them with `gr.api`. Bad input raises a gr.Error naming the field and the fix."""

from __future__ import annotations

import inspect
import json
import threading
import uuid
from collections import OrderedDict
from functools import wraps
from typing import Any, Callable

import gradio as gr
from gradio.context import Context

from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import setting_specs
from wmstudio.studio.annotation import annotator_progress, get_annotator, next_to_annotate, save_rating
from wmstudio.studio.context import StudioContext
from wmstudio.studio.memory import release_memory
from wmstudio.studio.runs import get_run, run_metrics
from wmstudio.studio.simulation import Simulation, run_simulation, save_simulation, world_spec
from wmstudio.studio.worlds import get_world, list_worlds
from wmstudio.ui.forms import parse_json_field
from wmstudio.ui.identity import request_username, resolve_identity
from wmstudio.ui.train_tab import start_run
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import read_anchors

API_NAMES = ("worlds", "tools", "simulate", "save_step", "next_to_rate", "rate", "start_run", "run_status")
KEPT_SIMULATIONS = 32  # finished simulations a later save_step may name, newest kept (each holds its frames)


# --- the endpoints as plain functions -------------------------------------------------------------------------


def worlds_json(ctx: StudioContext) -> list[dict[str, Any]]:
    """Every saved world's newest version: id, name, version, description and tool names."""
    return [{"id": w.latest.id, "name": w.name, "version": w.latest.version, "versions": w.versions,
             "description": w.latest.spec().description, "tools": [t.name for t in w.latest.spec().tools]}
            for w in list_worlds(ctx.store)]


def world_id_of(ctx: StudioContext, world: Any) -> int:
    """A world version id from a name (its newest version) or an id; InvalidInput naming the worlds there are."""
    text = str(world if world is not None else "").strip()
    if text.isdigit():
        return get_world(ctx.store, int(text)).id
    summaries = list_worlds(ctx.store)
    found = next((w.latest.id for w in summaries if w.name == text), None)
    if found is None:
        known = ", ".join(w.name for w in summaries) or "none saved yet"
        raise InvalidInput(Problem("world", f"no world {text!r}: give a world's name ({known}) or a version id"))
    return found


def tools_json(ctx: StudioContext, world: Any) -> list[dict[str, Any]]:
    """The tools of a world (name or version id), each with its description, parameter and response schemas."""
    spec = world_spec(ctx.store, world_id_of(ctx, world))
    return [{"name": t.name, "description": t.description, "parameters": t.parameters, "response": t.response}
            for t in spec.tools]


def simulation_json(simulation: Simulation, token: str) -> dict[str, Any]:
    """A finished simulation as JSON: the first sample's response (the tool's text, JSON when `json_valid`) and
    check report, every sample, the settings and grounding it ran with, and the token `save_step` takes."""
    generation = simulation.generation
    answer = {key: value for key, value in generation.to_json().items() if key not in ("samples", "anchors")}
    first = generation.samples[0]
    return {"simulation": token, "world": {"id": simulation.world_id, "name": simulation.world.name},
            "call": simulation.call.to_json(), "anchors": [a.to_json() for a in simulation.anchors],
            "grounding": simulation.settings.grounding, "response": first.response,
            "checks": first.checks.to_json(), "warnings": list(simulation.warnings), "steps": len(simulation.frames),
            **answer, "samples": [sample.to_json() for sample in generation.samples]}


def read_call(tool: Any, arguments: Any) -> Call:
    """The call from the endpoint's `tool` and `arguments` (an object, or its JSON text)."""
    if isinstance(arguments, str):
        arguments = parse_json_field(arguments, "arguments") if arguments.strip() else {}
    return Call.from_json({"name": tool, "arguments": {} if arguments is None else arguments}, "call")


def next_item_json(ctx: StudioContext, annotator: str, username: str | None = None) -> dict[str, Any]:
    """The next step this annotator should rate, blind (world, history, call, response; no model), or
    `{"step_id": null}` when none is left."""
    identity = resolve_identity(annotator, username, None, ctx.users)
    item = next_to_annotate(ctx.store, get_annotator(ctx.store, identity.name, identity.source).id, ctx.overlap)
    if item is None:
        return {"step_id": None, "message": "nothing left to rate"}
    world = get_world(ctx.store, item.world_id).spec()
    return {"step_id": item.step_id, "world": world.name, "task": world.task, "rules": [r.text for r in world.rules],
            "history": [{"call": s.call.to_json(), "response": s.response} for s in item.history],
            "call": item.call.to_json(), "response": item.response}


def rate_json(ctx: StudioContext, annotator: str, step_id: int, realism: int, outcome_correctness: int,
              training_utility: int, failure_tags: list[str] | None = None, note: str = "",
              username: str | None = None) -> dict[str, Any]:
    """Save (or replace) one annotator's rating of a step; the rating and their progress as JSON."""
    identity = resolve_identity(annotator, username, None, ctx.users)
    who = get_annotator(ctx.store, identity.name, identity.source)
    rating = save_rating(ctx.store, who.id, step_id, realism, outcome_correctness, training_utility,
                         failure_tags or [], note or "")
    progress = annotator_progress(ctx.store, who.id)
    return {"step_id": rating.step_id, "annotator": identity.name, "realism": rating.realism,
            "outcome_correctness": rating.outcome_correctness, "training_utility": rating.training_utility,
            "failure_tags": list(rating.failure_tags), "note": rating.note,
            "progress": {"rated": progress.rated, "skipped": progress.skipped, "total": progress.total,
                         "remaining": progress.remaining}}


def run_json(ctx: StudioContext, run_id: int) -> dict[str, Any]:
    """A training run's status, settings and logged metrics (name -> [[step, value], ...])."""
    run = get_run(ctx.store, run_id)
    metrics: dict[str, list[list[float]]] = {}
    for row in run_metrics(ctx.store, run_id):
        metrics.setdefault(row.name, []).append([row.step, row.value])
    return {"run_id": run.id, "status": run.status, "config": run.config, "pid": run.pid, "error": run.error,
            "started_at": _when(run.started_at), "finished_at": _when(run.finished_at), "metrics": metrics}


def _when(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


# --- wiring ---------------------------------------------------------------------------------------------------


def _endpoint(action, name: str) -> None:
    """Add `action` as API endpoint `name`: parameters named and typed as its signature says (its `__signature__`
    when it builds one from a settings dataclass), its answer as JSON text, bad input raised as a gr.Error (the
    client's AppError) holding our message, never a traceback."""
    signature = inspect.signature(action, eval_str=True)  # types, not the strings of `from __future__ annotations`

    @wraps(action)
    def endpoint(*args, **kwargs) -> str:
        try:
            return json.dumps(action(**signature.bind(*args, **kwargs).arguments), ensure_ascii=False)
        except InvalidInput as err:
            raise gr.Error(str(err), print_exception=False) from None

    endpoint.__signature__ = signature.replace(return_annotation=str)
    endpoint.__annotations__ = {**{name: p.annotation for name, p in signature.parameters.items()}, "return": str}
    dependency = gr.api(endpoint, api_name=name)
    blocks = Context.root_block.blocks
    names = [p for p, hint in signature.parameters.items() if hint.annotation is not gr.Request]
    for block_id, label in zip(dependency["inputs"], names, strict=True):
        blocks[block_id].label = label
    for block_id in dependency["outputs"]:
        blocks[block_id].label = name


def settings_signature(action: Callable[..., Any], config_type: type) -> inspect.Signature:
    """`action`'s own parameters, then one keyword per field of the settings dataclass `config_type`, typed and
    defaulted as the field declares (so the API lists each setting as the Simulate form and the CLI do)."""
    own = [p for p in inspect.signature(action, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
    types = {"whole": int, "number": float, "flag": bool, "choice": str}
    added = [inspect.Parameter(spec.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=spec.form_default if
                               spec.kind != "choice" else str(spec.default), annotation=types[spec.kind])
             for spec in setting_specs(config_type)]
    return inspect.Signature([*own, *added], return_annotation=dict[str, Any])


def build_api(ctx: StudioContext) -> None:
    """Add the named endpoints (API_NAMES) to the Blocks being built."""
    kept: OrderedDict[str, Simulation] = OrderedDict()
    lock = threading.Lock()

    def worlds() -> list[dict[str, Any]]:
        """Every saved world (its newest version): id, name, version, description and tool names."""
        return worlds_json(ctx)

    def tools(world: str) -> list[dict[str, Any]]:
        """The tools of a world (its name, or a version id from `worlds`) with their parameter and response
        schemas."""
        return tools_json(ctx, world)

    def simulate(world: str, tool: str, arguments: dict[str, Any] | None = None,
                 anchors: dict[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
        """Run the world model on one call: `arguments` and `anchors` (pinned fields, path -> JSON value) are
        objects; then the sampler's settings, as SamplerSettings declares them (0 = automatic or off where it
        says so). Returns the response, its check report, every sample, the settings and grounding used, and a
        `simulation` token for save_step."""
        sampler = SamplerSettings.from_form(**settings)
        world_id = world_id_of(ctx, world)
        simulation = None
        try:
            for simulation in run_simulation(ctx, world_id, read_call(tool, arguments), read_anchors(anchors),
                                             sampler):
                pass
        finally:
            release_memory()
        token = uuid.uuid4().hex
        with lock:
            kept[token] = simulation
            while len(kept) > KEPT_SIMULATIONS:
                kept.popitem(last=False)
        return simulation_json(simulation, token)

    simulate.__signature__ = settings_signature(simulate, SamplerSettings)

    def save_step(simulation: str, sample: int = 1, rollout: int = 0, title: str = "") -> dict[str, Any]:
        """Save sample `sample` (1 = the first) of a `simulate` answer into rollout `rollout` (0: a new one titled
        `title`); the saved step as JSON."""
        with lock:
            found = kept.get(simulation)
        if found is None:
            raise InvalidInput(Problem("simulation", f"no simulation {simulation!r} here: give the `simulation` "
                                                     f"token a simulate answer holds (the newest {KEPT_SIMULATIONS} "
                                                     "are kept)"))
        step = save_simulation(ctx, found, sample - 1, rollout or None, title.strip())
        return {"step_id": step.id, "rollout_id": step.rollout_id, "step": step.index + 1, "check_ok": step.check_ok,
                "response": step.response}

    def next_to_rate(annotator: str = "", request: gr.Request = None) -> dict[str, Any]:
        """The next step `annotator` should rate, shown blind; step_id null when none is left (a signed-in
        user rates under their own name)."""
        return next_item_json(ctx, annotator, request_username(request))

    def rate(step_id: int, realism: int, outcome_correctness: int, training_utility: int, annotator: str = "",
             failure_tags: list[str] | None = None, note: str = "", request: gr.Request = None) -> dict[str, Any]:
        """Rate a step 1-5 for realism, outcome correctness and training utility, with optional failure tags and
        a note; the saved rating and the annotator's progress."""
        return rate_json(ctx, annotator, step_id, realism, outcome_correctness, training_utility, failure_tags,
                         note, request_username(request))

    def start_run_endpoint(curriculum: str = "demo", env: str = "simulator", max_steps: int = 20,
                           policy: str = "") -> dict[str, Any]:
        """Start a GRPO training run of the agent in the background (env: world-model, simulator or hybrid;
        policy: empty for the shipped one, a folder, or a hub id); its id and status."""
        run_id, message = start_run(ctx.store, curriculum, env, max_steps, policy)
        return {**run_json(ctx, run_id), "message": message}

    def run_status(run_id: int) -> dict[str, Any]:
        """A training run's status, settings and logged metrics (name -> [[step, value], ...])."""
        return run_json(ctx, run_id)

    for name, action in zip(API_NAMES, (worlds, tools, simulate, save_step, next_to_rate, rate, start_run_endpoint,
                                        run_status), strict=True):
        _endpoint(action, name)


def hide_tab_events(studio: gr.Blocks) -> None:
    """List only API_NAMES in `view_api`: the tabs' own events (positional, HTML answers, made for the page) stay
    callable by their names, undocumented, for the page's tests and older scripts."""
    for fn in studio.fns.values():
        if fn.api_visibility == "public" and fn.api_name not in API_NAMES:
            fn.api_visibility = "undocumented"
