"""What an ok answer to a write states of the record it acts on, before the model writes a token: the status the
write moves it to (the tool's own `done -> aborted`, else the status its verb forms), the record's text fields
the call does not set, what is left of a quantity the write draws (`remaining` of `credits` less `units` x the
world's stated rate), a running total it raises (`total_refunded_cents`), and the moment it happened (`processed_at`
is the state's `now`). Generation writes these, as echo++ does."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.episode.counters import COUNTER_WORDS, PAID_WORDS, is_count, names_the_move, tool_acts
from wmstudio.world.episode.counters import LEFT_WORDS as LEFT_AFTER
from wmstudio.world.episode.lookup import (
    DELETE_VERBS,
    MOVE_VERBS,
    SET_VERBS,
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
LEFT_WORDS = frozenset({"remaining", "left", "available"})  # `remaining`, `creditsLeft`: what a draw leaves
MOVING_WORDS = LEFT_WORDS | COUNTER_WORDS | LEFT_AFTER | PAID_WORDS | {"total", "count", "balance", "refunded", "used",
                                                                      "spent", "sold", "booked", "visits", "uses"}
NOW_WORDS = frozenset({"now", "today", "current", "clock", "as"})  # the state's key for the present moment
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
REST_DEFAULT = re.compile(r"defaults? to (?:what is left|the rest|the remainder|the remaining|all that is left)")


def write_values(world: WorldSpec, state: Any, call: Call, schema: Any) -> dict[str, Any]:
    """{response field: value} that an ok answer to a write states of the record it acts on, as that record is once
    written: the status it moves to (the tool's own words, `done -> aborted`, else the status formed from its verb,
    `suspend` -> `suspended`), the record's text fields the call does not set (its name stays its name) and the
    numbers the answer names by the record's kind (`order_total_cents`) or by its own key (`priceCents`; not a
    quantity that moves: `seats_left`, `refunded_cents`) where the tool sets no field, what a
    draw leaves and a running total; and for every write the moment it happened. Empty for a read."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    tool = next((t for t in world.tools if t.name == call.name), None)
    verbs = words(call.name)
    if not isinstance(properties, dict) or tool is None or read_only(tool) or not isinstance(call.arguments, dict) \
            or not isinstance(state, dict):
        return {}
    values = _stamped_now(state, call, properties)
    found = named_records(state, call.arguments)
    if set(verbs) & (DELETE_VERBS | MOVE_VERBS) or not found or not set(words(kind_of(found[0][0]))) <= set(verbs):
        return values  # `submit_hut(hut_id)` acts on the hut it names; `submit_claim(policy_id)` makes a claim
    path, record = found[0]
    sent = {field_for(key, record, path) for key in call.arguments}
    target = TRANSITION.search(tool.description or "")
    kind = words(kind_of(path))
    values.update(_amounts_after(world, tool, call, path, record, properties))
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
        elif is_count(current) and key not in values and not set(verbs) & SET_VERBS \
                and (words(key)[:len(kind)] == kind and len(words(key)) > 1
                     or key == name and not set(words(name)) & MOVING_WORDS):
            values[key] = current  # `order_total_cents`, `priceCents`: what a refund or a start does not set
    return values


def _stamped_now(state: dict[str, Any], call: Call, properties: dict[str, Any]) -> dict[str, Any]:
    """A write's answer fields saying when it happened (`processed_at`, `recordedAt`: a past participle and `at`)
    that the call does not send: the state's present moment (`now`)."""
    now = next((value for key, value in state.items() if set(words(key)) & NOW_WORDS and isinstance(value, str)
                and DATE.match(value)), None)
    if now is None:
        return {}
    return {key: now for key, sub in properties.items() if key not in call.arguments and isinstance(sub, dict)
            and sub.get("type") in ("string", None) and len(said := words(key)) == 2 and said[1] == "at"
            and said[0].endswith("ed") and said[0] not in ("expired", "scheduled")}


def _amounts_after(world: WorldSpec, tool: Any, call: Call, path: tuple, record: dict[str, Any],
                   properties: dict[str, Any]) -> dict[str, Any]:
    """What is left of the quantity a write draws (`remaining`: the record's `credits` less the call's `units` x
    the rate the world states, "uses 3 credits per unit"), a running total it raises (`total_refunded_cents`: the
    record's `refunded_cents` plus the call's `amount_cents`, or, with no amount where the tool says it "defaults to
    what is left", the whole `amount_cents`) and the amount it moved (`amount_refunded_cents`), read on the state
    the episode has reached."""
    amounts = {key: value for key, value in call.arguments.items() if is_count(value) and value > 0}
    text = " ".join([tool.description or "", *(rule.text for rule in world.rules if call.name in rule.text)])
    text = re.sub(r"[_\s]+", " ", text.lower())
    acts = [verb for verb in tool_acts(call) if verb not in words(kind_of(path))]  # `refund`
    values: dict[str, Any] = {}
    for key, sub in properties.items():
        if key in ENVELOPE_FIELDS or not isinstance(sub, dict) or sub.get("type") not in ("integer", "number"):
            continue
        said = words(key)
        if set(said) & LEFT_WORDS and len(amounts) == 1:
            counter = _counter(record, [w for w in said if w not in LEFT_WORDS], text)
            (argument, amount), = amounts.items()
            if counter is not None:
                left = record[counter] - amount * _rate(text, argument, counter)
                if left >= 0:
                    values[key] = left
        elif "total" in said:
            name = field_for(key, record, path)
            if name is None or "total" in words(name) or not is_count(record.get(name)):
                continue
            moved = [value for k, value in amounts.items() if words(k)[-1:] == said[-1:]]
            whole = [field for field, value in record.items() if field != name and is_count(value)
                     and words(field)[-1:] == said[-1:] and "total" not in words(field) or field == "total" + said[-1]]
            if not moved and len(whole) == 1 and REST_DEFAULT.search(text) and _optional_amount(tool, said[-1]):
                moved = [record[whole[0]] - record[name]]  # "amount defaults to what is left"
            if len(moved) == 1 and moved[0] > 0:
                values[key] = record[name] + moved[0]
                values.update({other: moved[0] for other, spec in properties.items() if other != key
                               and isinstance(spec, dict) and spec.get("type") in ("integer", "number")
                               and names_the_move(other, said[-1:], acts)})
    return values


def _optional_amount(tool: Any, unit: str) -> bool:
    """Whether the tool takes an amount in `unit` that a call may leave out."""
    parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
    required = set(parameters.get("required") or [])
    return any(words(name)[-1:] == [unit] and name not in required
               for name in (parameters.get("properties") or {}))


def _counter(record: dict[str, Any], named: list[str], text: str) -> str | None:
    """The record's quantity a draw takes from: the one its answer's key names (`creditsLeft` -> `credits`), else
    the one number field the tool's description and rules name ("must not exceed quantity on hand")."""
    counts = [name for name, value in record.items() if is_count(value)]
    hit = [name for name in counts if named and words(name) == named]
    if not hit:
        hit = [name for name in counts if re.search(rf"\b{' '.join(words(name))}\b", text)]
    return hit[0] if len(hit) == 1 else None


def _rate(text: str, argument: str, counter: str) -> int:
    """How many of `counter` one unit of `argument` takes, as the world states it ("units x 3", "3 credits per
    unit"); 1 when it does not say."""
    named, held = " ".join(words(argument)), " ".join(words(counter))
    for pattern in (rf"\b{named}\s*(?:×|\*|x)\s*(\d+)", rf"(\d+)\s+{held}\s+(?:per|a|each)\b"):
        found = re.search(pattern, text)
        if found:
            return int(found.group(1))
    return 1


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
