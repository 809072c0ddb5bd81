"""The state an episode has reached: the initial state with each earlier answer's effect applied, so a write takes
effect for every later call that reads, lists or copies from the state.

What a step changes is read from what the world says, never from a simulator:
- an ok answer's fields name fields of the record the call is about (`refunded_cents`; `order_status` for an order's
  `status`; `total_refunded_cents`, the running total, for `refunded_cents`; `cancelled: true` for a status field
  whose values hold "cancelled"), reads and writes alike: what the world last said of a record is what it holds;
- a write's own arguments name the fields it sets (`new_flight` sets `flight`, `tag` adds to `tags`);
- a write whose answer holds an id no record has created a record in the collection that keys records by it
  (`booking_id` -> `bookings`), its fields taken from the answer and the call, the rest as its siblings hold them;
- a write named for deleting (`rm`, `delete_*`, `remove_*`) removes what it names (a path's children with it); one
  named for moving (`mv`, `move`, `rename`) renames it.
An error answer changes nothing. A field of a record a write touched that nothing said is kept as it was but counted
as unsure: a check does not hold an answer to it."""

from __future__ import annotations

import copy
import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path
from wmstudio.world.records import ENVELOPE_FIELDS, json_leaves, named_record_at, needles_of, own_id_keys, singular
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only

SHELL_READS = frozenset({"ls", "cat", "stat", "pwd", "head", "tail", "du", "tree", "wc", "grep"})  # read, unnamed so
CREATE_VERBS = frozenset({"create", "new", "add", "open", "register", "make", "insert", "submit", "issue", "place",
                          "book", "post", "upload", "enroll", "enrol"})
DELETE_VERBS = frozenset({"delete", "remove", "rm", "rmdir", "del", "destroy", "drop", "unlink", "purge", "erase"})
MOVE_VERBS = frozenset({"mv", "move", "rename"})
RUNNING_WORDS = frozenset({"total", "new", "current", "updated"})  # `total_refunded_cents` is what `refunded_cents` holds
FAILED_WORDS = frozenset({"failed", "failure", "skipped", "rejected", "invalid", "missing", "unknown"})
SECRET_WORDS = frozenset({"token", "password", "secret", "session"})  # a call's credentials are no record's fields
COUNTER_WORDS = frozenset({"left", "available", "remaining", "free", "open", "unsold"})  # `seats_left` is drawn down
CLOSED_WORDS = frozenset({"cancelled", "canceled", "voided", "void", "refunded", "released", "closed"})
LEFT_WORDS = frozenset({"remaining", "left", "available", "balance", "stock", "now", "after", "current", "new"})
ROLE_WORDS = frozenset({"from", "to", "source", "target", "src", "dst", "origin", "destination"})
PAID_WORDS = frozenset({"paid", "spent", "billed"})  # a record's running sum of what it cost
DUE_WORDS = frozenset({"due", "charged", "billed", "owed"})  # what one write cost
UNIT_WORDS = frozenset({"cents", "cent", "amount", "price", "total", "fee", "id", "usd", "eur"})
ID_WORDS = (["id"], ["key"], ["token"], ["number"], ["code"], ["ref"], ["reference"])
MOVE_PAIRS = (("source", "destination"), ("from", "to"), ("old_path", "new_path"), ("src", "dst"), ("old", "new"))


@dataclass(frozen=True)
class Change:
    """One predicted change: a field set (`set`), a record or entry added (`add`) or removed (`remove`)."""

    op: str
    path: tuple[str | int, ...]
    before: Any = None
    after: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "path": format_path(list(self.path)), "before": self.before, "after": self.after}


@dataclass
class EpisodeState:
    """The state after a history, each step's changes, and the fields writes may have changed without saying."""

    state: Any
    steps: list[list[Change]] = field(default_factory=list)
    unsure: set[tuple[str | int, ...]] = field(default_factory=set)

    def is_sure(self, path: tuple[str | int, ...]) -> bool:
        """Whether the history says what the field at `path` holds (or no write touched its record)."""
        return tuple(path) not in self.unsure


def episode_state(world: WorldSpec, history: Sequence[HistoryStep]) -> EpisodeState:
    """The state `history` leaves: the world's initial state with each step's effect applied in turn."""
    tracked = EpisodeState(copy.deepcopy(world.initial_state))
    for step in history:
        tracked.steps.append(apply_step(tracked, world, step.call, step.response_value()))
    return tracked


def state_after(world: WorldSpec, history: Sequence[HistoryStep]) -> Any:
    """Just the state `history` leaves (the initial state itself when nothing changed it)."""
    if not history:
        return world.initial_state
    tracked = episode_state(world, history)
    return tracked.state if any(tracked.steps) else world.initial_state


def apply_step(tracked: EpisodeState, world: WorldSpec, call: Call, answer: Any) -> list[Change]:
    """Apply one answered call to `tracked` in place; the changes it made (none for an error or a text answer)."""
    state = tracked.state
    if not isinstance(state, dict) or not isinstance(answer, dict) or not isinstance(call.arguments, dict):
        return []
    if answer.get("status", "ok") not in ("ok", "partial") or answer.get("error"):
        return []
    tool = next((t for t in world.tools if t.name == call.name), None)
    reads = tool is None or read_only(tool) or call.name.lower() in SHELL_READS
    verbs = set(words(call.name))
    if not reads and verbs & DELETE_VERBS:
        return _removed(tracked, call.arguments, answer)
    changes = _moved(tracked, call.arguments) if not reads and verbs & MOVE_VERBS else []
    if not reads:
        changes += _roles_into(tracked, call.arguments, answer)
    failed = {value for key, items in answer.items() if set(words(key)) & FAILED_WORDS and isinstance(items, list)
              for value in items if isinstance(value, str)}
    made = _created(tracked, world, call, answer) if not reads else []
    for path, record in named_records(state, call.arguments):
        if record.get("id") in failed or any(record.get(k) in failed for k in own_id_keys(path)):
            continue
        if (made or verbs & CREATE_VERBS) and not set(words(kind_of(path))) <= verbs:
            continue  # `new_test(accession_id, curator_id)`: what it sends describes the test it made, not these
        said = _answer_into(tracked, world, path, record, answer)
        changes += said
        if not reads:
            changes += _arguments_into(tracked, path, record, call.arguments, answer, {c.path for c in said})
            changes += _charged(tracked, path, record, answer, {c.path for c in changes})
            changes += _drawn_by_amount(tracked, path, record, call.arguments, answer, {c.path for c in changes})
            sure = {c.path for c in changes}
            tracked.unsure |= {path + (key,) for key in record if path + (key,) not in sure
                               and key not in own_id_keys(path)}
    if not reads:
        changes += made
        changes += _counters(tracked, changes, answer)
    return changes


def named_records(state: Any, arguments: dict[str, Any]) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """(path, record) of each record the call names by its own id (an id argument, or each id of a list of ids), in
    the arguments' order; else the first record holding an id-like value the call sends."""
    found: dict[tuple, dict[str, Any]] = {}
    for value in _argument_ids(arguments):
        at = record_path(state, value)
        if at is not None:
            found.setdefault(at[0], at[1])
    if not found:
        at = named_record_at(state, Call("_", arguments))
        if at is not None and _live(state, at[0]) is not None:
            found[at[0]] = _live(state, at[0])
    return list(found.items())


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
    """The record's field an answer's (or a write's argument's) `key` names: the same key, the key less the record's
    kind (`order_status` -> `status`), or less a running-total word (`total_refunded_cents`, `new_flight`)."""
    if key in record:
        return key
    said = words(key)
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


def _argument_ids(arguments: dict[str, Any]) -> Iterator[str]:
    """The id-like strings a call sends (or any string under a key naming an id: `booking_id`), in its order, each
    of a list of ids too."""
    for key, value in arguments.items():
        if set(words(key)) & SECRET_WORDS:
            continue  # a session's token names the caller, not the record the call is about
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and len(item) >= 2 and (item in needles_of(item, strict=True)
                                                             or words(key)[-1:] in ID_WORDS):
                yield item


def _live(state: Any, path: tuple[str | int, ...]) -> Any:
    """The node at `path` in `state` itself; None where the path leads nowhere."""
    node = state
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _set(tracked: EpisodeState, path: tuple, record: dict[str, Any], name: str, value: Any) -> list[Change]:
    """Set `record[name]` to `value` (sure from now on); the change, or none when it held that already."""
    tracked.unsure.discard(path + (name,))
    if record.get(name) == value and type(record.get(name)) is type(value):
        return []
    before = record.get(name)
    record[name] = copy.deepcopy(value)
    return [Change("set", path + (name,), before, value)]


def _answer_into(tracked: EpisodeState, world: WorldSpec, path: tuple, record: dict[str, Any],
                 answer: dict[str, Any]) -> list[Change]:
    """The named record's fields the answer states (its own ids aside)."""
    changes: list[Change] = []
    ids = set(own_id_keys(path))
    for key, value in answer.items():
        if key in ENVELOPE_FIELDS or isinstance(value, dict):
            continue
        name = field_for(key, record, path)
        if name is None:
            if value is True:
                changes += _status_word(tracked, world, path, record, key)
            continue
        if name in ids or isinstance(record.get(name), dict):
            continue
        if isinstance(value, list) != isinstance(record.get(name), list):
            continue
        if value == "" and record.get(name) not in ("", None):
            continue  # the neutral "" says nothing of a field the record holds
        changes += _set(tracked, path, record, name, value)
    return changes


def _status_word(tracked: EpisodeState, world: WorldSpec, path: tuple, record: dict[str, Any],
                 key: str) -> list[Change]:
    """`cancelled: true` sets the record's status-like field to "cancelled" where that is one of its values."""
    word = "_".join(words(key))
    for name, value in record.items():
        if isinstance(value, str) and value != word and word in status_values(world, tracked.state, path, name):
            return _set(tracked, path, record, name, word)
    return []


def status_values(world: WorldSpec, state: Any, path: tuple, name: str) -> set[str]:
    """The values a record's field `name` takes: its siblings' values and every enum the tools give a field of
    that name (or `<kind>_<name>`)."""
    collection = _live(state, path[:-1]) if path else None
    siblings = collection.values() if isinstance(collection, dict) else collection if isinstance(collection, list) \
        else []
    found = {item.get(name) for item in siblings if isinstance(item, dict) and isinstance(item.get(name), str)}
    names = {name, f"{kind_of(path)}_{name}"}
    for tool in world.tools:
        for schema in (tool.parameters, tool.response):
            for key, enum in _enums(schema):
                if key in names:
                    found.update(v for v in enum if isinstance(v, str))
    return found


def _enums(schema: Any) -> Iterator[tuple[str, list]]:
    """(property name, its enum) of every property in a JSON Schema, however deep."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in (node.get("properties") or {}).items() if isinstance(node.get("properties"), dict) \
                    else []:
                if isinstance(child, dict) and isinstance(child.get("enum"), list):
                    yield key, child["enum"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _arguments_into(tracked: EpisodeState, path: tuple, record: dict[str, Any], arguments: dict[str, Any],
                    answer: dict[str, Any], said: set[tuple]) -> list[Change]:
    """The fields a write's own arguments set: `new_flight` the flight, `tag` one more of `tags`."""
    changes: list[Change] = []
    ids = set(own_id_keys(path))
    held = {value for value in record.values() if isinstance(value, str)}
    for key, value in arguments.items():
        if isinstance(value, (dict, list)) or (isinstance(value, str) and value in held) \
                or set(words(key)) & SECRET_WORDS:
            continue
        name = field_for(key, record, path)
        if name is not None and name not in ids and path + (name,) not in said \
                and not isinstance(record.get(name), (dict, list)) and type(record.get(name)) is type(value):
            changes += _set(tracked, path, record, name, value)
        plural = next((n for n in (f"{key}s", f"{key}es") if isinstance(record.get(n), list)), None)
        if plural is not None and value not in record[plural] and path + (plural,) not in said:
            before = list(record[plural])
            record[plural].append(value)
            tracked.unsure.discard(path + (plural,))
            changes.append(Change("set", path + (plural,), before, list(record[plural])))
    return changes


def _created(tracked: EpisodeState, world: WorldSpec, call: Call, answer: dict[str, Any]) -> list[Change]:
    """Records a write created: an id-like answer value no part of the state holds, under a key naming the own id
    of a collection's records (`booking_id` for `bookings`); a new path-like argument of a creating call joins a
    list of such paths (`mkdir`)."""
    state, changes = tracked.state, []
    held = {leaf for leaf in json_leaves(state, keys=True) if isinstance(leaf, str)}
    done: set[tuple] = set()
    for key, value in answer.items():
        if key in ENVELOPE_FIELDS or not isinstance(value, str) or value in held or len(value) < 2 \
                or not (value in needles_of(value, strict=True) or words(key)[-1:] in ID_WORDS):
            continue
        for path, items, own in collections_keyed_by(state, key):
            if path in done:
                continue
            record, guessed = _new_record(world, state, path, items, own, key, value, call, answer)
            items.append(record)
            tracked.unsure |= {path + (len(items) - 1, name) for name in guessed}
            done.add(path)
            changes.append(Change("add", path + (len(items) - 1,), None, record))
            break
    if not changes and "created" in answer or set(words(call.name)) & {"mkdir", "create", "make", "add"}:
        changes += _listed_paths(tracked, call.arguments, answer)
    return changes


def collections_keyed_by(state: Any, key: str) -> Iterator[tuple[tuple, list, str]]:
    """(path, the list, the records' own key) of each list of records whose own id an answer's `key` names:
    its items hold `key` itself, or `<kind>_<field>` names their field (`session_token` -> a session's `token`);
    an empty list whose kind is the key's (`refunds` for `refund_id`)."""
    said = words(key)
    for path, node in walk(state):
        if not isinstance(node, list) or not path or not isinstance(path[-1], str):
            continue
        kind = words(kind_of(path))
        records = [item for item in node if isinstance(item, dict)]
        if records and len(records) == len(node):
            if all(key in item for item in records):
                yield path, node, key
            elif kind and said[:len(kind)] == kind:
                rest = said[len(kind):]
                own = next((name for name in records[0] if words(name) == rest), None)
                if own is not None and len({str(item.get(own)) for item in records}) == len(records):
                    yield path, node, own
        elif not node and kind and said[:len(kind)] == kind and said[len(kind):] in (["id"], ["key"], ["token"]):
            yield path, node, key


def _new_record(world: WorldSpec, state: Any, path: tuple, items: list, own: str, key: str, value: str,
                call: Call, answer: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """A created record: its own id, then each of its siblings' fields as the answer or the call states it, or as
    its siblings mostly hold it (a status), or neutral; with no sibling, the answer's ids and the call's values.
    With it, the fields nothing stated (guessed, so unsure)."""
    template = next((item for item in items if isinstance(item, dict)), None)
    arguments = {k: v for k, v in call.arguments.items() if not set(words(k)) & SECRET_WORDS}
    if template is None:
        made = {own: value}
        made.update({k: v for k, v in answer.items() if k not in ENVELOPE_FIELDS and k != key and isinstance(v, str)
                     and v in needles_of(v, strict=True)})
        made.update({k: v for k, v in arguments.items() if k not in made and not isinstance(v, bool)
                     and (isinstance(v, (int, float)) or (isinstance(v, str) and v in needles_of(v, strict=True)))})
        return made, set()
    made, used, guessed = {}, {key}, set()
    for name, example in template.items():
        if name == own:
            made[name] = value
            continue
        given = _stated(name, example, answer, path, used)
        if given is _NOTHING:
            given = _stated(name, example, arguments, path, used)
        if given is _NOTHING:
            given = _same_unit(name, example, answer, used)
            if given is not _NOTHING:
                guessed.add(name)  # likely (`charged_cents` for `paid_cents`), not stated
        if given is _NOTHING:
            given = _usual(items, name, example, status_values(world, state, path + (0,), name))
            guessed.add(name)
        made[name] = given
    return made, guessed


_NOTHING = object()


def _stated(name: str, example: Any, source: dict[str, Any], path: tuple, used: set[str]) -> Any:
    """The value `source` gives the field `name` (by key, `<kind>_<name>` or a running-total key), of its type."""
    for key, value in source.items():
        if key in used or key in ENVELOPE_FIELDS:
            continue
        if field_for(key, {name: example}, path + (0,)) == name and _same_type(value, example):
            used.add(key)
            return value
    return _NOTHING


def _same_unit(name: str, example: Any, answer: dict[str, Any], used: set[str]) -> Any:
    """A number field (`paid_cents`) given by the one number of the answer in the same unit (`charged_cents`)."""
    if not isinstance(example, (int, float)) or isinstance(example, bool) or not words(name):
        return _NOTHING
    unit = words(name)[-1]
    hits = [key for key, value in answer.items() if key not in used and words(key) and words(key)[-1] == unit
            and isinstance(value, (int, float)) and not isinstance(value, bool)]
    if len(hits) != 1:
        return _NOTHING
    used.add(hits[0])
    return answer[hits[0]]


def _usual(items: list, name: str, example: Any, values: set[str]) -> Any:
    """What a field of a new record holds when nothing says: a status its siblings mostly hold, else neutral."""
    if isinstance(example, str) and values:
        common = Counter(item.get(name) for item in items if isinstance(item, dict)).most_common(1)
        if common and isinstance(common[0][0], str) and len(values) <= 12 and (common[0][1] >= 2 or len(items) == 1):
            return common[0][0]  # a value siblings share (a status), never one sibling's own (a phone)
    if isinstance(example, bool):
        return False
    if isinstance(example, (int, float)):
        return 0
    return type(example)() if isinstance(example, (str, list, dict)) else None


def _same_type(value: Any, example: Any) -> bool:
    if isinstance(example, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(example, bool)
    if isinstance(example, (int, float)):
        return isinstance(value, (int, float))
    return example is None or type(value) is type(example)


def _listed_paths(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
    """A creating call's new path (`/home/maria/reports`, or one relative to the state's `cwd`) added to the state's
    list of such paths with any folder above it the list lacks, in the list's order where it is sorted."""
    if answer.get("created") is False:
        return []
    changes = []
    for value in arguments.values():
        path = absolute(tracked.state, value) if isinstance(value, str) else None
        if path is None:
            continue
        for where, node in walk(tracked.state):
            if isinstance(node, list) and node and all(isinstance(i, str) and i.startswith("/") for i in node):
                ordered = node == sorted(node)
                missing = [p for p in [*_ancestors(path), path] if p not in node]
                if not missing:
                    break
                node.extend(missing)
                if ordered:
                    node.sort()
                changes += [Change("add", where + (node.index(p),), None, p) for p in missing]
                break
    return changes


def absolute(state: Any, value: str) -> str | None:
    """`value` as an absolute path: itself when it starts with `/`, else joined to the state's working folder
    (`cwd`); None when it is no path."""
    if value.startswith("/"):
        return value.rstrip("/") or "/"
    cwd = next((state.get(k) for k in ("cwd", "working_dir", "pwd", "current_dir") if isinstance(state, dict)
                and isinstance(state.get(k), str) and state.get(k).startswith("/")), None)
    if cwd is None or not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)*/?", value) or value.startswith(".."):
        return None
    return f"{cwd.rstrip('/')}/{value.rstrip('/')}"


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> ["/", "/a", "/a/b"]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/", *("/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1))] if path != "/" else []


def _removed(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
    """What a deleting call removes: each record, map entry or list item its ids name (a path's children too)."""
    if answer.get("removed") in (0, False) or answer.get("deleted") in (0, False):
        return []
    changes: list[Change] = []
    for value in arguments.values():
        path = absolute(tracked.state, value) if isinstance(value, str) else None
        if path is not None or (isinstance(value, str) and value in needles_of(value, strict=True)):
            changes += _drop(tracked.state, path or value)
    return changes


def _drop(state: Any, value: str) -> list[Change]:
    """Remove everything `value` names from `state` (and under a path `value/...`)."""
    def named(item: Any, path: tuple) -> bool:
        if isinstance(item, str):
            return item == value or (value.startswith("/") and item.startswith(value.rstrip("/") + "/"))
        return isinstance(item, dict) and any(item.get(key) == value for key in own_id_keys(path))

    changes = []
    for path, node in list(walk(state)):
        if isinstance(node, dict):
            for key in [k for k in node if named(k, path)]:
                changes.append(Change("remove", path + (key,), node.pop(key)))
        elif isinstance(node, list):
            for index in reversed([i for i, item in enumerate(node) if named(item, path + (i,))]):
                changes.append(Change("remove", path + (index,), node.pop(index)))
    return changes


def _moved(tracked: EpisodeState, arguments: dict[str, Any]) -> list[Change]:
    """A moving call's source renamed to its destination (into it, where the destination is a folder that exists),
    map keys and list items alike, a path's children with it."""
    pair = next(((arguments[a], arguments[b]) for a, b in MOVE_PAIRS if isinstance(arguments.get(a), str)
                 and isinstance(arguments.get(b), str)), None)
    if pair is None:
        return []
    source, target = (absolute(tracked.state, end) or end.rstrip("/") or "/" for end in pair)
    leaves = {leaf for leaf in json_leaves(tracked.state, keys=True) if isinstance(leaf, str)}
    if target in leaves and target.startswith("/") and not any(k == target for k in _map_keys(tracked.state)):
        target = f"{target}/{source.rsplit('/', 1)[-1]}"

    def renamed(text: str) -> str | None:
        if text == source:
            return target
        if source.startswith("/") and text.startswith(source + "/"):
            return target + text[len(source):]
        return None

    changes = []
    for path, node in list(walk(tracked.state)):
        if isinstance(node, dict):
            for key in list(node):
                new = renamed(key) if isinstance(key, str) else None
                if new is not None:
                    node[new] = node.pop(key)
                    changes.append(Change("set", path + (new,), key, new))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                new = renamed(item) if isinstance(item, str) else None
                if new is not None:
                    node[index] = new
                    changes.append(Change("set", path + (index,), item, new))
    return changes


def _map_keys(state: Any) -> Iterator[str]:
    for _, node in walk(state):
        if isinstance(node, dict):
            yield from (key for key in node if isinstance(key, str))


def _counters(tracked: EpisodeState, changes: list[Change], answer: dict[str, Any]) -> list[Change]:
    """What a record's creation, closing or move takes from the records it refers to: a flight's `seats_left` drops
    by a new booking's count, comes back when the booking is cancelled, and moves with a booking changed to
    another flight."""
    moved: list[Change] = []
    for change in list(changes):
        if change.op == "add" and isinstance(change.after, dict):
            moved += _draw(tracked, change.after, change.after, answer, -1, plain=False)
        elif change.op == "set" and len(change.path) > 1:
            record = _live(tracked.state, change.path[:-1])
            if not isinstance(record, dict):
                continue
            if isinstance(change.after, str) and change.after in CLOSED_WORDS:
                moved += _draw(tracked, record, record, {}, +1, plain=True)
            elif isinstance(change.before, str) and isinstance(change.after, str):
                before = {**record, change.path[-1]: change.before}
                moved += _draw(tracked, before, record, {}, +1, plain=True, only=change.path[-1])
                moved += _draw(tracked, record, record, answer, -1, plain=True, only=change.path[-1])
    return moved


def _draw(tracked: EpisodeState, refers: dict[str, Any], counted: dict[str, Any], answer: dict[str, Any],
          sign: int, plain: bool, only: str | None = None) -> list[Change]:
    """Add `sign` x the count of `counted` to the counter field of each record `refers` names by its own id
    (`flight: NX721`), leaving out `refers` itself; `plain`: the record's one plain count (`passengers`) counts when
    nothing names the counter's topic (a booking closed or moved, not one just made)."""
    changes = []
    for key, value in refers.items():
        if (only is not None and key != only) or not isinstance(value, str) \
                or value not in needles_of(value, strict=True):
            continue  # a reference is an id-like value (`NX721`), never a status another record shares
        for path, node in walk(tracked.state):
            if not isinstance(node, dict) or node is counted or node.get(key) != value or key in ("id",) \
                    or set(node) == set(counted):  # a record of the same kind is no record it refers to
                continue
            if key not in own_id_keys(path) and words(key) != words(kind_of(path)):
                continue  # `node` refers to that value too; only the record it names (a flight's `flight`) counts
            for name, have in node.items():
                said = set(words(name))
                if not said & COUNTER_WORDS or not isinstance(have, int) or isinstance(have, bool):
                    continue
                count = _count(said - COUNTER_WORDS, counted, answer, plain)
                if count:
                    changes += _set(tracked, path, node, name, max(0, have + sign * count))
                    tracked.unsure.add(path + (name,))  # likely, not stated: no check holds an answer to it
    return changes


def _count(topic: set[str], record: dict[str, Any], answer: dict[str, Any], plain: bool) -> int | None:
    """How many of `topic` (`seats`) a record holds: the answer's number on that topic (`seats_confirmed`), else
    the record's, else (`plain`: what a closed record gives back) its one plain count (`passengers`)."""
    for source in (answer, record):
        hits = [v for k, v in source.items() if set(words(k)) & topic and isinstance(v, int) and not isinstance(v, bool)]
        if len(hits) == 1:
            return hits[0]
    counts = [v for k, v in record.items() if isinstance(v, int) and not isinstance(v, bool)
              and not set(words(k)) & UNIT_WORDS and 0 < v < 1000] if plain else []
    return counts[0] if len(counts) == 1 else None


def _charged(tracked: EpisodeState, path: tuple, record: dict[str, Any], answer: dict[str, Any],
             said: set[tuple]) -> list[Change]:
    """What a write on an existing record cost (`total_due_cents`) added to the record's running sum of what it
    paid (`paid_cents`), in the same unit, where the answer did not state that sum itself."""
    changes = []
    for name, have in list(record.items()):
        named = words(name)
        if path + (name,) in said or not set(named) & PAID_WORDS or not isinstance(have, (int, float)) \
                or isinstance(have, bool):
            continue
        due = [(("total" in words(k)), v) for k, v in answer.items() if set(words(k)) & DUE_WORDS
               and words(k)[-1:] == named[-1:] and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if due and (cost := max(due)[1]):
            changes += _set(tracked, path, record, name, have + cost)
    return changes


def new_ids(world: WorldSpec, state: Any, call: Call, schema: Any) -> dict[str, str]:
    """{field: id} for a write's answer fields that name the own id of a collection of records (`booking_id` for
    `bookings`) the call does not send: the id the record it makes gets, shaped like its siblings' (the next of
    `RF-70001`, `RF-70002`; a new `2EZVPE`-like six letters), the same for the same call and state."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not isinstance(call.arguments, dict):
        return {}
    sent = {value for value in json_leaves(call.arguments) if isinstance(value, str)}
    minted: dict[str, str] = {}
    for key, sub in properties.items():
        if key in ENVELOPE_FIELDS or not isinstance(sub, dict) or sub.get("type") not in ("string", None):
            continue
        for _, items, own in collections_keyed_by(state, key):
            ids = [item.get(own) for item in items if isinstance(item, dict) and isinstance(item.get(own), str)]
            if ids and not sent & set(ids):
                minted[key] = _next_id(ids, f"{call.name}:{sorted(call.arguments.items(), key=str)}:{len(ids)}")
            break
    return minted


def _next_id(ids: list[str], seed: str) -> str:
    """An id no record has, shaped like `ids`: the next number where they share a prefix and number their records
    (`RF-70002` after `RF-70001`), else the first id's letters and digits drawn afresh (case and length kept)."""
    numbered = [re.fullmatch(r"(.*?)(\d+)", value) for value in ids]
    if all(numbered) and len({m.group(1) for m in numbered}) == 1:
        width = max(len(m.group(2)) for m in numbered)
        return f"{numbered[0].group(1)}{max(int(m.group(2)) for m in numbered) + 1:0{width}d}"
    rng = random.Random(hashlib.sha256(seed.encode()).hexdigest())
    template, taken = ids[0], set(ids)
    prefix = re.match(r"^[A-Za-z]+[_-]", template)
    head = prefix.group(0) if prefix else ""
    for _ in range(20):
        body = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") if ch.isupper() else
                       rng.choice("abcdefghijklmnopqrstuvwxyz") if ch.islower() else
                       rng.choice("0123456789") if ch.isdigit() else ch for ch in template[len(head):])
        if head + body not in taken:
            return head + body
    return head + body


def _drawn_by_amount(tracked: EpisodeState, path: tuple, record: dict[str, Any], arguments: dict[str, Any],
                     answer: dict[str, Any], said: set[tuple]) -> list[Change]:
    """What is left after a write took an amount (`remaining: 13` after `units: 5`): the record's one number field
    the answer names by no key that the call's amount moves to that value (`credits` 18 -> 13), else its one
    quantity (a number of no unit: not cents, a price or an id)."""
    amounts = [v for v in arguments.values() if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    changes: list[Change] = []
    for key, value in answer.items():
        if not set(words(key)) & LEFT_WORDS or field_for(key, record, path) is not None \
                or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        numbers = {name: have for name, have in record.items() if path + (name,) not in said
                   and isinstance(have, (int, float)) and not isinstance(have, bool)}
        moved = [name for name, have in numbers.items()
                 if any(have - amount == value or have + amount == value for amount in amounts)]
        guessed = len(moved) != 1
        if guessed and amounts:  # else the record's one quantity (no unit: not cents, a price, an id)
            moved = [name for name, have in numbers.items() if not set(words(name)) & UNIT_WORDS]
        if len(moved) == 1:
            changes += _set(tracked, path, record, moved[0], value)
            if guessed:
                tracked.unsure.add(path + (moved[0],))  # likely, not stated: no check holds an answer to it
    return changes


def _roles_into(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
    """A transfer's two ends: `fromCredits` of the answer is the `credits` of the record `fromBrewbatchid` names,
    `toCredits` that of the record `toBrewbatchid` names."""
    changes: list[Change] = []
    for key, value in arguments.items():
        role = words(key)[:1]
        if not role or role[0] not in ROLE_WORDS or not isinstance(value, str):
            continue
        at = record_path(tracked.state, value)
        if at is None:
            continue
        path, record = at
        for said, told in answer.items():
            parts = words(said)
            if parts[:1] != role or len(parts) < 2 or isinstance(told, (dict, list)):
                continue
            name = field_for("_".join(parts[1:]), record, path)
            if name is not None and name not in own_id_keys(path) and type(record.get(name)) is type(told):
                changes += _set(tracked, path, record, name, told)
    return changes


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
            for key, enum in _enums(schema) if key in names for value in enum if isinstance(value, str)}


def _verb_state(verb: str, options: set[str]) -> str | None:
    """The status a verb leaves a record in: the one option formed from it (`suspend` -> `suspended`, `approve` ->
    `approved`, `cancel` -> `cancelled`); None when no option, or more than one, is."""
    stem = verb[:-1] if verb.endswith("e") else verb
    if len(stem) < 3:
        return None
    hits = [option for option in options if option.lower().startswith(stem.lower()) and option.lower() != verb]
    return hits[0] if len(hits) == 1 else None
