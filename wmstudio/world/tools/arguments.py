"""Checking a call's arguments against its tool's parameters schema, the way an API refuses a request before it
reads any state: the subset of JSON Schema tools use (required names, types, enums, bounds, lengths, item types,
no unknown names), each problem worded as an API words it (`Argument 'limit' must be at most 50.`). The simulators
refuse bad calls with it, and the world model answers a call it refuses with the world's own code for it
(world/checks/refused_requests.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wmstudio.world.json_types import json_type

JSON = dict[str, Any]


@dataclass(frozen=True)
class ArgumentError:
    """Why a call's arguments were refused: the error code and the message an API would send."""

    code: str
    message: str


_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
               "array": "a list", "object": "an object"}


def _type_matches(value: Any, kind: str | list[str]) -> bool:
    """Whether `value` is of the schema's type (one of them, for a list of types)."""
    if isinstance(kind, list):
        return any(_type_matches(value, one) for one in kind)
    actual = json_type(value)
    return actual == kind or (kind == "number" and actual == "integer")


def _kind_name(kind: str | list[str]) -> str:
    """`a string`, `a string or null`: how a message names a schema's type."""
    kinds = kind if isinstance(kind, list) else [kind]
    return " or ".join(_TYPE_NAMES.get(one, str(one)) for one in kinds)


def argument_error(parameters: JSON, arguments: Any) -> ArgumentError | None:
    """None when `arguments` fit the tool's parameters schema, else the first problem (in schema order)."""
    if not isinstance(arguments, dict):
        return ArgumentError("INVALID_ARGUMENT", "Arguments must be an object of names to values.")
    properties = parameters.get("properties", {})
    for name in parameters.get("required", []):
        if name not in arguments:
            return ArgumentError("MISSING_ARGUMENT", f"Missing required argument '{name}'.")
    for name, schema in properties.items():
        if name in arguments and (problem := _value_problem(name, schema, arguments[name])) is not None:
            return ArgumentError("INVALID_ARGUMENT", problem)
    if parameters.get("additionalProperties") is False:
        for name in arguments:
            if name not in properties:
                return ArgumentError("INVALID_ARGUMENT", f"Unknown argument '{name}'.")
    return None


def _value_problem(name: str, schema: JSON, value: Any) -> str | None:
    kind = schema.get("type")
    if kind and not _type_matches(value, kind):
        return f"Argument '{name}' must be {_kind_name(kind)}, got {_TYPE_NAMES.get(json_type(value), 'null')}."
    if "enum" in schema and value not in schema["enum"]:
        return f"Argument '{name}' must be one of {', '.join(map(str, schema['enum']))}."
    if "minimum" in schema and value < schema["minimum"]:
        return f"Argument '{name}' must be at least {schema['minimum']}."
    if "maximum" in schema and value > schema["maximum"]:
        return f"Argument '{name}' must be at most {schema['maximum']}."
    if "minLength" in schema and len(value) < schema["minLength"]:
        return f"Argument '{name}' must not be empty." if schema["minLength"] == 1 else (
            f"Argument '{name}' must have at least {schema['minLength']} characters.")
    if kind == "array":
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"Argument '{name}' must list at least {schema['minItems']} item(s)."
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"Argument '{name}' must list at most {schema['maxItems']} items."
        item_kind = schema.get("items", {}).get("type")
        if item_kind and not all(_type_matches(item, item_kind) for item in value):
            return f"Every item of '{name}' must be {_kind_name(item_kind)}."
    return None
