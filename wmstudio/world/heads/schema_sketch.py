"""A response schema written as a short JSON sketch of its shape, which a world model can write out itself.

A tool imported without a response schema leaves a masked diffusion model no skeleton to fill, and a small model
writing a whole response freely loses its keys (their places in a free canvas depend on the values before them).
A sketch has no values to shift them: every key with a placeholder of its type, so it is the same text every time
the tool answers, and a model that has seen the tool answer can write it from the prompt alone, then fill the
skeleton it describes. Placeholders: `""` text, `0` a whole number, `0.0` a number, `false` a boolean, `"a|b"` a
choice among options (a leading `|` admits ""), `[]` a list of plain values, `[{...}]` a list of records, `{}` an
open object."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from wmstudio.world.spec import WorldSpec

OPTION_SEPARATOR = "|"
MAX_SKETCH_DEPTH = 6


def sketch_world(world: WorldSpec, tool_name: str) -> WorldSpec:
    """The world as a sketch's prompt shows it: the task and the tools, `tool_name` without its response schema; no
    state, rules or directives. A tool's shape is the tool's, whatever the state, so its prompt is short (cheap to
    train on, nothing to distract a small model) and the same for every call."""
    bare = world.without_response_schema(tool_name)
    return replace(bare, initial_state={}, rules=[], directives=[])


def sketch_of(schema: Any, depth: int = 0) -> Any:
    """The sketch of a JSON Schema (the shape its values share), as a JSON value."""
    if not isinstance(schema, dict) or depth > MAX_SKETCH_DEPTH:
        return {}
    options = schema.get("enum")
    if isinstance(options, list) and options and all(isinstance(o, str) for o in options):
        return OPTION_SEPARATOR.join(options) if len(options) > 1 else options[0] + OPTION_SEPARATOR
    for branch in ("anyOf", "oneOf"):
        if isinstance(schema.get(branch), list) and schema[branch]:
            typed = [b for b in schema[branch] if isinstance(b, dict) and b.get("type") != "null"]
            return sketch_of(typed[0] if typed else schema[branch][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {key: sketch_of(child, depth + 1) for key, child in properties.items()}
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict) and (items.get("type") == "object" or isinstance(items.get("properties"), dict)):
            return [sketch_of(items, depth + 1)]
        return []
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False}.get(kind, {})


def sketch_text(schema: Any) -> str:
    """The sketch as compact JSON text (what a model writes)."""
    return json.dumps(sketch_of(schema), ensure_ascii=False, separators=(",", ":"))


def schema_of_sketch(sketch: Any, depth: int = 0) -> dict[str, Any]:
    """The response schema a sketch describes: every key required, each placeholder its type, options an enum."""
    if depth > MAX_SKETCH_DEPTH:
        return {}
    if isinstance(sketch, dict):
        if not sketch:
            return {"type": "object"}
        return {"type": "object", "properties": {str(k): schema_of_sketch(v, depth + 1) for k, v in sketch.items()},
                "required": [str(k) for k in sketch]}
    if isinstance(sketch, list):
        record = next((item for item in sketch if isinstance(item, dict)), None)
        return {"type": "array", "items": schema_of_sketch(record, depth + 1)} if record else {"type": "array"}
    if isinstance(sketch, bool):
        return {"type": "boolean"}
    if isinstance(sketch, int):
        return {"type": "integer"}
    if isinstance(sketch, float):
        return {"type": "number"}
    if isinstance(sketch, str) and OPTION_SEPARATOR in sketch:
        options = list(dict.fromkeys(sketch.split(OPTION_SEPARATOR)))
        return {"type": "string", "enum": options}
    if isinstance(sketch, str):
        return {"type": "string"}
    return {}


def schema_from_sketch_text(text: str) -> dict[str, Any] | None:
    """The schema a sketch's text describes, or None when it is not JSON for an object with at least one key."""
    try:
        sketch = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return None
    if not isinstance(sketch, dict) or not sketch or any(not key for key in sketch):
        return None
    return schema_of_sketch(sketch)
