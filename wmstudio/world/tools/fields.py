"""Parameter lists (`[{name, type, description, required}]`) and bare parameter maps turned into one object schema.

ToolEmu, SWE-agent and API-Bank describe arguments and returns as records rather than JSON Schema;
each record becomes a property, its `required` flag a name in the object's `required` list. AppWorld
(as the Patronus paper ships it) gives `parameters` as `{name: schema}` with no object around it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wmstudio.world.tools.findings import at
from wmstudio.world.tools.schema import SUBSCHEMA_KEYS, SUBSCHEMA_MAP_KEYS, SchemaPass, normalise_schema

# Record fields that are already JSON Schema keywords and are kept on the property as they are.
SCHEMA_FIELDS = frozenset({
    "type", "description", "enum", "default", "items", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
    "properties", "additionalProperties", "examples", "const", "anyOf", "oneOf", "title"})

# Keys that mark an object as a schema (a parameter's), as opposed to a map of names.
SCHEMA_HINTS = frozenset({
    "type", "description", "enum", "properties", "items", "anyOf", "oneOf", "allOf", "$ref", "default", "title",
    "format", "const", "examples", "required", "minimum", "maximum", "pattern", "nullable"})
BARE_MAP_NOTE = ("`parameters` is a bare map of parameter schemas: wrapped as the `properties` of an object, "
                 "required only where marked `required: true`")


def is_bare_parameter_map(raw: Any) -> bool:
    """True for `parameters` that name their parameters directly, as AppWorld's `{"song_id": {"type": "integer"}}`.

    Every value must be a parameter schema and no key may hold a fitting JSON-Schema keyword value:
    `"title": {"type": "string"}` is a parameter named title, `"title": "parameters"` the keyword."""
    if not isinstance(raw, dict) or not raw:
        return False
    for key, value in raw.items():
        if not isinstance(value, dict) or (value and not SCHEMA_HINTS & set(value)):
            return False
        if key in SUBSCHEMA_KEYS:  # `items: {...}` fits the keyword: read the whole as a schema
            return False
        if key in SUBSCHEMA_MAP_KEYS and all(isinstance(v, (dict, bool)) for v in value.values()):
            return False  # `properties: {"a": {...}}`: a map of schemas, the keyword
    return True


def fields_schema(
    fields: Any,
    path: str,
    run: SchemaPass,
    *,
    required_default: bool | Callable[[dict[str, Any]], bool] = False,
    ignored: frozenset[str] = frozenset(),
    what: str = "parameter",
) -> dict[str, Any]:
    """Object schema from field records: a list of `{name, type, ...}` or an object `{name: {type, ...}}`.

    `required_default` decides for records without `required`; `ignored` record keys are dropped quietly."""
    located = _located_records(fields, path, run, what)
    properties: dict[str, Any] = {}
    required: list[str] = []
    dropped: set[str] = set()
    for record, where in located:
        name = record.get("name")
        if not isinstance(name, str) or not name.strip():
            run.findings.problem(at(where, "name"), f"missing or not text: every {what} needs a name")
            continue
        if name in properties:
            run.findings.problem(at(where, "name"), f"duplicate {what} name {name!r}: rename or remove one")
            continue
        if "type" not in record:
            run.warn(where, f"{what} {name!r} has no `type`: it accepts any value")
        raw = {key: value for key, value in record.items() if key in SCHEMA_FIELDS}
        dropped |= set(record) - SCHEMA_FIELDS - ignored - {"name", "required"}
        properties[name] = normalise_schema(raw, where, run)
        default = required_default(record) if callable(required_default) else required_default
        flag = record.get("required", default)
        if flag in (True, "true", "True", "yes"):
            required.append(name)
        elif flag not in (False, "false", "False", "no", None):
            run.findings.problem(at(where, "required"), f"must be true or false, got {flag!r}")
    if dropped:
        run.warn(path, f"{what} record field(s) not kept: {', '.join(sorted(dropped))}")
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _located_records(fields: Any, path: str, run: SchemaPass, what: str) -> list[tuple[dict[str, Any], str]]:
    """Each record with the path that names it; an object form `{name: spec}` gets its name put in."""
    if fields is None:
        return []
    if isinstance(fields, dict):
        pairs = [({"name": name, **spec} if isinstance(spec, dict) else spec, at(path, name))
                 for name, spec in fields.items()]
        example = '{"city": {"type": "str", "description": "..."}}'
    elif isinstance(fields, list):
        pairs = [(record, at(path, i)) for i, record in enumerate(fields)]
        example = '[{"name": "city", "type": "string", "description": "..."}]'
    else:
        run.findings.problem(path, f"must be a list of {what} records like "
                                   '[{"name": "city", "type": "string", "description": "..."}]')
        return []
    located = []
    for record, where in pairs:
        if isinstance(record, dict):
            located.append((record, where))
        else:
            run.findings.problem(where, f"each {what} must be an object with a type and a description, as in {example}")
    return located
