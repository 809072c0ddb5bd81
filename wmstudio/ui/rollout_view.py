"""One rollout as the Rollouts tab shows it: a header (world, status, tags, where it branched from) and each step's
call, response, check verdict, how the response was made and what it changed in the episode's state."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from wmstudio.studio.rollouts import MadeBy, Step, Store, get_rollout, rollout_steps, rollout_tags
from wmstudio.studio.worlds import get_world
from wmstudio.ui.check_view import pretty_response
from wmstudio.ui.state_view import state_change_markdown
from wmstudio.world.episode.state import episode_state
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.occurrence import SteeringKey, occurrence_of

MAX_STEPS_SHOWN = 50
MAX_RESPONSE_SHOWN = 4000


@dataclass
class RolloutView:
    """What the page shows of one rollout: its id, a header (world, status, tags, origin) and its steps."""

    rollout_id: int | None
    header: str
    steps: str
    tags: str


def render_rollout(store: Store, rollout_id: int) -> RolloutView:
    """The rollout with its steps: call, response, checks and how each response was made."""
    rollout = get_rollout(store, rollout_id)
    world = get_world(store, rollout.world_id)
    tags = rollout_tags(store, rollout_id)
    steps = rollout_steps(store, rollout_id)
    origin = (f" · branched from rollout {rollout.parent_rollout_id} at step {rollout.parent_step_index + 1}"
              if rollout.parent_rollout_id is not None else "")
    header = (f"### Rollout {rollout.id}: {rollout.title or '(untitled)'}\n"
              f"World **{world.name}** v{world.version} · {rollout.status} · "
              f"{len(steps)} step(s) · tags: {', '.join(tags) or '—'}{origin}\n\n"
              f"Tools: {', '.join(f'`{tool.name}`' for tool in world.spec().tools) or 'none'}")
    names = [Call.from_json(step.call).name for step in steps]
    occurrences = [occurrence_of(name, names[:index]) for index, name in enumerate(names)]  # how steering names it
    shown = steps[-MAX_STEPS_SHOWN:]
    changes = episode_state(world.spec(), [HistoryStep(Call.from_json(step.call), step.response)
                                           for step in steps]).steps
    parts = [f"_{len(steps) - len(shown)} earlier steps not shown._"] if len(shown) < len(steps) else []
    parts += [_step_markdown(step, n) + "\n\n" + state_change_markdown(changed)
              for step, n, changed in zip(shown, occurrences[-len(shown):], changes[-len(shown):])]
    body = "\n\n---\n\n".join(parts) or "_No steps yet: type the first call below and press **Generate**._"
    return RolloutView(rollout.id, header, body, ", ".join(tags))


def _step_markdown(step: Step, occurrence: int = 1) -> str:
    report = step.check_report
    if step.check_ok is None:
        verdict = "not checked"
    elif step.check_ok:
        verdict = "✓ checks pass"
    else:
        problems = (report.get("schema_errors", []) + [f"rule: {v['rule']} — {v['message']}"
                                                       for v in report.get("rule_violations", [])]
                    + report.get("anchor_violations", []) + report.get("message_strays", [])
                    + report.get("invented", []))
        if not report.get("json_valid", True):
            problems.insert(0, "the response is not JSON")
        verdict = "✗ checks fail" + "".join(f"\n  - {p}" for p in problems[:8])
    call = Call.from_json(step.call)
    response, _ = pretty_response(step.response)
    if len(response) > MAX_RESPONSE_SHOWN:
        response = response[:MAX_RESPONSE_SHOWN] + f"… ({len(response) - MAX_RESPONSE_SHOWN:,} more characters)"
    fence = "```"
    while fence in response:
        fence += "`"
    made_by = step.provenance()
    pinned = [str(Anchor(anchor.get("path"), anchor.get("value"))) for anchor in made_by.anchors
              if isinstance(anchor, dict)]
    key = SteeringKey(call.name, occurrence)  # as the Train tab writes it: this call's occurrence of its tool
    steering = "steering: " + " · ".join(f"`{key}: {text}`" for text in pinned) + "\n\n" if pinned else ""
    return (f"**Step {step.index + 1}** · `{call.name}` · {_made_by_text(made_by)}\n\n"
            f"call: `{_compact(call.arguments)}`\n\n{steering}{fence}json\n{response}\n{fence}\n\n- {verdict}")


def _made_by_text(made_by: MadeBy) -> str:
    if made_by.kind == "human edit":
        original = _made_by_text(made_by.original) if made_by.original else "unknown"
        return f"edited by {made_by.editor or 'someone'} (original by {original} kept)"
    if made_by.kind == "human":
        return f"written by {made_by.editor or 'someone'}"
    if made_by.kind == "imported":
        return f"imported from {made_by.source or 'a file'}"
    seed = f", seed {made_by.seed}" if made_by.seed is not None else ""
    return f"model {made_by.model}{seed}"


def _compact(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
