"""Steering per call occurrence: anchors pinned to every call of a tool (key `refund_order`) or to one of its calls in
an episode (key `refund_order#2`, its second call), and the simulator's answer steered by the same anchors.

A scenario that pins `status="error"` and `error="RATE_LIMITED"` on `refund_order#1` fails the first refund and lets
the retry through, in the world model and in the simulator that scores the episode alike."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.jsonpath import set_path
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.directives import parse_directive

MARK = "#"  # between a tool's name and the number of its call: `refund_order#2`
MAX_OCCURRENCE = 99  # no episode calls one tool more often
STEERED_ERROR = "STEERED_ERROR"  # the code a simulator injects for a pinned error whose own code it cannot take
_CODE = re.compile(r"^[A-Z][A-Z0-9_]{1,47}$")  # what the simulators' inject_error takes
EXAMPLE = 'refund_order (every call) or refund_order#1 (its first call in an episode)'


@dataclass(frozen=True)
class SteeringKey:
    """Which calls a list of anchors steers: every call of `tool` (occurrence None) or only its n-th (1-based)."""

    tool: str
    occurrence: int | None = None

    def __str__(self) -> str:
        return self.tool if self.occurrence is None else f"{self.tool}{MARK}{self.occurrence}"


def parse_steering_key(text: str, path: str = "steering") -> SteeringKey:
    """Read `tool` or `tool#n`; InvalidInput naming `path` and the fix for an empty name or a bad number."""
    tool, mark, number = str(text).partition(MARK)
    if not tool.strip():
        raise InvalidInput(Problem(path, f"{text!r} names no tool: write {EXAMPLE}"))
    if not mark:
        return SteeringKey(tool)
    if not number.isdigit() or not 1 <= int(number) <= MAX_OCCURRENCE:
        raise InvalidInput(Problem(path, f"{text!r}: the call's number after {MARK} must be a whole number "
                                         f"1-{MAX_OCCURRENCE}: write {EXAMPLE}"))
    return SteeringKey(tool, int(number))


def occurrence_of(tool: str, earlier: Iterable[str]) -> int:
    """Which call of `tool` comes next (1 for the first), given the names of the episode's earlier calls."""
    return 1 + sum(1 for name in earlier if name == tool)


def anchors_for(steering: Mapping[str, Sequence[Anchor]], tool: str, occurrence: int) -> list[Anchor]:
    """The anchors that steer the `occurrence`-th call of `tool`: those for every call of it, then those for that
    call alone, which win on a field both pin."""
    pinned = {anchor.path: anchor for anchor in steering.get(tool, ())}
    pinned.update((anchor.path, anchor) for anchor in steering.get(f"{tool}{MARK}{occurrence}", ()))
    return list(pinned.values())


class SteppedWorld(Protocol):
    def step(self, state: Any, call: Call, directives: Iterable[str] = ()) -> tuple[Any, Any]: ...


def steered_step(simulator: SteppedWorld, state: Any, call: Call, anchors: Sequence[Anchor],
                 directives: Iterable[str] = ()) -> tuple[Any, Any]:
    """The simulator's (state after, answer) for `call` under the anchors, as the world model is steered: a pinned
    `status` of "error" fails the call with the pinned `error` code (nothing changes), "partial" asks for a partial
    write, and every anchor's value is written into the answer. Of `directives` (the world's), the simulator obeys
    those of the vocabulary it can read; free text steers the world model's prompt only."""
    pinned = {anchor.path: anchor.value for anchor in anchors}
    asked = [text for text in directives if _obeyed(text)]
    if pinned.get("status") == "error":
        code = pinned.get("error")
        asked.append(f"inject_error: {code if isinstance(code, str) and _CODE.match(code) else STEERED_ERROR}")
    elif pinned.get("status") == "partial":
        asked.append("partial_success")
    after, response = simulator.step(state, call, asked)
    for anchor in anchors:
        try:
            response = set_path(response, anchor.path, anchor.value)
        except TypeError:  # a path through a value of another kind: the answer keeps its own
            continue
    return after, response


def _obeyed(text: str) -> bool:
    """Whether a simulator can obey `text`: a vocabulary directive with a good value."""
    try:
        return parse_directive(text) is not None
    except InvalidInput:
        return False
