"""What an ok answer to a write states of the record it acts on, before the model writes a token: the status the
write moves it to (the tool's own `done -> aborted`, else the status its verb forms) and the record's text fields
the call does not set. Generation writes these, as echo++ does."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.episode.lookup import (
    CREATE_VERBS,
    DELETE_VERBS,
    MOVE_VERBS,
    field_for,
    kind_of,
    named_records,
    schema_enums,
    words,
)
from wmstudio.world.records import ENVELOPE_FIELDS, own_id_keys
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only

TRANSITION = re.compile(r"->\s*([A-Za-z][\w-]*)")  # "requested/confirmed -> fulfilled" in a tool's description
WHEN_WORDS = frozenset({"at", "on", "until", "date", "time", "since", "when"})  # a timestamp's key


def write_values(world: WorldSpec, state: Any, call: Call, schema: Any) -> dict[str, Any]:
    """{response field: value} that an ok answer to a write states of the record it acts on, as that record is once
    written: the status it moves to (the tool's own words, `done -> aborted`, else the status formed from its verb,
    `suspend` -> `suspended`), and the record's text fields the call does not set (its name stays its name). Empty
    for a read, a call that makes or deletes a record, and one about no record."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    tool = next((t for t in world.tools if t.name == call.name), None)
    verbs = words(call.name)
    if not isinstance(properties, dict) or tool is None or read_only(tool) or not isinstance(call.arguments, dict) \
            or set(verbs) & (CREATE_VERBS | DELETE_VERBS | MOVE_VERBS) or not isinstance(state, dict):
        return {}
    found = named_records(state, call.arguments)
    if not found or not set(words(kind_of(found[0][0]))) <= set(verbs):
        return {}
    path, record = found[0]
    sent = {field_for(key, record, path) for key in call.arguments}
    target = TRANSITION.search(tool.description or "")
    values: dict[str, Any] = {}
    for key, sub in properties.items():
        name = field_for(key, record, path) if key not in ENVELOPE_FIELDS else None
        if name is None or name in own_id_keys(path) or name in sent or not isinstance(sub, dict):
            continue
        current = record.get(name)
        options = _enum_options(world, path, name) | set(sub.get("enum") or [])
        if isinstance(current, str) and current in options and len(options) >= 2:
            moved = target.group(1) if target is not None and target.group(1) in options else \
                _verb_state(verbs[0], options)
            if moved is not None:
                values[key] = moved
        elif isinstance(current, str) and sub.get("type") == "string" and not set(words(key)) & WHEN_WORDS \
                and not re.match(r"^\d{4}-\d{2}-\d{2}", current):
            values[key] = current
    return values


def _enum_options(world: WorldSpec, path: tuple, name: str) -> set[str]:
    """The values the tools' schemas list for a record's field (`status`, or `<kind>_status`)."""
    names = {name, f"{kind_of(path)}_{name}"}
    return {value for tool in world.tools for schema in (tool.parameters, tool.response)
            for key, enum in schema_enums(schema) if key in names for value in enum if isinstance(value, str)}


def _verb_state(verb: str, options: set[str]) -> str | None:
    """The status a verb leaves a record in: the one option formed from it (`suspend` -> `suspended`, `approve` ->
    `approved`, `cancel` -> `cancelled`); None when no option, or more than one, is."""
    stem = verb[:-1] if verb.endswith("e") else verb
    if len(stem) < 3:
        return None
    hits = [option for option in options if option.lower().startswith(stem.lower()) and option.lower() != verb]
    return hits[0] if len(hits) == 1 else None
