"""The branch of a union response a call's answer takes. A tool whose response is `anyOf` / `oneOf` several records
(one lookup for ids of several kinds) answers with the record the call names, in that record's branch: the one whose
`const` fields it matches, sharing the most keys with it (two at least); a call naming no record answers the error
branch (an object with an `error` field and the fewest others), else the first."""

from __future__ import annotations

from typing import Any

from wmstudio.world.jsonpath import NOT_FOUND, follow_pointer
from wmstudio.world.records import plain_name

UNION_KEYS = ("anyOf", "oneOf")
MIN_SHARED = 2  # keys a record shares with a branch for the answer to be that record (a session's token is not)


def object_branches(schema: Any) -> list[dict[str, Any]]:
    """The object branches of a top-level union (local `$ref`s followed), [] when `schema` is no union of objects."""
    if not isinstance(schema, dict):
        return []
    found = []
    for key in UNION_KEYS:
        for branch in schema.get(key) or []:
            resolved = _resolved(branch, schema)
            if isinstance(resolved, dict) and isinstance(resolved.get("properties"), dict):
                found.append(resolved)
    return found if len(found) > 1 else []


def answer_branch(schema: Any, record: dict[str, Any] | None) -> Any:
    """The branch of union `schema` an answer about `record` takes (see the module; the root's `$defs` kept), or
    `schema` itself when it is no union of objects."""
    branches = object_branches(schema)
    if not branches:
        return schema
    held = {plain_name(key) for key in record} if isinstance(record, dict) else set()
    fitting = [b for b in branches if len(held & {plain_name(key) for key in b["properties"]}) >= MIN_SHARED
               and all(record.get(key) == prop["const"] for key, prop in b["properties"].items()
                       if isinstance(prop, dict) and "const" in prop)]
    if fitting:
        chosen = max(fitting, key=lambda b: len(held & {plain_name(key) for key in b["properties"]}))
    else:
        errors = [b for b in branches if "error" in b["properties"]]
        chosen = min(errors, key=lambda b: len(b["properties"])) if errors else branches[0]
    definitions = {key: schema[key] for key in ("$defs", "definitions") if key in schema}
    return {**chosen, **definitions}


def _resolved(branch: Any, root: dict[str, Any], depth: int = 0) -> Any:
    ref = branch.get("$ref") if isinstance(branch, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#") or depth > 8:
        return branch
    target = follow_pointer(root, ref[1:])
    return NOT_FOUND if target is NOT_FOUND else _resolved(target, root, depth + 1)
