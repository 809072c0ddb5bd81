"""A response schema inferred from example responses, so an imported tool gets a skeleton canvas.

Tool files rarely say what a tool returns; a few real responses do. The schema is the union of what the examples
show: an object's properties (required when every example has them), an array's items merged across elements,
`integer` until a fraction appears, a string `format` when every example has it. The user edits it before saving."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.json_types import json_type

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
MAX_EXAMPLES = 200


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
