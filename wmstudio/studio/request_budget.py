"""What one served request may ask the world model to work through, so that a hostile or careless body is refused
at once with a 4xx naming the limit, rather than holding a CPU for a minute while other requests wait.

Measured before these limits (issue 29, loopback, the embedded model): twenty CEL rules within the per-check
limits held the server 64 s, a 7 MB state 91 s. A request's state and history are bounded by size (the prompt is
chosen from them and each rule converts them), the CEL its world brings by characters (compiling costs ~50 us a
character) and all its rule checks together by CPU time. A schema's `$ref` expansion is bounded where tools are
imported (world/tools/schema_size.py). JSON limits (depth, numbers, surrogates) are the CLI's: world/input_limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.budget import SharedOverBudget, shared_budget
from wmstudio.world.tools.regex_automata import build_budget

MAX_STATE_CHARS = 256_000  # a request's environment state as JSON (~2 s of prompt choice and checks on a CPU)
MAX_HISTORY_CHARS = 256_000  # a request's earlier steps as JSON
MAX_CHECK_CHARS = 32_768  # the CEL of all the rules a request's world brings (the filesystem demo world: 13,056)
CHECK_SECONDS = 2.0  # CPU seconds all the rule checks of one request may take together
PATTERN_SECONDS = 0.5  # CPU seconds the automata of a request's schema patterns may take to build together


def limit_state(state: Any, where: str) -> None:
    """InvalidInput at `where` when a state a request brings is over MAX_STATE_CHARS."""
    size = _size(state)
    if size > MAX_STATE_CHARS:
        raise InvalidInput(Problem(where, f"the environment state is {size:,} characters, over the "
                                          f"{MAX_STATE_CHARS:,}-character limit for a request: send the records "
                                          "the call concerns"))


def limit_history(history: list[HistoryStep], where: str) -> None:
    """InvalidInput at `where` when the earlier steps a request brings are over MAX_HISTORY_CHARS."""
    size = sum(_size(step.to_json()) for step in history)
    if size > MAX_HISTORY_CHARS:
        raise InvalidInput(Problem(where, f"the earlier steps are {size:,} characters, over the "
                                          f"{MAX_HISTORY_CHARS:,}-character limit for a request: send the last "
                                          "turns only"))


def limit_world_data(raw: dict[str, Any], where: str = "world") -> None:
    """InvalidInput naming the field when a world object a request brings (before it is parsed and its rules
    compiled) is over the state or the rule-check limit."""
    problems = []
    try:
        limit_state(raw.get("initial_state"), f"{where}.initial_state")
    except InvalidInput as err:
        problems.extend(err.problems)
    rules = raw.get("rules")
    checks = sum(len(r["check"]) for r in rules if isinstance(r, dict) and isinstance(r.get("check"), str)) \
        if isinstance(rules, list) else 0
    if checks > MAX_CHECK_CHARS:
        problems.append(Problem(f"{where}.rules", f"the rules' checks hold {checks:,} characters of CEL, over the "
                                                  f"{MAX_CHECK_CHARS:,}-character limit for a request: keep the "
                                                  "checks that matter, or save the world in the studio and name it"))
    if problems:
        raise InvalidInput(problems)


@contextmanager
def request_budget(where: str = "world.rules") -> Iterator[None]:
    """Run a request's work with all its rule checks bounded to CHECK_SECONDS of CPU together (over it,
    InvalidInput at `where` naming the limit) and its patterns' automata to PATTERN_SECONDS (over it, the pattern
    that ran out is refused, named)."""
    try:
        with shared_budget(CHECK_SECONDS), build_budget(PATTERN_SECONDS):
            yield
    except SharedOverBudget as err:
        raise InvalidInput(Problem(where, f"{err}: simplify the checks (nested .all(), .exists() or .map() multiply "
                                          "their lists' lengths) or send fewer")) from None


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
