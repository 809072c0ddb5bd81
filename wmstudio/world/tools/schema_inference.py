"""A response schema inferred from example responses, so an imported tool gets a skeleton canvas.

Tool files rarely say what a tool returns; a few real responses do. The schema is the union of what the examples
show: an object's properties (required when every example has them), an array's items merged across elements,
`integer` until a fraction appears, a string `format` when every example has it. The user edits it before saving.
Generation does the same on the fly for a schema-less tool the history shows answering (`history_answers`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep
from wmstudio.world.json_types import json_type

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
MAX_EXAMPLES = 200
MIN_INFERRED_LENGTH = 4  # the shortest span a string inferred from the history gets


def infer_schema(examples: list[Any]) -> dict[str, Any]:
    """A JSON Schema every example fits (InvalidInput when there is no example)."""
    if not examples:
        raise InvalidInput(Problem("examples", "give at least one example response (JSON) to infer a schema from"))
    return _merge(examples[:MAX_EXAMPLES])


def _merge(values: list[Any]) -> dict[str, Any]:
    kinds = {json_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) > 1:
        branches = [_merge([v for v in values if json_type(v) == kind]) for kind in sorted(kinds)]
        return {"anyOf": branches}
    kind = kinds.pop()
    if kind == "object":
        keys = list(dict.fromkeys(key for value in values for key in value))
        properties = {key: _merge([value[key] for value in values if key in value]) for key in keys}
        required = [key for key in keys if all(key in value for value in values)]
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return schema
    if kind == "array":
        items = [item for value in values for item in value]
        return {"type": "array", "items": _merge(items)} if items else {"type": "array"}
    if kind == "string":
        schema = {"type": "string"}
        if all(DATE.match(v) for v in values):
            schema["format"] = "date"
        elif all(DATE_TIME.match(v) for v in values):
            schema["format"] = "date-time"
        return schema
    return {"type": kind}


def history_answers(tool_name: str, history: Sequence[HistoryStep]) -> list[dict[str, Any]]:
    """The JSON objects tool `tool_name` answered with in `history`, oldest first: what a tool without a response
    schema gets its skeleton from, so a rollout keeps the keys the tool answered with before."""
    values = [step.response_value() for step in history if step.call.name == tool_name]
    return [value for value in values if isinstance(value, dict) and value]


def sized_schema(values: list[Any]) -> dict[str, Any]:
    """The schema `values` fit (`infer_schema`), each string sized by the values (`_bounded`)."""
    return _bounded(infer_schema(values), values[:MAX_EXAMPLES])


def _bounded(schema: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """`schema` with each string given a `maxLength` of twice the longest non-empty example, so a canvas spends
    as many slots on a value as its examples suggest (a `status` of "ok" gets a short span, not a sentence's)."""
    if schema.get("type") == "object":
        for key, child in schema.get("properties", {}).items():
            _bounded(child, [v[key] for v in values if isinstance(v, dict) and key in v])
    elif schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        _bounded(schema["items"], [item for v in values if isinstance(v, list) for item in v])
    elif schema.get("type") == "string":
        longest = max((len(v) for v in values if isinstance(v, str)), default=0)
        if longest:
            schema["maxLength"] = max(MIN_INFERRED_LENGTH, 2 * longest)
    return schema
