"""Copying the record a call names, whole: its values offered to the copy head from the structured state, never cut
by the prompt's budget, and its shape laid over the response schema (an array's items, a map's entries, a null).

A lookup (`get_order_details("#W3130288")`) answers with a record. A small model reading a cut prompt neither sees
all of that record nor knows how many items its arrays hold, so it writes three of five items and makes up the rest.
The record is found the way the checks and baselines find it (world/records.named_record_at: the object of the
initial state holding an id the call sends). Its leaves join the copy head's candidates with their full path, so
`items[3].price` meets `orders.#W3130288.items.3.price`; the head still chooses each value and the outcome head the
status. The shape applies where the response reads as the record (at least half of an object's fields are the
record's keys), at the top or one object down: a read-only tool's arrays and maps get exactly the record's items and
entries and its nulls stay null; a write's arrays get at least the record's slots.

A read-only tool's answer is the record, so for a read that the outcome head does not refuse the record's values
are written into their slots as one operation (`record_values`, as the outcome's values are), and the denoiser and
the copy head fill only what the record lacks. A write is left to the heads: it changes what the call asks. The
record is the state's as the episode left it (world/episode/): grounding `none` knows the state only from
the initial state and the history's answers, and each earlier write's effect is applied to it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from wmstudio.model.canvas.canvas import OUTCOME_KEY
from wmstudio.model.canvas.layout import (
    CAMEL_HUMP,
    NULL_SHAPE,
    AtLeastItems,
    Chosen,
    ExactEntries,
    ExactItems,
    Holds,
    nullable,
    ref_target,
    resolve_schema,
)
from wmstudio.model.heads.call_echoes import names_a_record
from wmstudio.model.heads.copy_head import key_words
from wmstudio.world.episode.lookup import records_holding
from wmstudio.world.episode.state import state_after
from wmstudio.world.heads.copy_sources import CopySource, shown_leaves
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path, parse_path
from wmstudio.world.records import (
    ENVELOPE_FIELDS,
    named_record_at,
    needles_of,
    own_id_keys,
    plain_name,
    record_with_id,
    singular,
)
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only

MAX_REFERENCED = 4  # records one named record refers to whose leaves join the candidates
MIN_SHARED = 0.5  # the share of an object's fields that must be the record's keys for it to read as the record
_MISSING = object()


@dataclass(frozen=True)
class NamedRecord:
    """The record a call names: where it sits in the state, the record, whether the tool only reads, and the
    values the call sends."""

    path: tuple[str | int, ...]
    record: dict[str, Any]
    reads: bool
    needles: frozenset
    changes: frozenset[str] = frozenset()  # a write's argument key words (`reason`): the fields it may change
    arguments: dict[str, Any] = field(default_factory=dict)  # the call's scalar arguments, by key
    aliases: dict[str, str] = field(default_factory=dict)  # response keys naming the record's fields (`order_id`)
    joined: dict[str, Any] = field(default_factory=dict)  # response keys naming a referenced record's fields
    owned: dict[str, list] = field(default_factory=dict)  # a read's records that refer to it, by their collection

    def touches(self, key: str) -> bool:
        """Whether a write may change a field named `key`: its key words meet the call's argument keys'."""
        return not self.reads and bool(self.changes & set(key_words(key)))


@dataclass(frozen=True)
class RecordCopy:
    """What copying gives generation: the canvas's shape, the values written before denoising ({path: value}) and
    the copied records' values as copy candidates."""

    shape: Any
    values: dict[str, Any]
    sources: list[CopySource]
    listed: int = 0  # a listing's records laid out (0 for a named record's copy)

    def items_cut(self, keep: int) -> RecordCopy:
        """This copy with every array it lays out item by item cut to its first `keep` items, their values too
        (a record's own records too many for the context, answered as an API pages them)."""
        values = {path: value for path, value in self.values.items() if _kept(self.shape, parse_path(path), keep)}
        return replace(self, shape=_cut(self.shape, keep), values=values)


def _cut(shape: Any, keep: int) -> Any:
    if isinstance(shape, ExactItems):
        return ExactItems(_cut(item, keep) for item in shape[:keep])
    if isinstance(shape, Chosen):
        return Chosen({key: _cut(child, keep) for key, child in shape.items()}, shape.branch)
    if type(shape) is dict:
        return {key: _cut(child, keep) for key, child in shape.items()}
    return shape


def _kept(shape: Any, path: list, keep: int) -> bool:
    """Whether the value at `path` stays once the shape's item-by-item arrays are cut to `keep` items."""
    for part in path:
        if isinstance(shape, ExactItems) and isinstance(part, int):
            if part >= keep:
                return False
            shape = shape[part]
        elif isinstance(shape, dict) and part in shape:
            shape = shape[part]
        else:
            return True
    return True


def record_copy(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
                state: Any = None) -> RecordCopy | None:
    """The copy of the record `call` names in `state` (the state `history` left, worked out when not given); None
    when it names none."""
    state = state_after(world, history) if state is None else state
    named = named_record_of(world, call, history, state)
    if named is None:
        return None
    if named.reads and _record_root(named, schema) is None:  # a line found by its phone; the answer: its customer
        named = next((owner for owner in _owners(world, call, named, state)
                      if _record_root(owner, schema) is not None), named)
    shape = record_shape(named, schema)
    values = record_values(named, schema) if shape is not None else identity_values(named, call, schema)
    return RecordCopy(shape, values, record_sources(named, shape, state))


def named_record_of(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                    state: Any = None) -> NamedRecord | None:
    """The record `call` names in the state the history left (world/episode/: each earlier answer and
    write applied to the initial state); None when the call sends no id-like value or no record holds one."""
    state = state_after(world, history) if state is None else state
    found = named_record_at(state, call)
    return _named(world, call, found[0], found[1], state) if found is not None else None


def _named(world: WorldSpec, call: Call, path: tuple, record: dict[str, Any], state: Any) -> NamedRecord:
    """The record at `path` as the one `call` is about."""
    needles = frozenset(needles_of(call.arguments))
    aliases = _kind_aliases(path, record)
    tool = next((t for t in world.tools if t.name == call.name), None)
    reads = tool is not None and read_only(tool)
    arguments = {key: value for key, value in (call.arguments if isinstance(call.arguments, dict) else {}).items()
                 if isinstance(value, (str, int, float)) and not isinstance(value, bool)}
    return NamedRecord(path, record, reads, needles, frozenset() if reads else _changes(call, record), arguments,
                       aliases, joined_fields(path, record, needles, state),
                       owned_records(path, record, state) if reads else {})


def owned_records(path: tuple, record: dict[str, Any], state: Any) -> dict[str, list[dict[str, Any]]]:
    """{a collection's name, plain: its records that refer to the record at `path` by its id} (a customer's bills,
    by their `customer_id`; none is an empty list), in the state's order, each with its own id under `id` and
    `<kind>_id` / `<kind>Id`: a lookup answering a record with its own records copies them whole."""
    own = next((record[key] for key in own_id_keys(path) if isinstance(record.get(key), str)), None)
    if not isinstance(own, str) or not own or not isinstance(state, dict):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for name, held in state.items():
        entries = held.items() if isinstance(held, dict) else enumerate(held) if isinstance(held, list) else ()
        children, records = [], False
        for key, child in entries:
            records = records or isinstance(child, dict)
            if not isinstance(child, dict) or (path[:1] == (name,) and (len(path) < 2 or path[1] == key)):
                continue  # the named record itself
            mine = own_id_keys((name,))
            if any(value == own for field_name, value in child.items() if field_name not in mine):
                its = key if isinstance(key, str) else next((child[k] for k in mine if k in child), None)
                children.append({**dict.fromkeys(mine, its), **child} if its is not None else child)
        if records and (name,) != path[:1]:
            found[plain_name(name)] = children
    return found


def _owners(world: WorldSpec, call: Call, named: NamedRecord, state: Any) -> list[NamedRecord]:
    """The records that hold the named record's id (a customer whose `line_ids` lists the line found by a phone),
    then those it refers to (the line's `customer_id`), each as the record the call is about."""
    own = next((named.record[key] for key in own_id_keys(named.path) if isinstance(named.record.get(key), str)),
               named.path[-1] if named.path and isinstance(named.path[-1], str) else None)
    found = records_holding(state, own, named.path, MAX_REFERENCED) if own else []
    found += referenced_records(named.path, named.record, named.needles, state)
    return [_named(world, call, path, record, state) for path, record in found]


def referenced_records(path: tuple, record: dict[str, Any], needles: frozenset, state: Any
                       ) -> list[tuple[tuple, dict[str, Any]]]:
    """(path, record) of each record the named record refers to by id (a trip's `dock_station_id` -> that dock
    station), one hop, at most MAX_REFERENCED."""
    own = set(own_id_keys(path))
    found = []
    for key, value in record.items():
        if len(found) == MAX_REFERENCED:
            break
        if key not in own and names_a_record(key) and isinstance(value, str) and value not in needles:
            target = record_with_id(state, value, skip=path)
            if target is not None:
                found.append(target)
    return found


def joined_fields(path: tuple, record: dict[str, Any], needles: frozenset, state: Any) -> dict[str, Any]:
    """Response keys naming a field of a record the named one refers to, by that record's kind, with its value:
    `dock_station_label` for the referenced dock station's `label`, `rider_full_name` for its rider's `full_name`
    (snake_case, camelCase, or any casing of those words). A lookup often answers with them, and a big state's
    prompt leaves those records out."""
    joined: dict[str, Any] = {}
    for target_path, target in referenced_records(path, record, needles, state):
        collection = next((p for p in reversed(target_path) if isinstance(p, str) and p != target.get("id")), "")
        kind = singular(collection)
        if not kind:
            continue
        for key, value in target.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool) and key not in own_id_keys(
                    target_path):
                joined.setdefault(f"{kind}_{key}", value)
                joined.setdefault(f"{kind}{key[:1].upper()}{key[1:]}", value)
                joined.setdefault(plain_name(f"{kind}{key}"), value)  # `agentDisplayname`, however it is cased
    return {key: value for key, value in joined.items() if key not in record}


def _kind_aliases(path: tuple, record: dict[str, Any]) -> dict[str, str]:
    """Response keys that name a record's own fields by its kind: `order_id` (or `orderId`) for `id`, `order_status`
    for `status` when the record sits under `orders`; `broadcast_slot_id` and `broadcastSlotId` under
    `broadcastSlots`."""
    collection = next((p for p in reversed(path) if isinstance(p, str) and p != record.get("id")), "")
    kind = singular(collection)
    if not kind:
        return {}
    snake = CAMEL_HUMP.sub("_", kind).lower()
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), kind)
    aliases = {}
    for key in record:
        for alias in (f"{kind}_{key}", f"{snake}_{key}", f"{camel}{key[:1].upper()}{key[1:]}"):
            aliases.setdefault(alias, key)
    return aliases


def _changes(call: Call, record: dict[str, Any]) -> frozenset[str]:
    """The key words of a write's arguments, but for those naming the record (`order_id` = the order's id) and
    the generic `id`: `cancel(order_id, reason)` may change `cancel_reason`, not `address`."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    held = {v for v in record.values() if isinstance(v, str)}
    words = {word for key, value in arguments.items() if not (isinstance(value, str) and value in held)
             for word in key_words(key)}
    return frozenset(words - {"id"})


def record_shape(named: NamedRecord, schema: Any) -> Any:
    """The shape of a response laid over `schema` from the record (build_canvas's `shape`), or None when no object
    of the response reads as the record."""
    root = _record_root(named, schema)
    if root is None:
        return None
    key, child = root
    if key is None:
        shaped = _project_record(child, named, schema)
        return Chosen(shaped, child) if child is not schema else shaped
    properties = resolve_schema(schema, schema).get("properties") or {}
    return {name: _project_record(child, named, schema) if name == key else None for name in properties}


def record_values(named: NamedRecord, schema: Any) -> dict[str, Any]:
    """{path: value} of every scalar of the response that the record holds, for a read-only tool (its answer is
    the record); for a write, its identifiers and those inside the record's objects and arrays that the call's
    arguments do not touch (an order's `user_id`, items and address, not its status: what a write changes is the
    model's). Outcome fields (a status
    of ok/error, its code and message) are the outcome head's. {} when no object of the response reads as the
    record."""
    root = _record_root(named, schema)
    if root is None:
        return {}
    key, child = root
    return _record_scalars(child, named, schema, [] if key is None else [key],
                           _outcome_status(resolve_schema(schema, schema)) and key is None)


def _record_scalars(schema: Any, named: NamedRecord, root: dict, prefix: list, outcome: bool) -> dict[str, Any]:
    """record_values for the object `schema` at `prefix` (`outcome`: its outcome fields are the outcome head's)."""
    properties = resolve_schema(schema, root).get("properties") or {}
    found: list[tuple[str, Any]] = []
    for name, sub in properties.items():
        value = _field(named.record, name, named.aliases, named.joined, named.owned)
        if value is _MISSING or (outcome and name in ENVELOPE_FIELDS):
            continue
        if named.reads or isinstance(value, (dict, list)) or names_a_record(name):
            found += _scalars(sub, value, root, prefix + [name], named)
    return dict(found)


def identity_values(named: NamedRecord, call: Call, schema: Any) -> dict[str, Any]:
    """{path: value} of a write's top-level identifiers that the record it names holds, where the answer is not
    that record: a sign-in by `username` answers the `student_id` its account holds, not a new student's. Not
    the id of a record of the kind the tool makes (`submit_claim` answers a new `claim_id`, not one a policy
    lists)."""
    if named.reads or not isinstance(schema, dict):
        return {}
    properties = resolve_schema(schema, schema).get("properties") or {}
    made = set(key_words(call.name))
    found = {}
    for key in properties:
        value = _field(named.record, key, named.aliases, named.joined, named.owned)
        if key in ENVELOPE_FIELDS or key in named.arguments or not names_a_record(key) \
                or not isinstance(value, (str, int)) or isinstance(value, bool) or set(key_words(key)[:-1]) <= made:
            continue
        found[format_path([key])] = value
    return found


def _outcome_status(schema: dict) -> bool:
    """Whether a response's `status` is an outcome (its options include ok or error), not a record's own field."""
    status = (schema.get("properties") or {}).get(OUTCOME_KEY)
    options = status.get("enum") if isinstance(status, dict) else None
    return isinstance(options, list) and bool({"ok", "error"} & set(options))


def record_sources(named: NamedRecord, shape: Any = None, state: Any = None) -> list[CopySource]:
    """The record's leaves as copy candidates (its path in the state before theirs, each marked as the call's
    record), the entry keys of the maps `shape` lays out entry by entry (`options` offers `color`), then, given the
    `state`, the leaves of the records it refers to (`referenced_sources`)."""
    leaves = [replace(source, call_record=True)
              for source in shown_leaves(named.record, named.path, "state", 0, set(named.needles))]
    keys = [CopySource(key, named.path + path, "state", 0, True) for path, key in _map_keys(named.record, shape, ())]
    joined = referenced_sources(named, state) if state is not None else []
    return list(dict.fromkeys(leaves + keys + joined))


def referenced_sources(named: NamedRecord, state: Any) -> list[CopySource]:
    """The leaves of each record the named record refers to by id (a trip's `dock_station_id` -> that dock
    station), as the prompt would show them: a lookup often answers with the referenced record's label
    (`dock_station_label`), and in a big state the prompt's budget leaves that record out. One hop, at most
    MAX_REFERENCED records."""
    return [source for path, record in referenced_records(named.path, named.record, named.needles, state)
            for source in shown_leaves(record, path, "state", 0, set())]


def with_record(sources: list[CopySource], record: list[CopySource]) -> list[CopySource]:
    """`sources` with the record's candidates the prompt did not show as the call's record (no source of the same
    key and value marked so) right after the call's own values: a record the prompt shows whole leaves the copy
    head's choice as it was."""
    shown = {(s.key, s.value) for s in sources if s.call_record}
    present = set(sources)
    calls = [s for s in sources if s.source == "call"]
    rest = [s for s in sources if s.source != "call"]
    return calls + [s for s in record if (s.key, s.value) not in shown and s not in present] + rest


def _record_root(named: NamedRecord, schema: Any) -> tuple[str | None, Any] | None:
    """(None, schema) when the response reads as the record, (key, its schema) when one object-valued field
    does, else None."""
    if not isinstance(schema, dict):
        return None
    branch = _branch(schema, named.record, schema)  # a union answer: the variant the record is (a line, a bill)
    if branch is not None and _reads_as_record(branch, named, schema):
        return None, branch
    top = resolve_schema(schema, schema)
    if _reads_as_record(top, named, schema):
        return None, schema
    properties = top.get("properties") if isinstance(top.get("properties"), dict) else {}
    return next(((key, child) for key, child in properties.items()
                 if _reads_as_record(resolve_schema(child, schema), named, schema)), None)


def _reads_as_record(schema: dict, named: NamedRecord, root: dict) -> bool:
    """Whether an object `schema` is the record's: 2+ of its fields, and at least MIN_SHARED of those that are not
    outcome fields or nullable fields the record lacks (an optional `cancel_reason` of an order never cancelled)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return False
    found = {key: _field(named.record, key, named.aliases, named.joined, named.owned) is not _MISSING
             for key in properties if key not in ENVELOPE_FIELDS}
    counted = [key for key, there in found.items() if there or not nullable(properties[key], root)]
    shared = sum(found.values())
    return shared >= 2 and shared >= MIN_SHARED * len(counted)


def _field(record: dict[str, Any], key: str, aliases: dict[str, str], joined: dict[str, Any],
           owned: dict[str, list] | None = None) -> Any:
    """The record's value for a response key (the same key, else the field an alias names, else a referenced
    record's field the key names, else the records of the collection the key names that refer to it), or
    _MISSING."""
    found = key if key in record else aliases.get(key)
    if found is not None and found in record:
        return record[found]
    plain = plain_name(key)
    return joined.get(key, joined.get(plain, (owned or {}).get(plain, _MISSING)))


def _project_record(schema: Any, named: NamedRecord, root: dict) -> dict[str, Any]:
    """The record's object laid over `schema` by its fields (a field the record lacks reads as null)."""
    properties = resolve_schema(schema, root).get("properties") or {}
    shaped = {}
    for key, sub in properties.items():
        value = _field(named.record, key, named.aliases, named.joined, named.owned)
        shaped[key] = _project(sub, None if value is _MISSING else value, root, named, key)
    return shaped


def _project(schema: Any, value: Any, root: dict, named: NamedRecord, key: str) -> Any:
    """`value` (at a field named `key`) as a shape for `schema`: objects by their schema's keys, maps by the
    value's entries, arrays by its items, a leaf by the value it holds, a null as NULL_SHAPE where the schema admits
    one. A field a write may change (NamedRecord.touches) keeps its items but may add more, and is no null."""
    resolved = resolve_schema(schema, root)
    kept = not named.touches(key)
    if value is None:
        return NULL_SHAPE if kept and nullable(schema, root) else None
    kinds = resolved.get("type")
    if isinstance(value, dict) and kinds in (None, "object"):
        branch = _branch(schema, value, root)
        properties = (branch or resolved).get("properties")
        if isinstance(properties, dict) and properties:
            shaped = {name: _project(properties[name], value.get(name), root, named, name) for name in properties}
            return Chosen(shaped, branch) if branch is not None else shaped
        entries = resolved.get("additionalProperties")
        if isinstance(entries, dict):
            shaped = {name: _project(entries, child, root, named, name) for name, child in value.items()}
            return ExactEntries(shaped) if kept else _Entries(shaped)
        return None
    if isinstance(value, list) and kinds in (None, "array"):
        items = resolved.get("items") if isinstance(resolved.get("items"), dict) else {}
        value = _as_items(value, items, root)
        shaped = [_project(items, child, root, named, key) for child in value]
        return ExactItems(shaped) if kept else AtLeastItems(shaped)
    if not kept and key in named.arguments:
        value = named.arguments[key]
    return Holds(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _scalars(schema: Any, value: Any, root: dict, path: list, named: NamedRecord) -> list[tuple[str, Any]]:
    """(path, scalar) of `value` laid over `schema` as _project lays it out, but for leaves a write may change."""
    resolved = resolve_schema(schema, root)
    if isinstance(value, dict):
        properties = (_branch(schema, value, root) or resolved).get("properties")
        if isinstance(properties, dict) and properties:
            return [found for key in properties if key in value
                    for found in _scalars(properties[key], value[key], root, path + [key], named)]
        entries = resolved.get("additionalProperties")
        if isinstance(entries, dict):
            return [found for key, child in value.items()
                    for found in _scalars(entries, child, root, path + [key], named)]
        return []
    if isinstance(value, list):
        if resolved.get("type") not in (None, "array"):
            return []  # a list where the answer holds one value: not this field's
        items = resolved.get("items") if isinstance(resolved.get("items"), dict) else {}
        value = _as_items(value, items, root)
        return [found for index, child in enumerate(value)
                for found in _scalars(items, child, root, path + [index], named)]
    key = next((str(p) for p in reversed(path) if isinstance(p, str)), "")
    if value is None or not path:
        return []
    if named.touches(key) and not any(isinstance(p, int) for p in path):
        # a write sets a field to the argument of its name (`address1`), the rest is the model's; the items a
        # record already lists (an order's earlier payments) stay as they are
        return [(format_path(path), named.arguments[key])] if key in named.arguments else []
    return [(format_path(path), value)]


def _as_items(value: list, items: Any, root: dict) -> list:
    """An array's items as its schema lists them: records that an array of ids lists, by their ids."""
    if resolve_schema(items, root).get("type") in ("string", "integer"):
        return [child.get("id", child) if isinstance(child, dict) else child for child in value]
    return value


def _branch(schema: Any, value: dict[str, Any], root: dict, depth: int = 0) -> dict | None:
    """The anyOf/oneOf object branch (resolved) that `value` takes: one whose `const` fields it matches, sharing
    the most keys with it; None when `schema` is no union of objects."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _branch(ref_target(ref, root), value, root, depth + 1)
    branches = [resolve_schema(b, root) for key in ("anyOf", "oneOf") for b in schema.get(key, []) if isinstance(b, dict)]
    fitting = [b for b in branches if isinstance(b.get("properties"), dict) and all(
        value.get(key) == prop["const"] for key, prop in b["properties"].items()
        if isinstance(prop, dict) and "const" in prop)]
    return max(fitting, key=lambda b: len(set(b["properties"]) & set(value)), default=None) if len(branches) > 1 \
        else None


class _Entries(dict):
    """A write's map shape (its entries keyed as the record's), told apart from an object's."""


def _map_keys(value: Any, shape: Any, path: tuple) -> list[tuple[tuple, str]]:
    """(the map's path, an entry key) for each map of `value` that `shape` lays out entry by entry."""
    found: list[tuple[tuple, str]] = []
    if isinstance(shape, dict) and isinstance(value, dict):
        if isinstance(shape, _Entries):
            found += [(path, key) for key in value]
        for key, child in shape.items():
            if key in value:
                found += _map_keys(value[key], child, path + (key,))
    elif isinstance(shape, list) and isinstance(value, list):
        for index, (child, item) in enumerate(zip(shape, value)):
            found += _map_keys(item, child, path + (index,))
    return found
