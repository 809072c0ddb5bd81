"""Quantities a write moves that its answer may not state: a flight's `seats_left` drawn down by a new booking and
given back when it is cancelled or moved, a booking's `paid_cents` raised by what a change cost, what is left of a
record after a call took an amount (`remaining: 13`), a balance a rule holds a refund against drawn down by it.
Likely, not stated: each is unsure where it was guessed."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.episode.changes import Change, EpisodeState, node_at, set_field
from wmstudio.world.episode.lookup import field_for, kind_of, walk, words
from wmstudio.world.records import needles_of, own_id_keys
from wmstudio.world.rules.cel import rule_tools
from wmstudio.world.spec import Call, WorldSpec

COUNTER_WORDS = frozenset({"left", "available", "remaining", "free", "open", "unsold"})  # `seats_left` is drawn down
CLOSED_WORDS = frozenset({"cancelled", "canceled", "voided", "void", "refunded", "released", "closed"})
LEFT_WORDS = frozenset({"remaining", "left", "available", "balance", "stock", "now", "after", "current", "new"})
PAID_WORDS = frozenset({"paid", "spent", "billed"})  # a record's running sum of what it cost
DUE_WORDS = frozenset({"due", "charged", "billed", "owed"})  # what one write cost
UNIT_WORDS = frozenset({"cents", "cent", "amount", "price", "total", "fee", "id", "usd", "eur"})
HELD_AGAINST = re.compile(r"call\.arguments\.(\w+)\s*>\s*state\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")


def counters(tracked: EpisodeState, changes: list[Change], answer: dict[str, Any]) -> list[Change]:
    """What a record's creation, closing or move takes from the records it refers to: a flight's `seats_left` drops
    by a new booking's count, comes back when the booking is cancelled, and moves with a booking changed to
    another flight."""
    moved: list[Change] = []
    for change in list(changes):
        if change.op == "add" and isinstance(change.after, dict):
            moved += _draw(tracked, change.after, change.after, answer, -1, plain=False)
        elif change.op == "set" and len(change.path) > 1:
            record = node_at(tracked.state, change.path[:-1])
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
                    changes += set_field(tracked, path, node, name, max(0, have + sign * count))
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


def charged(tracked: EpisodeState, path: tuple, record: dict[str, Any], answer: dict[str, Any],
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
            changes += set_field(tracked, path, record, name, have + cost)
    return changes


def drawn_by_amount(tracked: EpisodeState, path: tuple, record: dict[str, Any], arguments: dict[str, Any],
                     answer: dict[str, Any], said: set[tuple], claimed: dict[str, int] | None = None) -> list[Change]:
    """What is left after a write took an amount (`remaining: 13` after `units: 5`): the record's number field the
    key names, left-words aside (`creditsRemaining` -> `credits`, `capacity_left_remaining` -> `capacity_left`), else
    its one number field that the call's amount moves to that value (`credits` 18 -> 13), else its one quantity (a
    number of no unit: not cents, a price or an id); of the records a call names, only those that hold the key the
    surest way (`claimed`: by name, then by the amount, then by a guess) take it."""
    changes: list[Change] = []
    for key, value in answer.items():
        moved, sure = _left_field(path, record, key, value, arguments, said)
        if len(moved) == 1 and sure >= (claimed or {}).get(key, sure):
            changes += set_field(tracked, path, record, moved[0], value)
            if sure == GUESSED:
                tracked.unsure.add(path + (moved[0],))  # likely, not stated: no check holds an answer to it
    return changes


GUESSED, BY_AMOUNT, BY_NAME = 1, 2, 3  # how surely a what-is-left key names a record's field


def claimed_left_keys(named: list[tuple[tuple, dict[str, Any]]], arguments: dict[str, Any],
                      answer: dict[str, Any]) -> dict[str, int]:
    """How surely the records a call names hold each of the answer's what-is-left keys, at best (`capacity_left_remaining`
    held by name by the fixture: the player it also names does not take it as its one quantity)."""
    best: dict[str, int] = {}
    for key, value in answer.items():
        for path, record in named:
            moved, sure = _left_field(path, record, key, value, arguments, set())
            if len(moved) == 1:
                best[key] = max(best.get(key, 0), sure)
    return best


def _left_field(path: tuple, record: dict[str, Any], key: str, value: Any, arguments: dict[str, Any],
                said: set[tuple]) -> tuple[list[str], int]:
    """The record's fields an answer's what-is-left `key` may set (one, or it sets none), and how surely."""
    if not set(words(key)) & LEFT_WORDS or field_for(key, record, path) is not None or not is_count(value):
        return [], 0
    amounts = [v for v in arguments.values() if is_count(v) and v > 0]
    numbers = {name: have for name, have in record.items() if path + (name,) not in said and is_count(have)}
    rest = [w for w in words(key) if w not in LEFT_WORDS]
    named = [name for name in numbers if rest and [w for w in words(name) if w not in LEFT_WORDS] == rest]
    if len(named) == 1:
        return named, BY_NAME
    moved = [name for name, have in numbers.items() if any(have - amount == value or have + amount == value
                                                           for amount in amounts)]
    if len(moved) == 1:
        return moved, BY_AMOUNT
    if amounts:  # else the record's one quantity (no unit: not cents, a price, an id)
        return [name for name in numbers if not set(words(name)) & UNIT_WORDS], GUESSED
    return [], 0


def drawn_by_rule(tracked: EpisodeState, world: WorldSpec, call: Call, answer: dict[str, Any]) -> list[Change]:
    """A quantity of the state a rule holds the write's amount against (`call.arguments.amount_cents >
    state.balance.available_cents`, the cause of an `INSUFFICIENT_BALANCE`) is drawn down by what the ok write
    moved: the answer's amount in the argument's unit named for what the tool does (`amount_refunded_cents`), else
    the argument's. Likely, not stated: unsure."""
    changes: list[Change] = []
    done: set[str] = set()
    for rule in world.rules:
        if call.name not in (rule_tools(rule) or ()):
            continue
        for argument, target in HELD_AGAINST.findall(rule.check or ""):
            parts = tuple(target.split("."))
            holder = node_at(tracked.state, parts[:-1])
            have = holder.get(parts[-1]) if isinstance(holder, dict) else None
            moved = _moved(call, argument, answer)
            if target in done or not is_count(have) or not moved:
                continue
            done.add(target)
            changes += set_field(tracked, parts[:-1], holder, parts[-1], have - moved)
            tracked.unsure.add(parts)
    return changes


def _moved(call: Call, argument: str, answer: dict[str, Any]) -> int | float | None:
    """What an ok write moved of `argument`'s quantity: the answer's number in its unit whose name says what the
    tool does (`amount_refunded_cents` for `refund_charge`; not a running total), else the argument itself."""
    unit = words(argument)[-1:]
    acts = tool_acts(call)
    said = [value for key, value in answer.items() if is_count(value) and names_the_move(key, unit, acts)]
    if len(said) == 1:
        return said[0]
    sent = call.arguments.get(argument) if isinstance(call.arguments, dict) else None
    return sent if is_count(sent) else None


def tool_acts(call: Call) -> list[str]:
    """What a tool does: the words of its name that name no record the call names by an argument (`refund` of
    `refund_charge(charge_id)`)."""
    named = {word for key in (call.arguments if isinstance(call.arguments, dict) else {}) for word in words(key)}
    return [verb for verb in words(call.name) if len(verb) > 2 and verb not in named]


def names_the_move(key: str, unit: list[str], acts: list[str]) -> bool:
    """Whether an answer's `key` names the amount a write moved, in `unit`, by what the tool does (`acts`, its verbs):
    `amount_refunded_cents` for `refund`; not a running total or what is left."""
    said = words(key)
    return said[-1:] == unit and not set(said) & {"total", "left", "remaining", "balance"} \
        and any(word.startswith(verb) for word in said for verb in acts)


def is_count(value: Any) -> bool:
    """A JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
