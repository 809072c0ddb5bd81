"""Multi-step rollouts: generate the next step with the earlier steps as history, branch, hand-edit, review.

Plain functions over the store (and the loaded model for generation) with typed inputs; the Rollouts tab and the
`wmstudio rollouts` commands parse what the user typed and call these."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import (  # noqa: F401 - re-exported: the Rollouts tab's and `wmstudio rollouts`' door
    ROLLOUT_STATUSES,
    MadeBy,
    Rollout,
    Step,
    Store,
    branch_rollout,
    create_rollout,
    edit_step_response,
    filter_rollouts,
    get_rollout,
    get_world,
    rollout_steps,
    rollout_tags,
    set_status,
    set_tags,
)
from wmstudio.studio.datasets import ExportRollout, ExportStep
from wmstudio.world.checks.report import CheckReport, check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

if TYPE_CHECKING:  # the models load torch: only a command that generates needs them
    from wmstudio.studio.context import StudioContext
    from wmstudio.studio.simulation import Simulation


def history_of(steps: Sequence[Step]) -> list[HistoryStep]:
    """Saved steps as the history a world model and the checks read."""
    return [HistoryStep(call=step.tool_call(), response=step.response) for step in steps]


def step_at(store: Store, rollout_id: int, index: int) -> Step:
    """Step `index` (from 0) of a rollout; InvalidInput says which steps there are."""
    steps = rollout_steps(store, rollout_id)
    if not 0 <= index < len(steps):
        have = f"steps 0..{len(steps) - 1}" if steps else "no steps yet"
        raise InvalidInput(Problem("step", f"rollout {rollout_id} has {have}; step {index} does not exist"))
    return steps[index]


def generate_next_step(ctx: StudioContext, rollout_id: int, call: Call, anchors: Sequence[Anchor] = (),
                       settings: SamplerSettings = SamplerSettings()) -> tuple[Step, Simulation]:
    """Generate the response to `call` with the world model (history = the rollout's steps) and append it.

    Runs and saves exactly as the Simulate tab does, so a step carries the same provenance whichever tab made it."""
    from wmstudio.studio.simulation import run_simulation, save_simulation

    rollout = get_rollout(ctx.store, rollout_id)
    history = history_of(rollout_steps(ctx.store, rollout_id))
    simulation = None
    for simulation in run_simulation(ctx, rollout.world_id, call, anchors, settings, history):
        pass
    return save_simulation(ctx, simulation, 0, rollout_id), simulation


def edit_response(store: Store, rollout_id: int, index: int, response_text: str,
                  editor: str | None = None) -> tuple[Step, CheckReport]:
    """Replace a step's response by hand (recorded as a human edit, the original kept) and check it again."""
    step = step_at(store, rollout_id, index)
    if not isinstance(response_text, str) or not response_text.strip():
        raise InvalidInput(Problem("response", "the edited response is empty: write the response text"))
    world = get_world(store, get_rollout(store, rollout_id).world_id).spec()
    earlier = [s for s in rollout_steps(store, rollout_id) if s.index < step.index]
    report = check_step(world, step.tool_call(), response_text, history=history_of(earlier))
    if not report.json_valid or report.schema_errors:
        why = ["it is not JSON"] if not report.json_valid else report.schema_errors[:5]
        raise InvalidInput([Problem("response", f"not saved: {reason}") for reason in why]
                           + [Problem("response", "fix it to fit the tool's response schema, then save again")])
    return edit_step_response(store, step.id, response_text, editor=editor, check_report=report), report


def exported_rollout(store: Store, rollout_id: int) -> ExportRollout:
    """A saved rollout in the dataset export shape: its world version, steps, title, status and tags."""
    rollout = get_rollout(store, rollout_id)
    steps = [ExportStep(call=s.tool_call(), response=s.response, check_report=s.check_report, made_by=s.made_by)
             for s in rollout_steps(store, rollout_id)]
    return ExportRollout(id=str(rollout.id), world=get_world(store, rollout.world_id).spec(), steps=steps,
                         title=rollout.title, status=rollout.status, tags=rollout_tags(store, rollout_id))


def branch_at(store: Store, rollout_id: int, index: int) -> Rollout:
    """A new rollout with copies of steps 0..index of `rollout_id`."""
    return branch_rollout(store, rollout_id, index)


def saved_responses(store: Store, world_name: str, tool_name: str, limit: int = 100) -> list:
    """The JSON responses saved for calls to `tool_name` in any version of world `world_name`, newest rollouts
    first (what a response schema can be inferred from); text that is not JSON is left out."""
    found: list = []
    page = filter_rollouts(store, world=world_name, page_size=100)
    for rollout in page.items:
        for step in rollout_steps(store, rollout.id):
            if step.tool_call().name == tool_name:
                try:
                    found.append(json.loads(step.response))
                except json.JSONDecodeError:
                    continue
                if len(found) >= limit:
                    return found
    return found
