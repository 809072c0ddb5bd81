"""Steering as the Train tab's forms show it: one `tool: path=value` line per anchor (every call of the tool), or
`tool#n: path=value` (its n-th call in an episode), read back into anchor text per key."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.problems import InvalidInput, Problem

STEERING_EXAMPLE = 'refund_order#1: status="error"\nrefund_order#1: error="RATE_LIMITED"'
STEERING_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-]+(?:#[0-9]+)?)\s*:\s*(.+?)\s*$")  # tool[#n]: path=value
STEERING_LABEL = ("Steering: the anchors the world model and the simulator keep, one per line as tool: path=value "
                  "(every call) or tool#n: path=value (the tool's n-th call)")


def steering_text(steering: dict[str, list[str]]) -> str:
    """Steering as the form shows it: one `tool: path=value` line per anchor."""
    return "\n".join(f"{tool}: {anchor}" for tool, anchors in steering.items() for anchor in anchors)


def read_steering(text: Any) -> dict[str, list[str]]:
    """The steering form's lines (`tool: path=value`, blank lines skipped) as anchor text per tool; InvalidInput
    naming each line that is not of that form. The anchors themselves are checked when saved."""
    steering: dict[str, list[str]] = {}
    problems = []
    for number, line in enumerate(str(text or "").splitlines(), start=1):
        if not line.strip():
            continue
        found = STEERING_LINE.match(line)
        if found is None:
            problems.append(Problem("Steering", f"line {number} `{line.strip()[:80]}` is not `tool: path=value`: "
                                                f"write e.g. {STEERING_EXAMPLE.splitlines()[0]}"))
            continue
        steering.setdefault(found.group(1), []).append(found.group(2))
    if problems:
        raise InvalidInput(problems)
    return steering
