"""Records a write makes: an answer's id that no record has, under the key of a collection's own id (`booking_id`
for `bookings`), becomes a record shaped like its siblings (its fields from the answer and the call, the rest as
the siblings mostly hold them, guessed ones unsure); and the id a write's answer gives the record it makes, shaped
like its siblings' (`RF-70002` after `RF-70001`)."""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from wmstudio.world.episode.changes import Change, EpisodeState
from wmstudio.world.episode.counters import is_count
from wmstudio.world.episode.lookup import (
    ID_WORDS,
    RUNNING_WORDS,
    SECRET_WORDS,
    field_for,
    kind_of,
    status_values,
    walk,
    words,
)
from wmstudio.world.episode.paths import listed_paths
from wmstudio.world.records import ENVELOPE_FIELDS, json_leaves, needles_of, own_id_keys
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.linear_patterns import search

_NOTHING = object()


def created(tracked: EpisodeState, world: WorldSpec, call: Call, answer: dict[str, Any]) -> list[Change]:
    """The record a write created: the first id-like answer value no part of the state holds, under a key naming
    the own id of a collection's records (`booking_id` for `bookings`); one record a write (a sign-in's new session,
    not a new user from the user id it answers); a new path-like argument of a creating call joins a
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
        for path, entries in [] if changes else maps_keyed_by(state, key):
            record, guessed = _new_record(world, state, path, list(entries.values()), key, key, value, call, answer)
            record.pop(key, None)  # a map's entries hold their id as the key, not as a field
            entries[value] = record
            tracked.unsure |= {path + (value, name) for name in guessed}
            changes.append(Change("add", path + (value,), None, record))
            break
        if changes:
            break  # a write makes one record; its answer's other new ids name what it refers to
    if not changes and "created" in answer or set(words(call.name)) & {"mkdir", "create", "make", "add"}:
        changes += listed_paths(tracked, call.arguments, answer)
    return changes


def collections_keyed_by(state: Any, key: str) -> Iterator[tuple[tuple, list, str]]:
    """(path, the list, the records' own key) of each list of records whose own id an answer's `key` names:
    its items hold `key` itself as their own id (or first field), or `<kind>_<field>` names their field
    (`session_token` -> a session's `token`); an empty list whose kind is the key's (`refunds` for `refund_id`)."""
    said = words(key)
    for path, node in walk(state):
        if not isinstance(node, list) or not path or not isinstance(path[-1], str):
            continue
        kind = words(kind_of(path))
        records = [item for item in node if isinstance(item, dict)]
        if records and len(records) == len(node):
            if all(key in item for item in records) and (key in own_id_keys(path) or next(iter(records[0])) == key):
                yield path, node, key  # their own id (or first field): a voucher's `learner_id` names a learner
            elif kind and said[:len(kind)] == kind:
                rest = said[len(kind):]
                own = next((name for name in records[0] if words(name) == rest), None)
                if own is not None and len({str(item.get(own)) for item in records}) == len(records):
                    yield path, node, own
        elif not node and kind and said[:len(kind)] == kind and said[len(kind):] in (["id"], ["key"], ["token"]):
            yield path, node, key


def maps_keyed_by(state: Any, key: str) -> Iterator[tuple[tuple, dict]]:
    """(path, the map) of each map of records keyed by their ids whose kind an answer's `key` names with an id word
    (`vaccineLotId` for `vaccineLots: {"1092...": {...}}`): where a write's new record goes by its new id."""
    said = words(key)
    for path, node in walk(state):
        if not isinstance(node, dict) or not node or not path or not isinstance(path[-1], str):
            continue
        kind = words(kind_of(path))
        if kind and said[:len(kind)] == kind and said[len(kind):] in (["id"], ["key"]) \
                and all(isinstance(entry, dict) for entry in node.values()) \
                and all(value not in entry.values() for value, entry in node.items()):
            yield path, node


def _new_record(world: WorldSpec, state: Any, path: tuple, items: list, own: str, key: str, value: str,
                call: Call, answer: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """A created record: its own id, then each of its siblings' fields as the answer or the call states it, or as
    its siblings mostly hold it (a status), or neutral; with no sibling, the answer's ids and the call's values.
    With it, the fields nothing stated (guessed, so unsure)."""
    template = next((item for item in items if isinstance(item, dict)), None)
    arguments = {k: v for k, v in call.arguments.items() if not set(words(k)) & SECRET_WORDS}
    if template is None:
        own = _own_key_as_usual(state, path, own)
        made = {own: value}
        made.update({k: v for k, v in answer.items() if k not in ENVELOPE_FIELDS and k != key and isinstance(v, str)
                     and v in needles_of(v, strict=True)})
        made.update(_own_amounts(state, path, answer, made))
        made.update({k: v for k, v in arguments.items() if k not in made and not isinstance(v, bool)
                     and (isinstance(v, (int, float)) or (isinstance(v, str) and v in needles_of(v, strict=True)))})
        return made, set()
    made, used, guessed = {}, {key}, set()
    own_amounts = _own_amounts(state, path, answer, {})
    for name, example in template.items():
        if name == own:
            made[name] = value
            continue
        given = _stated(name, example, answer, path, used)
        if given is _NOTHING and is_count(own_amounts.get(name)) and _same_type(own_amounts[name], example):
            given = own_amounts[name]  # a refund's `amount_cents`, the answer's `amount_refunded_cents`
        if given is _NOTHING:
            given = _stated(name, example, arguments, path, used)
        if given is _NOTHING:
            given = _same_unit(name, example, answer, used)
            if given is not _NOTHING:
                guessed.add(name)  # likely (`charged_cents` for `paid_cents`), not stated
        if given is _NOTHING:
            given = _shown_part(example, answer, used)
            if given is not _NOTHING:
                guessed.add(name)  # likely (`prefix` the head of the new `api_key`), not stated
        if given is _NOTHING:
            given = _usual(items, name, example, status_values(world, state, path + (0,), name))
            guessed.add(name)
        made[name] = given
    return made, guessed


def _own_key_as_usual(state: Any, path: tuple, key: str) -> str:
    """The own-id key of the first record of the empty collection at `path`, as the state's other collections name
    theirs: plain `id` where that is their convention (two or more of them, and most, name it so: `charges`,
    `customers`), else the answer's `key` (`refund_id`)."""
    plain = kinded = 0
    for other, node in walk(state):
        if other == path or not isinstance(node, list) or not node or not all(isinstance(i, dict) for i in node):
            continue
        first = next(iter(node[0]), "")
        plain += first == "id"
        kinded += first != "id" and words(first)[-1:] == ["id"]
    return "id" if plain >= 2 and plain > kinded else key


def _own_amounts(state: Any, path: tuple, answer: dict[str, Any], made: dict[str, Any]) -> dict[str, Any]:
    """The numbers an answer states of the record it made, named as that record's own fields: `amount_refunded_cents`
    of a refund is its `amount_cents` (the words naming the record's kind dropped); a running total
    (`total_refunded_cents`) and a number of another collection's record (`charge_amount_cents`) are not its own."""
    stem = words(kind_of(path))[-1:] or [""]
    others = {tuple(words(kind_of(p))) for p, node in walk(state) if isinstance(node, list) and p and p != path
              and isinstance(p[-1], str)}
    found: dict[str, Any] = {}
    for key, value in answer.items():
        said = words(key)
        if key in ENVELOPE_FIELDS or not isinstance(value, (int, float)) or isinstance(value, bool) \
                or set(said) & RUNNING_WORDS or any(said[:len(kind)] == list(kind) for kind in others if kind):
            continue
        plain = [word for word in said if not (stem[0] and word.startswith(stem[0]))]
        name = "_".join(plain) if plain else key
        if name not in made and name not in found:
            found[name] = value
    return found


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


def _shown_part(example: Any, answer: dict[str, Any], used: set[str]) -> Any:
    """A field that shows the head of a secret (`prefix: pl_live_Q36O` of a key): the same length of the one answer
    value that starts as the sibling's does (`pl_live_`, up to its last `_` or `-`) and is longer."""
    if not isinstance(example, str):
        return _NOTHING
    cut = max(example.rfind("_"), example.rfind("-")) + 1
    if cut < 3:
        return _NOTHING
    hits = [value for key, value in answer.items() if key not in used and key not in ENVELOPE_FIELDS
            and isinstance(value, str) and len(value) > len(example) and value.startswith(example[:cut])]
    return hits[0][:len(example)] if len(hits) == 1 else _NOTHING


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


def new_ids(world: WorldSpec, state: Any, call: Call, schema: Any, taken: Any = ()) -> dict[str, str]:
    """{field: id} for a write's answer fields that name the own id of a collection of records (`booking_id` for
    `bookings`) the call does not send: the id the record it makes gets, shaped like its siblings' (the next of
    `RF-70001`, `RF-70002`; a new `2EZVPE`-like six letters), the same for the same call and state. Not the fields
    in `taken` (the record copy's: a sign-in answers its account's `student_id`, no new student's)."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not isinstance(call.arguments, dict):
        return {}
    sent = {value for value in json_leaves(call.arguments) if isinstance(value, str)}
    minted: dict[str, str] = {}
    for key, sub in properties.items():
        if key in ENVELOPE_FIELDS or key in taken or not isinstance(sub, dict) \
                or sub.get("type") not in ("string", None):
            continue
        for _, items, own in collections_keyed_by(state, key):
            ids = [item.get(own) for item in items if isinstance(item, dict) and isinstance(item.get(own), str)]
            if ids and not sent & set(ids):
                minted[key] = _next_id(ids, f"{call.name}:{sorted(call.arguments.items(), key=str)}:{len(ids)}",
                                       sub.get("pattern"))
            break
    return minted


def _next_id(ids: list[str], seed: str, pattern: Any = None) -> str:
    """An id no record has, shaped like `ids`: the next number where they share a prefix and number their records
    (`RF-70002` after `RF-70001`) and it keeps their length, else the first id's characters drawn afresh from the
    alphabet the ids use (hex stays hex; case and length kept); one the field's `pattern` admits where it has one."""
    numbered = [re.fullmatch(r"(.*?)(\d+)", value) for value in ids]
    if all(numbered) and len({m.group(1) for m in numbered}) == 1:
        width = max(len(m.group(2)) for m in numbered)
        following = f"{numbered[0].group(1)}{max(int(m.group(2)) for m in numbered) + 1:0{width}d}"
        if len(following) == len(ids[0]) and _admitted(pattern, following):
            return following
    rng = random.Random(hashlib.sha256(seed.encode()).hexdigest())
    template, taken = ids[0], set(ids)
    prefix = re.match(r"^[A-Za-z]+[_-]", template)
    head = prefix.group(0) if prefix else ""
    body_chars = {ch for value in ids for ch in value[len(head):] if ch.isalnum()}
    hexadecimal = body_chars <= set("0123456789abcdef") or body_chars <= set("0123456789ABCDEF")
    made = template
    for _ in range(20):
        made = head + "".join(_drawn_like(ch, rng, hexadecimal) for ch in template[len(head):])
        if made not in taken and _admitted(pattern, made):
            return made
    return made


def _drawn_like(ch: str, rng: random.Random, hexadecimal: bool) -> str:
    """A character of the same class as `ch` (a hex digit where the ids are hex); punctuation kept."""
    if hexadecimal and ch.isalnum():
        return rng.choice("0123456789abcdef" if not ch.isupper() else "0123456789ABCDEF")
    if ch.isupper():
        return rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if ch.islower():
        return rng.choice("abcdefghijklmnopqrstuvwxyz")
    return rng.choice("0123456789") if ch.isdigit() else ch


def _admitted(pattern: Any, value: str) -> bool:
    """Whether a schema's `pattern` admits `value` (no pattern, or one RE2 cannot run, admits it)."""
    return not isinstance(pattern, str) or search(pattern, value) is not False
