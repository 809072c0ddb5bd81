"""JSON types of Python values, the words messages use for them, and JSON text read back with a fallback.

One place decides that `True` is a boolean and not an integer, and that a message says "got a number" for 42
but "expected an integer" for a schema's `integer`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

TYPE_WORDS = {"string": "text", "integer": "an integer", "number": "a number", "boolean": "a boolean",
              "array": "a list", "object": "an object", "null": "null"}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a parsed JSON value: string, integer, number, boolean, array, object, null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def describe_value(value: Any) -> str:
    """What a message says a given value is ("got a number"): JSON has one kind of number for the reader."""
    kind = json_type(value)
    return TYPE_WORDS["number"] if kind == "integer" else TYPE_WORDS.get(kind, kind)


def describe_type(name: str) -> str:
    """What a message says a schema type name asks for ("expected an integer")."""
    return TYPE_WORDS.get(name, name)


def value_at(value: Any, parts: Sequence[str | int], missing: Any = None) -> Any:
    """The value at the key/index `parts` inside `value`, or `missing` where the path leads nowhere."""
    node = value
    for part in parts:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return missing
    return node


def json_or(value: Any, fallback: Any) -> Any:
    """`value` parsed when it is JSON text, `fallback` when it is text that is not JSON; a value that is not text is
    taken as parsed already and given back as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return fallback
