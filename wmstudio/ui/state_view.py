"""What a step did to the episode's state, as the Simulate and Rollouts tabs show it: each field set (before ->
after), each record or entry added or removed (world/episode/ works the changes out)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wmstudio.world.episode.changes import Change

MAX_CHANGES_SHOWN = 8
MAX_VALUE_CHARS = 80


def state_change_markdown(changes: Sequence[Change]) -> str:
    """`State after:` and one line per change, or a line saying the state did not change."""
    if not changes:
        return "State after: unchanged."
    lines = [f"- {_line(change)}" for change in changes[:MAX_CHANGES_SHOWN]]
    if len(changes) > MAX_CHANGES_SHOWN:
        lines.append(f"- … and {len(changes) - MAX_CHANGES_SHOWN} more change(s)")
    return "State after (what later calls read):\n" + "\n".join(lines)


def _line(change: Change) -> str:
    path = change.to_json()["path"] or "(the state)"
    if change.op == "add":
        return f"`{path}` added: `{_short(change.after)}`"
    if change.op == "remove":
        return f"`{path}` removed (was `{_short(change.before)}`)"
    return f"`{path}`: `{_short(change.before)}` → `{_short(change.after)}`"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("`", "'")
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"
