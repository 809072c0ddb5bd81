"""Stress presets, the paper's set: each a set of steering directives and anchors a user sees and edits, for any
world (demo, synthetic or imported).

`preset_request(name, tool)` gives the directives and the anchors that fit the called tool's response schema (a
tool without a `status` field gets no status anchor); the studio's Simulate tab fills its fields from it in one
click, `wmstudio generate --preset` adds them to a call, and `wmstudio corpus --preset` draws every row as the
episode the preset describes (stress.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.tools import Tool

CASCADE_ERROR = "SERVICE_UNAVAILABLE"


@dataclass(frozen=True)
class StressPreset:
    """One stress preset: its `name` (what a flag takes), a `title` and `summary` for people, the `directives` it
    adds and the anchors it pins: `status` and `error` (None: not pinned)."""

    name: str
    title: str
    summary: str
    directives: tuple[str, ...]
    status: str | None = None
    error: str | None = None


PRESETS: dict[str, StressPreset] = {p.name: p for p in (
    StressPreset(
        "adjacent-info", "Adjacent-information inference",
        "No field answers the call directly; a neighbouring record the state shows (its owner, parent or sibling) "
        "holds it.",
        ("The record the call names does not hold the answer itself: read it from the neighbouring record it "
         "references in the state (its owner, parent or sibling), and invent nothing.",),
        status="ok"),
    StressPreset(
        "insufficient-info", "Insufficient information",
        "The state does not hold what the call asks for; the response must say so.",
        ("The state does not hold what this call asks for: answer with this API's not-found or missing-information "
         "error and a message naming what is missing; invent no values.",),
        status="error"),
    StressPreset(
        "long-output", "Very long output",
        "A listing of 50 or more records, each exactly once, without loops.",
        ("page_size: 50", "List every matching record up to 50 in this one page, each exactly once, in the state's "
                          "order: no record repeated, no loop, no invented record."),
        status="ok"),
    StressPreset(
        "impossible", "Impossible task",
        "No tool can do what is asked; the world answers plausibly, not with a crash or an invented success.",
        ("No tool of this world can do what the call asks: answer as this API would, with its error for an "
         "unsupported request and a plausible message; never a crash, never an invented success.",),
        status="error"),
    StressPreset(
        "pagination", "Pagination over several pages",
        "The call continues a listing page by page; no record is repeated or skipped across pages.",
        ("page_size: 3", "This call continues a listing page by page: start right after the last record of the "
                         "previous page, repeat none and skip none; only the last page has no next-page token."),
        status="ok"),
    StressPreset(
        "error-cascade", "Error cascade",
        "An error at step k; later calls that do not depend on it are answered as usual.",
        (f"inject_error: {CASCADE_ERROR}", "This call fails (the error at step k). Later calls that do not depend "
                                           "on it must succeed as usual: no error cascade."),
        status="error", error=CASCADE_ERROR),
)}


def stress_preset(name: Any) -> StressPreset:
    """The preset called `name`; InvalidInput lists the presets on a typo."""
    preset = PRESETS.get(str(name).strip().lower()) if isinstance(name, str) else None
    if preset is None:
        raise InvalidInput(Problem("preset", f"{name!r} is not a stress preset: use one of {', '.join(PRESETS)}"))
    return preset


def preset_request(name: str, tool: Tool | None) -> tuple[list[Anchor], list[str]]:
    """(anchors, directives) of preset `name` for a call of `tool`: only anchors its response schema has."""
    preset = stress_preset(name)
    properties = (tool.response or {}).get("properties", {}) if tool is not None else {}
    anchors = []
    if preset.status is not None and _allows(properties.get("status"), preset.status):
        anchors.append(Anchor("status", preset.status))
    if preset.error is not None and _allows(properties.get("error"), preset.error):
        anchors.append(Anchor("error", preset.error))
    return anchors, list(preset.directives)


def _allows(schema: Any, value: str) -> bool:
    """True when a string field's schema admits `value` (no enum, or one that lists it)."""
    if not isinstance(schema, dict) or schema.get("type") not in ("string", None):
        return False
    return "enum" not in schema or value in schema["enum"]


def apply_preset(name: str, world: WorldSpec, call: Call, anchors: list[Anchor]) -> tuple[WorldSpec, list[Anchor]]:
    """`world` with the preset's directives added (after its own) and `anchors` with the preset's added where the
    caller pinned no value of their own at that path."""
    try:
        tool = world.tool(call.name)
    except KeyError:
        tool = None
    pinned, directives = preset_request(name, tool)
    given = {a.path for a in anchors}
    extra = [d for d in directives if d not in world.directives]
    return (replace(world, directives=[*world.directives, *extra]),
            [*anchors, *(a for a in pinned if a.path not in given)])


def presets_json(tool: Tool | None = None) -> list[dict[str, Any]]:
    """Every preset as JSON (name, title, summary, directives, anchors as PATH=VALUE for `tool`)."""
    out = []
    for preset in PRESETS.values():
        anchors, directives = preset_request(preset.name, tool) if tool is not None else (
            [a for a in (Anchor("status", preset.status) if preset.status else None,
                         Anchor("error", preset.error) if preset.error else None) if a], list(preset.directives))
        out.append({"name": preset.name, "title": preset.title, "summary": preset.summary,
                    "directives": directives, "anchors": [str(a) for a in anchors]})
    return out
