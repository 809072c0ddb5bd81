"""JSON-Schema normalisation for imported tools, then a check against the 2020-12 metaschema.

Sources bend JSON Schema (`"type": "dict"`, `optional`, `required: true` on a property, draft-7 tuple
`items`); normalising fixes what has one meaning and warns about what was lost, so every Tool's
`parameters` and `response` validate with `Draft202012Validator`. Valid schemas pass through unchanged."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator

from wmstudio.world.json_types import describe_value
from wmstudio.world.jsonpath import NOT_FOUND, follow_pointer, resolve_local
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.linear_patterns import pattern_problems
from wmstudio.world.tools.type_names import STANDARD_TYPES, map_type_name

SUBSCHEMA_KEYS = frozenset({
    "additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "contentSchema"})
SUBSCHEMA_LIST_KEYS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
SUBSCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
MAX_DEPTH = 64
_TRUE_WORDS = (True, "true", "True", "TRUE", "yes", 1)
_METASCHEMA_CHECK = Draft202012Validator(Draft202012Validator.META_SCHEMA)
_KNOWN_VALID: set[str] = set()  # schemas (as canonical JSON) that passed: worlds are loaded again and again
_KNOWN_VALID_MAX = 4096


@dataclass
class SchemaPass:
    """Context for normalising one tool's schemas: where warnings go and how forgiving to be."""

    findings: Findings
    label: str  # the tool as warnings name it, e.g. `tools[3] (math.factorial)`
    tool_path: str  # the tool's own path; warnings show paths relative to it
    loose: bool  # True for formats with their own type names (BFCL, API-Bank...): unknown types become {}
    tool: str | None = None  # the tool's name, so a warning many tools share folds into one line

    def warn(self, path: str, message: str) -> None:
        """Warn with `path` shown relative to the tool (`parameters.properties.x`), after the tool's label;
        `path` "" warns about the tool itself."""
        where = path
        if self.tool_path and path.startswith(self.tool_path):
            where = path[len(self.tool_path):].lstrip(".: ")
        self.findings.warn(self.label, f"{where}: {message}" if where else message, self.tool)


def normalise_schema(schema: Any, path: str, run: SchemaPass, depth: int = 0) -> Any:
    """Return `schema` as valid JSON Schema 2020-12, fixing known deviations; problems go to run.findings."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        example = '{"type": "string", "description": "..."}'
        if isinstance(schema, str) and map_type_name(schema) is not None:
            example = json.dumps({"type": schema}) + f" rather than {json.dumps(schema)}"
        run.findings.problem(path, f"a schema must be a JSON object, got {describe_value(schema)}: write e.g. {example}")
        return {}
    if depth > MAX_DEPTH:
        run.findings.problem(path, f"schema nested deeper than {MAX_DEPTH} levels: flatten it")
        return {}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        where = at(path, key)
        if key == "type":
            mapped = _map_type(value, where, path, run)
            out.update({k: v for k, v in mapped.items() if k == "type" or k not in schema})
        elif key == "optional":
            continue  # resolved by _settle_required, in the object that holds the property
        elif key == "required":
            out[key] = value  # placeholder keeps the key's place; _settle_required writes the value
        elif key in SUBSCHEMA_MAP_KEYS:
            if not isinstance(value, dict):
                run.findings.problem(where, f"must be an object of name -> schema, got {describe_value(value)}")
                continue
            out[key] = {name: normalise_schema(sub, at(where, name), run, depth + 1) for name, sub in value.items()}
        elif key == "items" and isinstance(value, list):
            run.warn(where, "draft-7 tuple form (a list under `items`) written as `prefixItems`, its 2020-12 spelling")
            out["prefixItems"] = [normalise_schema(s, at(where, i), run, depth + 1) for i, s in enumerate(value)]
        elif key == "additionalItems":
            if isinstance(schema.get("items"), list):
                out["items"] = normalise_schema(value, where, run, depth + 1)
            else:
                run.warn(where, "`additionalItems` without a tuple `items` has no effect: dropped")
        elif key in SUBSCHEMA_LIST_KEYS:
            if not isinstance(value, list):
                run.findings.problem(where, f"must be a list of schemas, got {describe_value(value)}")
                continue
            out[key] = [normalise_schema(s, at(where, i), run, depth + 1) for i, s in enumerate(value)]
        elif key in SUBSCHEMA_KEYS:
            out[key] = normalise_schema(value, where, run, depth + 1)
        elif key == "$schema" and value != DRAFT_2020_12 and value != DRAFT_2020_12 + "#":
            run.warn(where, f"`$schema` {value!r} dropped: the schema is checked as JSON Schema 2020-12")
        else:
            out[key] = value
    _settle_required(schema, out, path, run)
    return out


def parameters_schema(raw: Any, path: str, run: SchemaPass) -> dict[str, Any]:
    """Normalise a tool's parameters; always an object schema with `properties` (empty when none)."""
    if raw is None:
        return {"type": "object", "properties": {}}
    schema = normalise_schema(raw, path, run)
    if not isinstance(schema, dict):
        run.findings.problem(path, "parameters must be an object schema, not true/false: "
                                   'write {"type": "object", "properties": {...}}')
        return {"type": "object", "properties": {}}
    kind = schema.get("type")
    if kind is None:
        schema = {"type": "object", **schema}
    elif kind != "object":
        run.findings.problem(at(path, "type"), f"parameters must be an object schema, got type {kind!r}: "
                                               'wrap the value as {"type": "object", "properties": {"value": ...}}')
    schema.setdefault("properties", {})
    return schema


def schema_problems(schema: Any, path: str, findings: Findings) -> None:
    """Report where `schema` breaks the JSON Schema 2020-12 metaschema, every pattern that cannot be matched in
    linear time or whose automaton is over the caps (linear_patterns), and every `$ref` that points nowhere."""
    text = json.dumps(schema, sort_keys=True, default=repr)
    if text in _KNOWN_VALID:
        return
    seen: set[tuple[str, str]] = set()
    for error in _METASCHEMA_CHECK.iter_errors(schema):
        where = path
        for key in error.absolute_path:
            where = at(where, key)
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        if (where, message) not in seen:
            seen.add((where, message))
            findings.problem(where, f"not valid JSON Schema ({message}): fix this keyword")
    problems_before = len(findings.problems)
    for problem in pattern_problems(schema, path):  # matched in linear time, automata under their caps
        findings.problem(problem.path, problem.message)
    for node, where in iter_subschemas(schema, path):
        ref = node.get("$ref")
        if isinstance(ref, str) and not _ref_resolves(schema, ref):
            if ref.startswith("#"):
                findings.problem(at(where, "$ref"), f"{ref!r} points nowhere in this schema: "
                                                    "add the definition under `$defs` or inline it")
            else:
                findings.problem(at(where, "$ref"), f"external reference {ref!r} cannot be resolved offline: "
                                                    "inline the referenced schema")
    if not seen and len(findings.problems) == problems_before:
        if len(_KNOWN_VALID) >= _KNOWN_VALID_MAX:
            _KNOWN_VALID.clear()
        _KNOWN_VALID.add(text)


def iter_subschemas(schema: Any, path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema object inside `schema` (itself included) with its path; property names are not keywords."""
    if not isinstance(schema, dict):
        return
    yield schema, path
    for key, value in schema.items():
        where = at(path, key)
        if key in SUBSCHEMA_KEYS:
            yield from iter_subschemas(value, where)
        elif key in SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from iter_subschemas(sub, at(where, i))
        elif key in SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
            for name, sub in value.items():
                yield from iter_subschemas(sub, at(where, name))


def schema_properties(schema: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, schema) of every named property inside `schema`, however deep (in items, unions and definitions too)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in SUBSCHEMA_KEYS:
                stack.append(value)
            elif key in SUBSCHEMA_LIST_KEYS and isinstance(value, list):
                stack.extend(value)
            elif key in SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
                if key == "properties":
                    yield from ((name, sub) for name, sub in value.items() if isinstance(sub, dict))
                stack.extend(value.values())


def describe(fragment: dict[str, Any]) -> str:
    """Short text for a mapped type in warnings: `array`, or the JSON of the fragment (`{}` for any value)."""
    if set(fragment) == {"type"} and isinstance(fragment["type"], str):
        return fragment["type"]
    return json.dumps(fragment)


def _map_type(value: Any, path: str, schema_path: str, run: SchemaPass) -> dict[str, Any]:
    """The keywords that replace a `type` entry at `path` (`{}` when it means any value).

    Problems name the `type` key itself; warnings name the schema that holds it (`schema_path`)."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if all(v in STANDARD_TYPES for v in value):
            return {"type": value}
        fragments = [_map_type(v, path, schema_path, run) for v in value]
        if any("type" not in f or not isinstance(f["type"], str) for f in fragments):
            return {}
        return {"type": list(dict.fromkeys(f["type"] for f in fragments))}
    if not isinstance(value, str):
        run.findings.problem(path, f"must be a type name such as \"string\" or a list of names, got {describe_value(value)}")
        return {}
    mapped = map_type_name(value)
    if mapped is None:
        if run.loose:
            run.warn(schema_path, f"unknown type {value!r} mapped to {{}} (any value)")
            return {}
        close = difflib.get_close_matches(value.lower(), STANDARD_TYPES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        run.findings.problem(path, f"unknown type {value!r}: {hint}use one of {', '.join(STANDARD_TYPES)}")
        return {}
    if mapped.standard:
        return {"type": value}
    if mapped.note:
        run.warn(schema_path, f"type {value!r} mapped to {describe(mapped.schema)} ({mapped.note})")
    elif not run.loose:
        run.warn(schema_path, f"type {value!r} is not JSON Schema: mapped to {describe(mapped.schema)}")
    return dict(mapped.schema)


def _settle_required(raw: dict[str, Any], out: dict[str, Any], path: str, run: SchemaPass) -> None:
    """Write `required` from the standard list, `required: true` on properties and BFCL's `optional`."""
    declared = raw.get("required")
    names: list[str] = []
    if isinstance(declared, list) and all(isinstance(n, str) for n in declared):
        names = list(declared)
    elif "required" in raw and not isinstance(declared, bool):  # a bool belongs to the parent object
        run.findings.problem(at(path, "required"), f"must be a list of property names such as [\"city\"], "
                                                   f"got {describe_value(declared)}")
    properties = raw.get("properties") if isinstance(raw.get("properties"), dict) else {}
    lifted = [n for n, s in properties.items() if isinstance(s, dict) and s.get("required") is True and n not in names]
    if lifted:
        names += lifted
        run.warn(path, f"`required: true` inside properties ({', '.join(lifted)}) moved to the object's `required`")
    optional = [n for n, s in properties.items() if isinstance(s, dict) and s.get("optional") in _TRUE_WORDS]
    listed = raw.get("optional")
    if isinstance(listed, list):
        optional += [n for n in listed if isinstance(n, str) and n not in optional]
    elif "optional" in raw and not isinstance(listed, (bool, str)):
        run.warn(path, f"non-standard `optional` {listed!r} not understood: dropped")
    if optional:
        dropped = [n for n in names if n in optional]
        names = [n for n in names if n not in optional]
        also = f"; removed from `required`: {', '.join(dropped)}" if dropped else ""
        run.warn(path, f"non-standard `optional` dropped: {', '.join(optional)} left out of `required`{also}")
    if names or ("required" in raw and not isinstance(declared, bool)):
        out["required"] = names
    else:
        out.pop("required", None)
    if properties:
        unknown = [n for n in names if n not in properties]
        if unknown and "additionalProperties" not in raw and "patternProperties" not in raw:
            run.warn(at(path, "required"), f"names {', '.join(unknown)} that are not under `properties`")


def _ref_resolves(root: Any, ref: str) -> bool:
    if not ref.startswith("#"):
        return False
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):  # a plain-name fragment: an `$anchor`
        return any(node.get("$anchor") == fragment for node, _ in iter_subschemas(root, ""))
    return follow_pointer(root, fragment) is not NOT_FOUND


def listed_property(schema: Any) -> tuple[str, dict[str, Any]] | None:
    """(key, item properties) of the first top-level array of objects in a response schema (through `$ref`s)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for key, value in (properties or {}).items():
        value = resolve_local(value, schema)
        items = resolve_local(value.get("items"), schema) if value.get("type") == "array" else None
        if isinstance(items, dict) and isinstance(items.get("properties"), dict) and items["properties"]:
            return key, items["properties"]
    return None


def listed_items(schema: Any) -> tuple[str, dict[str, Any]] | None:
    """listed_property, or ("", item properties) where the response is itself an array of objects."""
    if isinstance(schema, dict) and schema.get("type") == "array":
        items = resolve_local(schema.get("items"), schema)
        if isinstance(items, dict) and isinstance(items.get("properties"), dict) and items["properties"]:
            return "", items["properties"]
    return listed_property(schema)
