"""JSON Schemas for a synthetic world's fields: as parameters (what a call may give) and in responses (where a
failed call's neutral value, "" or 0, must fit too)."""

from __future__ import annotations

import re

from wmstudio.world.sims.base import array, boolean, integer, record, string
from wmstudio.world.synth.blueprint import JSON, Entity, Field
from wmstudio.world.synth.naming import RFC3339_PATTERN

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[a-z]+$"


def optional(pattern: str) -> str:
    """`pattern` (anchored) widened to also match "", a failed call's neutral value."""
    return f"^({pattern.removeprefix('^').removesuffix('$')})?$"


def field_schema(f: Field, entities: dict[str, Entity], response: bool) -> JSON:
    """The schema of field `f`'s values; in a response "" / 0 also fit (a failed call's neutral values)."""
    kind = f.kind
    if kind in ("label", "person", "phone"):
        return string()
    if kind == "email":
        return string(pattern=optional(EMAIL_PATTERN) if response else EMAIL_PATTERN)
    if kind == "code":
        if f.pattern is None:
            return string()
        return string(pattern=optional(f.pattern) if response else f.pattern)
    if kind in ("int", "money"):
        return integer(minimum=0) if response or f.low >= 0 else integer()
    if kind == "float":
        return {"type": "number", "minimum": 0} if response else {"type": "number"}
    if kind in ("enum", "status"):
        return string(enum=[""] + list(f.values) if response else list(f.values))
    if kind == "bool":
        return boolean()
    if kind == "time":
        return string(pattern=optional(RFC3339_PATTERN) if response else f"^{RFC3339_PATTERN}$")
    if kind == "object":
        return record({part.key: field_schema(part, entities, response) for part in f.parts})
    if kind == "tags":
        return array(string())
    if kind == "map":
        return {"type": "object", "additionalProperties": integer(minimum=0)}
    if kind == "ref":
        pattern = entities[f.target].ids.pattern()
        return string(pattern=optional(pattern) if response else pattern)
    if kind == "refs":
        return array(string(pattern=entities[f.target].ids.pattern()))
    raise ValueError(kind)


def id_schema(entity: Entity, response: bool, example: str = "", strict: bool = False) -> JSON:
    """An entity's id: parameters say an example; a response's id is any text (a failed call echoes the id it was
    given, well-formed or not), except a new record's (`strict`), which has the id format or is ""."""
    if response:
        return string(pattern=optional(entity.ids.pattern())) if strict else string()
    return string(f"{entity.name.capitalize()} id, e.g. {example}" if example else "")


def view_schema(entity: Entity, keys: tuple[str, ...], entities: dict[str, Entity], extra: JSON | None = None) -> JSON:
    """The closed object a response shows a record as: its id, the fields `keys`, then `extra` fields."""
    properties = {entity.id_key: id_schema(entity, True)}
    for key in keys:
        properties[key] = field_schema(entity.field(key), entities, True)
    properties.update(extra or {})
    return properties


def view_record(properties: JSON) -> JSON:
    return record(properties)


def with_definitions(schema: JSON, entities: dict[str, Entity]) -> JSON:
    """`schema` written as many real tool sets write theirs: every nested object (a record's view, an array's
    items, an address) moved under `$defs` by name and referenced with `$ref`; the same values validate."""
    definitions: JSON = {}
    by_id = {entity.id_key: entity for entity in entities.values()}

    def name_of(sub: JSON, key: str) -> str:
        entity = next((by_id[k] for k in sub.get("properties", {}) if k in by_id), None)
        words = entity.name if entity is not None and key != entity.id_key else key
        base = "".join(w[:1].upper() + w[1:] for w in re.split(r"[\s_]+|(?<=[a-z])(?=[A-Z])", words) if w)
        name, n = base or "Item", 2
        while name in definitions and definitions[name] != sub:
            name, n = f"{base}{n}", n + 1
        return name

    def move(sub: JSON, key: str) -> JSON:
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            return {**sub, "items": move(sub["items"], key)}
        if sub.get("type") != "object" or not sub.get("properties"):
            return sub
        inner = {**sub, "properties": {k: move(v, k) for k, v in sub["properties"].items()}}
        name = name_of(inner, key)
        definitions[name] = inner
        return {"$ref": f"#/$defs/{name}"}

    top = {**schema, "properties": {k: move(v, k) for k, v in schema.get("properties", {}).items()}}
    return {**top, "$defs": definitions} if definitions else schema
