"""Anchors: response fields a user pins to a value (`status="error"`) before the model fills in the rest.

Parsed from `PATH=VALUE` text and checked against the tool's response schema, so a typo in a field name or a
value of the wrong type is caught before a rollout is generated, not after."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem, join_key
from wmstudio.world.input_limits import InputRefused, loads_limited, printable, surrogate_message
from wmstudio.world.json_types import describe_type, json_type
from wmstudio.world.jsonpath import NOT_FOUND, follow_pointer, format_path, parse_path
from wmstudio.world.tools.linear_patterns import validator_for

SHOWN_CHARS = 60  # of an anchor's text in a message about it
EXAMPLE = 'status="error", refund_processed=false or items[0].price=12.5'


@dataclass(frozen=True)
class Anchor:
    """A pinned response field: `path` in jsonpath form (`items[0].price`) and its JSON `value`."""

    path: str
    value: Any

    def __str__(self) -> str:
        return f"{self.path}={json.dumps(self.value, ensure_ascii=False)}"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "value": self.value}


def parse_anchor(text: str) -> Anchor:
    """Read `PATH=VALUE` where VALUE is JSON (`status="error"`); InvalidInput names the anchor and the fix."""
    where = f"anchor {_shown(text)}" if isinstance(text, str) else f"anchor {text!r}"
    if isinstance(text, str) and printable(text) != text:  # a byte that is not UTF-8 in a shell argument
        raise InvalidInput(Problem(where, surrogate_message(text)))
    if not isinstance(text, str) or "=" not in text:
        raise InvalidInput(Problem(where, f"write PATH=VALUE with a JSON value, e.g. {EXAMPLE}"))
    path, value_text, path_error = _split(text)
    if path is None:
        raise InvalidInput(Problem(where, f"{path_error} (an anchor is PATH=VALUE, e.g. {EXAMPLE})"))
    if not value_text:
        raise InvalidInput(Problem(where, f'no value after "=": give a JSON value, e.g. {path}="error" or {path}=0'))
    try:
        value = loads_limited(value_text)
    except InputRefused as err:
        raise InvalidInput(Problem(where, f"the value {err}")) from None
    except (json.JSONDecodeError, ValueError):
        quoted = f"{path}={json.dumps(value_text, ensure_ascii=False)}"
        raise InvalidInput(
            Problem(where, f"the value `{value_text}` is not JSON: quote text as {quoted} (in a shell: '{quoted}')")
        ) from None
    return Anchor(path=path, value=value)


def _shown(text: str) -> str:
    """An anchor as a message shows it: printable, and cut when it is long."""
    shown = printable(text.strip())
    return shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 3] + "..."


def parse_anchors(texts: Iterable[str | Anchor]) -> list[Anchor]:
    """Parse several anchors (Anchor objects pass through); InvalidInput lists every bad one at once."""
    anchors, problems = [], []
    for text in texts:
        if isinstance(text, Anchor):
            anchors.append(text)
            continue
        try:
            anchors.append(parse_anchor(text))
        except InvalidInput as err:
            problems.extend(err.problems)
    if problems:
        raise InvalidInput(problems)
    return anchors


def read_anchors(raw: Any, field: str = "anchors") -> list[Anchor]:
    """Anchors as every door sends them, read one way: an object of path -> JSON value (`{"status": "error"}`), a
    list of `PATH=VALUE` texts, or those texts one per line; None or empty is none. InvalidInput names each bad
    one (`anchors[1]` in a list, `anchor status=x` in text, or its path in an object)."""
    if raw is None or raw == "" or raw == {} or raw == []:
        return []
    if isinstance(raw, str):  # a form's box: each problem named by the anchor as typed
        return parse_anchors([line for line in raw.splitlines() if line.strip()])
    if isinstance(raw, dict):
        anchors, problems = [], []
        for path, value in raw.items():
            try:
                anchors.append(Anchor(format_path(parse_path(str(path))), value))
            except ValueError as err:
                problems.append(Problem(join_key(field, str(path)), f"{err}: give a field path such as {EXAMPLE}"))
        if problems:
            raise InvalidInput(problems)
        return anchors
    if isinstance(raw, list):
        anchors, problems = [], []
        for i, item in enumerate(raw):
            try:
                anchors.append(parse_anchor(item))
            except InvalidInput as err:
                problems.extend(Problem(f"{field}[{i}]", p.message) for p in err.problems)
        if problems:
            raise InvalidInput(problems)
        return anchors
    raise InvalidInput(Problem(field, 'give an object of path -> value {"status": "error"} or "PATH=VALUE" texts'))


def anchor_problems(anchors: Iterable[Anchor], response_schema: dict[str, Any] | None) -> list[Problem]:
    """Anchors the response schema rules out: a field it does not have (listing those it has) or a wrong value type.

    Follows nested objects, arrays (`items[0].price` through `items`), local `$ref`s and anyOf/oneOf/allOf
    branches (an anchor is fine when any branch allows it). No schema means nothing to check."""
    if not isinstance(response_schema, dict):
        return []
    problems = []
    for anchor in anchors:
        message = _anchor_problem(anchor, response_schema)
        if message:
            problems.append(Problem(f"anchor {anchor.path}", message))
    return problems


def _split(text: str) -> tuple[str | None, str, str]:
    """Split at the first `=` after a readable path (a quoted key may itself contain `=`)."""
    error = "the part before = is not a field path"
    for pos, char in enumerate(text):
        if char != "=":
            continue
        candidate = text[:pos].strip()
        try:
            parse_path(candidate)
        except ValueError as err:
            error = str(err)
            continue
        return format_path(parse_path(candidate)), text[pos + 1 :].strip(), ""
    return None, "", error


def _anchor_problem(anchor: Anchor, root: dict[str, Any]) -> str | None:
    try:
        parts = parse_path(anchor.path)
    except ValueError as err:
        return str(err)
    candidates = _expand(root, root)
    walked: list[str | int] = []
    for part in parts:
        found, reasons = [], []
        for schema in candidates:
            child, reason = _child(schema, part, walked)
            if child is not None:
                found.extend(_expand(child, root))
            elif reason is None:  # the schema does not constrain this level: nothing more to check
                return None
            else:
                reasons.append(reason)
        if not found:  # of several branches, the one that lists fields says most
            return next((r for r in reasons if "has no field" in r), reasons[0])
        candidates = found
        walked.append(part)
    reasons = [_value_mismatch(anchor.value, schema, root) for schema in candidates]
    return None if any(r is None for r in reasons) else reasons[0]


def _expand(schema: Any, root: dict[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    """A schema as the list of alternatives it allows: local $refs followed, anyOf/oneOf/allOf branches flattened."""
    if not isinstance(schema, dict) or depth > 20:
        return [{}]  # `true`, odd or too deeply nested schemas: nothing we can check
    if isinstance(schema.get("$ref"), str):
        target = _resolve_ref(schema["$ref"], root)
        if target is None:
            return [{}]  # a reference we cannot follow constrains nothing we can check
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return [*_expand(target, root, depth + 1), *([rest] if _constrains(rest) else [])]
    branches = [b for key in ("anyOf", "oneOf", "allOf") for b in schema.get(key, []) if isinstance(b, dict)]
    if branches:
        own = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}
        expanded = [s for branch in branches for s in _expand(branch, root, depth + 1)]
        return [*([own] if _constrains(own) else []), *expanded]
    return [schema]


def _constrains(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in ("type", "properties", "items", "prefixItems", "enum", "const"))


def _resolve_ref(ref: str, root: dict[str, Any]) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = follow_pointer(root, ref[1:])
    return None if node is NOT_FOUND else node


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _child(schema: dict[str, Any], part: str | int, walked: list[str | int]) -> tuple[Any, str | None]:
    """(sub-schema for `part`, None) when found; (None, None) when unconstrained; (None, why) when ruled out."""
    here = format_path(walked) or "the response"
    types = _types(schema)
    if isinstance(part, str):
        if types and not types & {"object", "dict"}:
            return None, f"{here} is {_type_words(types)}, not an object with field `{part}`"
        properties = schema.get("properties")
        if isinstance(properties, dict) and part in properties:
            return properties[part], None
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            return additional, None
        if isinstance(schema.get("patternProperties"), dict) or additional is True:
            return None, None
        if isinstance(properties, dict):
            fields = ", ".join(properties) or "none"
            return None, f"the response schema has no field `{part}` in {here} (fields: {fields})"
        return None, None
    if types and "array" not in types and "tuple" not in types:
        return None, f"{here} is {_type_words(types)}, not a list to index with [{part}]"
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    if isinstance(prefix, list) and part < len(prefix):
        return prefix[part], None
    if isinstance(items, list):
        return (items[part], None) if part < len(items) else (None, None)
    if isinstance(items, dict):
        return items, None
    return None, None


def _value_mismatch(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> str | None:
    """None when `value` fits `schema`, else what the schema expects (type or enum) and what was given."""
    try:
        errors = list(validator_for(root)(root).descend(value, schema))
    except Exception:  # noqa: BLE001 - unknown types, unresolvable $refs: leave the value unchecked, never guess
        return None
    if not errors:
        return None
    given = json.dumps(value, ensure_ascii=False)
    if isinstance(schema.get("enum"), list):
        options = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        return f"value {given} is not allowed: expected one of {options}"
    if "const" in schema:
        return f"value {given} is not allowed: expected {json.dumps(schema['const'], ensure_ascii=False)}"
    types = _types(schema)
    if types and not _fits_type(value, types):
        return f"value {given} is {describe_type(json_type(value))}, expected {_type_words(types)}"
    return f"value {given} does not fit the response schema: {errors[0].message}"


def _fits_type(value: Any, types: set[str]) -> bool:
    kind = json_type(value)
    if kind == "integer":
        return bool(types & {"integer", "number"})
    if kind == "number":
        return "number" in types or ("integer" in types and float(value).is_integer())
    return kind in types


def _type_words(types: set[str]) -> str:
    return " or ".join(describe_type(t) for t in sorted(types))
