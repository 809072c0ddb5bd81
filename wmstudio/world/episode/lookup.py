"""Finding what a call is about in a state: the records it names by id (a list of ids too), the field an answer's
or an argument's key names (`order_status` for an order's `status`, `total_refunded_cents` for `refunded_cents`),
the values a status-like field takes, and what a tool's name says it does (reads, makes, deletes, moves)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from wmstudio.world.episode.changes import node_at
from wmstudio.world.records import named_record_at, needles_of, own_id_keys, singular
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.schema import schema_properties

SHELL_READS = frozenset({"ls", "cat", "stat", "pwd", "head", "tail", "du", "tree", "wc", "grep"})  # read, unnamed so
CREATE_VERBS = frozenset({"create", "new", "add", "open", "register", "make", "insert", "submit", "issue", "place",
                          "book", "post", "upload", "enroll", "enrol"})
DELETE_VERBS = frozenset({"delete", "remove", "rm", "rmdir", "del", "destroy", "drop", "unlink", "purge", "erase"})
MOVE_VERBS = frozenset({"mv", "move", "rename"})
SET_VERBS = frozenset({"set", "update", "change", "edit", "modify", "patch", "amend", "adjust", "assign", "replace",
                       "put", "configure", "reschedule"})  # a tool that sets the fields its arguments name
RUNNING_WORDS = frozenset({"total", "new", "current", "updated"})  # `total_refunded_cents` is what `refunded_cents` holds
SECRET_WORDS = frozenset({"token", "password", "secret", "session"})  # a call's credentials are no record's fields
ID_WORDS = (["id"], ["key"], ["token"], ["number"], ["code"], ["ref"], ["reference"])


def walk(value: Any) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(path, node) of `value` and everything in it, breadth first."""
    queue: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while queue:
        path, node = queue.pop(0)
        yield path, node
        if isinstance(node, dict):
            queue.extend((path + (key,), child) for key, child in node.items())
        elif isinstance(node, list):
            queue.extend((path + (index,), child) for index, child in enumerate(node))


def records_holding(state: Any, value: str, skip: tuple = (), most: int = 4) -> list[tuple[tuple, dict[str, Any]]]:
    """(path, record) of up to `most` objects of the state, nearest the top first (not the one at `skip`), that hold
    `value` in a field other than their own id, or in a list field: the records that refer to or own the record
    whose id it is (a customer whose `line_ids` lists a line)."""
    found: list[tuple[tuple, dict[str, Any]]] = []
    for path, node in walk(state):
        if isinstance(node, dict) and path != skip and any(
                field == value or (isinstance(field, list) and value in field)
                for key, field in node.items() if key not in own_id_keys(path)):
            found.append((path, node))
            if len(found) == most:
                break
    return found


def words(text: str) -> list[str]:
    """`orderId` / `order_id` / `order-id` -> ["order", "id"] (lower case)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(text))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def kind_of(path: tuple[str | int, ...]) -> str:
    """The kind of record a collection at `path` holds: `order` under `orders`, `dock_station` under `dockStations`."""
    names = [p for p in path if isinstance(p, str)]
    if names and isinstance(path[-1], str) and re.search(r"\d", path[-1]):
        names.pop()  # a map's record keyed by its id: the kind is the map's
    return "_".join(words(singular(names[-1]))) if names else ""


def field_for(key: str, record: dict[str, Any], path: tuple[str | int, ...]) -> str | None:
    """The record's field an answer's (or a write's argument's) `key` names: the same key or words (`doses_left`,
    `dosesLeft`), the key less the record's kind (`order_status` -> `status`), or less a running-total word (`total_refunded_cents`, `new_flight`)."""
    if key in record:
        return key
    said = words(key)
    same = next((name for name in record if words(name) == said), None)  # `doses_left` names `dosesLeft`
    if same is not None:
        return same
    kind = words(kind_of(path))
    if kind and said[:len(kind)] == kind:
        rest = said[len(kind):]
        hit = next((name for name in record if words(name) == rest), None)
        if hit is not None:
            return hit
    plain = [w for w in said if w not in RUNNING_WORDS]
    if plain and len(plain) < len(said):
        return next((name for name in record if words(name) == plain), None)
    return None


def record_path(state: Any, value: str) -> tuple[tuple[str | int, ...], dict[str, Any]] | None:
    """(path, the record itself, not a copy) of the record whose own id is `value`: an object holding it under
    `id`, `<kind>_id` or `<kind>Id`, or a map's entry keyed by it."""
    for path, node in walk(state):
        if isinstance(node, dict):
            if path and any(node.get(key) == value for key in own_id_keys(path)):
                return path, node
            child = node.get(value)
            if isinstance(child, dict):
                return path + (value,), child
    return None


def named_records(state: Any, arguments: dict[str, Any]) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """(path, record) of each record the call names by its own id (an id argument, or each id of a list of ids), in
    the arguments' order; else the first record holding an id-like value the call sends."""
    found: dict[tuple, dict[str, Any]] = {}
    for value in argument_ids(arguments):
        at = record_path(state, value)
        if at is not None:
            found.setdefault(at[0], at[1])
    if not found:
        at = named_record_at(state, Call("_", arguments))
        if at is not None and node_at(state, at[0]) is not None:
            found[at[0]] = node_at(state, at[0])
    return list(found.items())


def argument_ids(arguments: dict[str, Any]) -> Iterator[str]:
    """The id-like strings a call sends (or any string under a key naming an id: `booking_id`), in its order, each
    of a list of ids too."""
    for key, value in arguments.items():
        if set(words(key)) & SECRET_WORDS:
            continue  # a session's token names the caller, not the record the call is about
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and len(item) >= 2 and (item in needles_of(item, strict=True)
                                                             or words(key)[-1:] in ID_WORDS):
                yield item


def status_values(world: WorldSpec, state: Any, path: tuple, name: str) -> set[str]:
    """The values a record's field `name` takes: its siblings' values and every enum the tools give a field of
    that name (or `<kind>_<name>`)."""
    collection = node_at(state, path[:-1]) if path else None
    siblings = collection.values() if isinstance(collection, dict) else collection if isinstance(collection, list) \
        else []
    found = {item.get(name) for item in siblings if isinstance(item, dict) and isinstance(item.get(name), str)}
    names = {name, f"{kind_of(path)}_{name}"}
    for tool in world.tools:
        for schema in (tool.parameters, tool.response):
            for key, enum in schema_enums(schema):
                if key in names:
                    found.update(v for v in enum if isinstance(v, str))
    return found


def schema_enums(schema: Any) -> Iterator[tuple[str, list]]:
    """(property name, its enum) of every property in a JSON Schema, however deep."""
    return ((name, sub["enum"]) for name, sub in schema_properties(schema) if isinstance(sub.get("enum"), list))