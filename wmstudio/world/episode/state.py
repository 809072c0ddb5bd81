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
from collections.abc import Sequence
from typing import Any

from wmstudio.world.episode.changes import Change, EpisodeState, set_field
from wmstudio.world.episode.counters import charged, claimed_left_keys, counters, drawn_by_amount, drawn_by_rule
from wmstudio.world.episode.lookup import (
    CREATE_VERBS,
    DELETE_VERBS,
    MOVE_VERBS,
    RUNNING_WORDS,
    SECRET_WORDS,
    SET_VERBS,
    SHELL_READS,
    field_for,
    kind_of,
    named_records,
    record_path,
    status_values,
    words,
)
from wmstudio.world.episode.made import created
from wmstudio.world.episode.paths import moved, removed
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import ENVELOPE_FIELDS, own_id_keys
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only

FAILED_WORDS = frozenset({"failed", "failure", "skipped", "rejected", "invalid", "missing", "unknown"})
ROLE_WORDS = frozenset({"from", "to", "source", "target", "src", "dst", "origin", "destination"})


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
        return removed(tracked, call.arguments, answer)
    changes = moved(tracked, call.arguments) if not reads and verbs & MOVE_VERBS else []
    if not reads:
        changes += roles_into(tracked, call.arguments, answer)
    failed = {value for key, items in answer.items() if set(words(key)) & FAILED_WORDS and isinstance(items, list)
              for value in items if isinstance(value, str)}
    made = created(tracked, world, call, answer) if not reads else []
    named = named_records(state, call.arguments)
    ends = {key: value for key, value in answer.items() if not _role_of(key, call.arguments)}  # not a transfer's end
    claimed = claimed_left_keys(named, call.arguments, ends) if not reads else {}
    for path, record in named:
        if record.get("id") in failed or any(record.get(k) in failed for k in own_id_keys(path)):
            continue
        if (made or verbs & CREATE_VERBS) and not set(words(kind_of(path))) <= verbs:
            continue  # `new_test(accession_id, curator_id)`: what it sends describes the test it made, not these
        said, stated = _answer_into(tracked, world, path, record, answer)
        changes += said
        if not reads:
            changes += _arguments_into(tracked, path, record, call.arguments, verbs, stated)
            changes += charged(tracked, path, record, answer, stated | {c.path for c in changes})
            changes += drawn_by_amount(tracked, path, record, call.arguments, ends,
                                       stated | {c.path for c in changes}, claimed)
            sure = stated | {c.path for c in changes}
            tracked.unsure |= {path + (key,) for key in record if path + (key,) not in sure
                               and key not in own_id_keys(path)}
    if not reads:
        changes += made
        changes += counters(tracked, changes, answer)
        changes += drawn_by_rule(tracked, world, call, answer)
    return changes


def _answer_into(tracked: EpisodeState, world: WorldSpec, path: tuple, record: dict[str, Any],
                 answer: dict[str, Any]) -> tuple[list[Change], set[tuple]]:
    """The named record's fields the answer states (its own ids aside): the changes, and the paths of every field
    it stated, changed or not (an argument of the same name then sets nothing: `amount_cents` of a refund is not
    the charge's once the answer said the charge's amount)."""
    changes: list[Change] = []
    stated: set[tuple] = set()
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
        changes += set_field(tracked, path, record, name, value)
        stated.add(path + (name,))
    return changes, stated


def _status_word(tracked: EpisodeState, world: WorldSpec, path: tuple, record: dict[str, Any],
                 key: str) -> list[Change]:
    """`cancelled: true` sets the record's status-like field to "cancelled" where that is one of its values."""
    word = "_".join(words(key))
    for name, value in record.items():
        if isinstance(value, str) and value != word and word in status_values(world, tracked.state, path, name):
            return set_field(tracked, path, record, name, word)
    return []


def _arguments_into(tracked: EpisodeState, path: tuple, record: dict[str, Any], arguments: dict[str, Any],
                    verbs: set[str], said: set[tuple]) -> list[Change]:
    """The fields a write's own arguments set: `new_flight` the flight, `tag` one more of `tags`; a number only
    where the tool sets fields (`update_price`) or the key says so (`new_limit`): `refund_charge(amount_cents)` moves
    an amount, it does not set the charge's."""
    changes: list[Change] = []
    ids = set(own_id_keys(path))
    held = {value for value in record.values() if isinstance(value, str)}
    for key, value in arguments.items():
        if isinstance(value, (dict, list)) or (isinstance(value, str) and value in held) \
                or set(words(key)) & SECRET_WORDS:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not verbs & SET_VERBS \
                and not set(words(key)) & RUNNING_WORDS:
            continue
        name = field_for(key, record, path)
        if name is not None and name not in ids and path + (name,) not in said \
                and not isinstance(record.get(name), (dict, list)) and type(record.get(name)) is type(value):
            changes += set_field(tracked, path, record, name, value)
        plural = next((n for n in (f"{key}s", f"{key}es") if isinstance(record.get(n), list)), None)
        if plural is not None and value not in record[plural] and path + (plural,) not in said:
            before = list(record[plural])
            record[plural].append(value)
            tracked.unsure.discard(path + (plural,))
            changes.append(Change("set", path + (plural,), before, list(record[plural])))
    return changes


def _role_of(key: str, arguments: dict[str, Any]) -> bool:
    """Whether an answer's `key` speaks of one end of a transfer the call names (`fromDosesLeft` beside
    `fromContainerid`): roles_into sets it on that end's record, never on another."""
    role = words(key)[:1]
    return bool(role) and role[0] in ROLE_WORDS and any(words(name)[:1] == role for name in arguments)


def roles_into(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
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
                changes += set_field(tracked, path, record, name, told)
    return changes
