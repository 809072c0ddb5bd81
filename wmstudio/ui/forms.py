"""Forms generated from a tool's JSON Schemas: one typed field per argument, one pinnable field per response value.

Gradio cannot add components per schema at run time, so the Simulate tab keeps a fixed pool of inputs and
these functions say what each one means (label, type, options) and convert between field text and JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.input_limits import InputRefused, loads_limited
from wmstudio.world.jsonpath import format_path
from wmstudio.world.steering.anchors import Anchor, read_anchors

MASKED = "masked"  # what an anchor field shows when the model is free to fill it
KIND_WORDS = {"string": "text", "integer": "whole number", "number": "number", "boolean": "true/false",
              "enum": "one of", "json": "JSON"}
MAX_DEPTH = 4  # nested response objects deeper than this are pinned as whole JSON values
NOT_FINITE = ("inf", "infinity", "nan")  # what Python would read as a float and JSON cannot hold


@dataclass(frozen=True)
class FormField:
    """One input of a schema-generated form: the value's JSON `path`, its `kind`, and what the schema says."""

    path: str
    kind: str  # string | integer | number | boolean | enum | json
    required: bool = False
    description: str = ""
    options: tuple[Any, ...] = ()  # the enum's values (kind "enum")

    @property
    def label(self) -> str:
        kind = KIND_WORDS[self.kind]
        if self.kind == "enum":
            kind = "one of " + " | ".join(show_value(o) for o in self.options)
        return f"{self.path} · {kind}{' · required' if self.required else ''}"

    def choices(self) -> list[str]:
        """The values an anchor dropdown offers besides `masked` (enum values, true/false)."""
        if self.kind == "enum":
            return [show_value(o) for o in self.options]
        return ["true", "false"] if self.kind == "boolean" else []


def argument_fields(schema: dict[str, Any] | None) -> list[FormField]:
    """A field per top-level property of a tool's parameter schema (objects and lists are edited as JSON)."""
    root = schema if isinstance(schema, dict) else {}
    node = _resolve(root, root)
    required = set(node.get("required") or []) if isinstance(node.get("required"), list) else set()
    properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    return [_field([name], sub, root, name in required) for name, sub in properties.items()]


def response_fields(schema: dict[str, Any] | None) -> list[FormField]:
    """A field per value of a response schema that can be pinned: scalars inside nested objects get their own
    field (`customer.name`); lists and open objects are pinned as whole JSON values."""
    if not isinstance(schema, dict):
        return []
    fields: list[FormField] = []
    _collect(_resolve(schema, schema), schema, [], fields, 0)
    return fields  # `required` stays False: a response has every field the schema lists, pinned or not


def read_value(field: FormField, text: str | None) -> Any:
    """The JSON value a field's text stands for: text fields take the text as written (a quoted JSON string is
    unquoted, so `""` is the empty string); other kinds are read as JSON, falling back to the text itself so the
    schema check can say which type was expected."""
    raw = text or ""
    stripped = raw.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            pass
    if field.kind == "string":
        return raw
    if field.kind == "enum" and stripped in [o for o in field.options if isinstance(o, str)]:
        return stripped
    if field.kind in ("integer", "number") and stripped.lower().lstrip("+-") in NOT_FINITE:
        raise InvalidInput(Problem(field.path, f"{stripped} is not a number JSON can hold: give a "
                                               f"{KIND_WORDS[field.kind]}, e.g. 500"))
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return stripped
    if _not_finite(value):  # 1e400 reads as infinity, which no JSON number is
        kind = KIND_WORDS[field.kind] if field.kind in ("integer", "number") else "number"
        raise InvalidInput(Problem(field.path, f"{stripped} holds a number too large to hold (it reads as "
                                               f"infinity): give a {kind} JSON can hold, e.g. 500"))
    return value


def _not_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    return isinstance(value, list) and any(_not_finite(v) for v in value)


def show_value(value: Any) -> str:
    """How a value is written into a field: text as it is (the empty string as `""`), anything else as JSON."""
    if isinstance(value, str):
        return value if value and value.strip() == value and value != MASKED else json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def arguments_from_form(fields: Sequence[FormField], texts: Sequence[str | None], arguments_json: str) -> str:
    """The arguments JSON with each form field written into it (an empty field removes its argument); keys the
    form does not show are kept. InvalidInput when the JSON being edited is broken (fix that first)."""
    arguments = read_arguments(arguments_json)
    for field, text in zip(fields, texts, strict=False):
        if text is None or not str(text).strip():
            arguments.pop(field.path, None)
        else:
            arguments[field.path] = read_value(field, str(text))
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def form_from_arguments(fields: Sequence[FormField], arguments_json: str) -> list[str]:
    """Each field's text for the arguments JSON (empty for arguments it does not give)."""
    arguments = read_arguments(arguments_json)
    return [show_value(arguments[f.path]) if f.path in arguments else "" for f in fields]


def read_arguments(arguments_json: str | None) -> dict[str, Any]:
    """Parse the arguments editor: a JSON object (empty text is `{}`); InvalidInput says where it is broken."""
    if not (arguments_json or "").strip():
        return {}
    value = parse_json_field(arguments_json, "arguments")
    if not isinstance(value, dict):
        raise InvalidInput(Problem("arguments", "must be a JSON object of argument names to values, e.g. "
                                                '{"order_id": "ORD-10421"}'))
    return value


def parse_json_field(text: str, path: str) -> Any:
    """Parse JSON typed into a field; InvalidInput names the field and where the syntax breaks, or the limit it
    breaks (a number such as 1e400 that reads as infinity, NaN, nesting past the limit)."""
    try:
        return loads_limited(text)
    except json.JSONDecodeError as err:
        raise InvalidInput(Problem(path, f"invalid JSON at line {err.lineno}, column {err.colno} ({err.msg}): "
                                         "fix it there")) from None
    except InputRefused as err:
        raise InvalidInput(Problem(path, str(err))) from None


def anchors_from_form(fields: Sequence[FormField], texts: Sequence[str | None], free_text: str = "") -> list[Anchor]:
    """The pinned anchors: form fields not left `masked`, then the free `PATH=VALUE` lines. InvalidInput when a
    free line is not an anchor or when a path is pinned twice to different values."""
    pinned = [Anchor(f.path, read_value(f, t)) for f, t in zip(fields, texts, strict=False)
              if t is not None and str(t).strip() not in ("", MASKED)]
    free = read_anchors(free_text)
    problems, seen = [], {a.path: a for a in pinned}
    for anchor in free:
        earlier = seen.get(anchor.path)
        if earlier is not None and earlier.value != anchor.value:
            problems.append(Problem(f"anchor {anchor.path}", f"pinned twice ({show_value(earlier.value)} and "
                                                             f"{show_value(anchor.value)}): keep one"))
        elif earlier is None:
            seen[anchor.path] = anchor
            pinned.append(anchor)
    if problems:
        raise InvalidInput(problems)
    return pinned


def _collect(node: dict[str, Any], root: dict[str, Any], path: list, out: list[FormField], depth: int) -> None:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    for name, sub in properties.items():
        resolved = _resolve(sub, root)
        if isinstance(resolved.get("properties"), dict) and resolved["properties"] and depth < MAX_DEPTH:
            _collect(resolved, root, [*path, name], out, depth + 1)
        else:
            out.append(_field([*path, name], sub, root, False))


def _field(path: list, schema: Any, root: dict[str, Any], required: bool) -> FormField:
    node = _resolve(schema, root)
    description = node.get("description") if isinstance(node.get("description"), str) else ""
    if isinstance(node.get("enum"), list) and node["enum"]:
        return FormField(format_path(path), "enum", required, description, tuple(node["enum"]))
    if "const" in node:
        return FormField(format_path(path), "enum", required, description, (node["const"],))
    kind = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}.get(_type(node), "json")
    return FormField(format_path(path), kind, required, description)


def _type(node: dict[str, Any]) -> str:
    declared = node.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), None)
    return declared if isinstance(declared, str) else ""


def _resolve(schema: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A schema with local `$ref`s followed and anyOf/oneOf reduced to their first non-null branch."""
    if not isinstance(schema, dict) or depth > 20:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        node: Any = root
        for raw in [p for p in ref[1:].split("/") if p]:
            key = raw.replace("~1", "/").replace("~0", "~")
            node = node.get(key) if isinstance(node, dict) else None
        merged = {**_resolve(node, root, depth + 1), **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, dict)]
        if branches and "type" not in schema:
            chosen = next((b for b in branches if _type(_resolve(b, root, depth + 1)) != "null"), branches[0])
            return {**{k: v for k, v in schema.items() if k != key}, **_resolve(chosen, root, depth + 1)}
    return schema

