"""Where each field of a true response comes from, and whether a generated response got it right.

The headline of `eval-wm`: a world model is worth something when it writes the values the simulator writes, so
every leaf of the true response is classed by where its value comes from (copied from the call, copied from the
state or earlier turns, a number the prompt prints, a number it must derive, the outcome, an error code, a
boolean, an enum option, an empty value, new text) and checked exactly at the same path of the response."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from wmstudio.settings import is_number
from wmstudio.world.checks.report import json_equal
from wmstudio.world.json_types import value_at
from wmstudio.world.records import json_leaves

KINDS = ("copy_call", "copy_state", "number_in_prompt", "derived_number", "status", "error_code", "bool", "enum",
         "neutral", "text")


def field_leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, leaf) for every scalar of a JSON value; an empty list or object counts as one leaf."""
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from field_leaves(child, path + (key,))
    elif isinstance(value, list) and value:
        for index, child in enumerate(value):
            yield from field_leaves(child, path + (index,))
    else:
        yield path, value


def classify(path: tuple, value: Any, call_values: set, prompt_values: set, enums: dict[str, list]) -> str:
    """The kind of one true leaf: outcome keys first, then empties, booleans, where the value is found."""
    key = next((str(p) for p in reversed(path) if isinstance(p, str)), "")
    if key == "status" and len(path) == 1:
        return "status"
    if key == "error" and len(path) == 1:
        return "error_code"
    if is_empty(value):
        return "neutral"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number_in_prompt" if _number_key(value) in prompt_values | call_values else "derived_number"
    if value in call_values:
        return "copy_call"
    if value in prompt_values:
        return "copy_state"
    if value in enums.get(key, []):
        return "enum"
    return "text"


def is_empty(value: Any) -> bool:
    """An empty value: "", null, [], {} or a zero (what a constant answer writes; `false` is a boolean's own)."""
    return value in ("", None, [], {}) or (is_number(value) and value == 0)


def prompt_values(*sources: Any) -> set:
    """The strings and numbers anywhere in these values (numbers as floats, so 100 and 100.0 meet)."""
    found = set()
    for source in sources:
        for leaf in json_leaves(source):
            if isinstance(leaf, bool) or leaf is None:
                continue
            found.add(_number_key(leaf) if isinstance(leaf, (int, float)) else leaf)
    return found


def enum_options(schema: Any) -> dict[str, list]:
    """Key -> enum options of every enum property in a response schema (nested ones included)."""
    found: dict[str, list] = {}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in (node.get("properties") or {}).items():
                if isinstance(child, dict) and isinstance(child.get("enum"), list):
                    found[key] = child["enum"]
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(node)
    return found


@dataclass
class FieldScores:
    """Right and total per kind, and of the fields the truth fills non-empty, how many the response fills."""

    right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    filled: int = 0
    nonempty: int = 0

    def add(self, truth: Any, response: Any, call_values: set, shown_values: set, enums: dict[str, list]) -> None:
        """Score one response (a parsed value, or None when it is not JSON) against the truth."""
        for path, value in field_leaves(truth):
            kind = classify(path, value, call_values, shown_values, enums)
            got = value_at(response, path, missing=_MISSING)
            self.total[kind] += 1
            self.right[kind] += int(got is not _MISSING and json_equal(got, value))
            if not is_empty(value) and value is not False:  # an ok answer's `error: ""` is no filled field
                self.nonempty += 1
                self.filled += int(got is not _MISSING and not is_empty(got) and got is not False)

    def accuracy(self) -> dict[str, float | None]:
        return {kind: round(self.right[kind] / self.total[kind], 4) if self.total[kind] else None for kind in KINDS}

    def recall(self) -> float | None:
        return round(self.filled / self.nonempty, 4) if self.nonempty else None


def parse(text: str) -> Any:
    """The response as JSON, or None when it is not JSON."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


_MISSING = object()


def _number_key(value: int | float) -> float:
    return float(value)
