"""Answers in plain text: a tool whose response schema is a string is answered with a sentence or a value, written
before denoising, never JSON-like noise. The text comes from what the world says: the same tool's earlier answer in
the history with this call's values in place of that call's; for a read, the field its name asks for of the record
the call names (`get_customer_name(customer_id)` -> the customer's `name`); for an id no record holds, the
world's not-found error in its own style (`Error: customer C9 not found`); for a write, a sentence of its verb,
its object and the record it acts on (`Line suspended for customer C1001.`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from wmstudio.model.canvas.layout import Holds
from wmstudio.model.heads.record_copy import RecordCopy
from wmstudio.world.episode.lookup import argument_ids, kind_of, named_records, walk, words
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import READ_VERBS, read_only

ERROR_PREFIX = "Error: "  # how an error answered in text opens, unless the world's own earlier errors say otherwise
ERROR_STYLE = re.compile(r"^\s*(error\s*[:\-]\s*)", re.IGNORECASE)


def text_answer(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
                state: Any) -> RecordCopy | None:
    """The text a string-answering tool gives, laid out as the canvas's one value; None when the answer is no plain
    string (an object, an enum) or nothing the world says gives it."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    if tool is None or not isinstance(schema, dict) or schema.get("type") != "string" or schema.get("enum") \
            or not isinstance(call.arguments, dict):
        return None
    text = _as_before(call, history)
    if text is None and isinstance(state, dict):
        found = named_records(state, call.arguments)
        if not found:
            text = _not_found(call, history, state)
        elif read_only(tool):
            text = _field_text(call, found[0][0], found[0][1])
        else:
            text = _done_sentence(call, found[0][0])
    if not text:
        return None
    return RecordCopy(Holds(text), {"": text}, [], 0)


def _as_before(call: Call, history: Sequence[HistoryStep]) -> str | None:
    """The newest earlier ok text answer of the same tool, its call's values swapped for this call's."""
    for step in reversed(history):
        if step.call.name != call.name or not isinstance(step.call.arguments, dict):
            continue
        answer = step.response_value()
        if not isinstance(answer, str) or ERROR_STYLE.match(answer):
            continue
        text = answer
        for key, before in step.call.arguments.items():
            now = call.arguments.get(key)
            if isinstance(before, (str, int, float)) and not isinstance(before, bool) and str(before) \
                    and now is not None and not isinstance(now, (dict, list)):
                text = text.replace(str(before), str(now))
        return text
    return None


def _field_text(call: Call, path: tuple, record: dict[str, Any]) -> str | None:
    """The field a read's name asks for (`get_customer_name` -> `name`, `check_balance` -> `balance_cents`) of the
    named record, as text; None when its name asks for no one field."""
    kind = set(words(kind_of(path)))
    asked = [word for word in words(call.name) if word not in READ_VERBS and word not in kind]
    if not asked:
        return None
    hits = [name for name in record if words(name)[:len(asked)] == asked or words(name) == asked]
    if len(hits) != 1:
        return None
    value = record[hits[0]]
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _not_found(call: Call, history: Sequence[HistoryStep], state: dict[str, Any]) -> str | None:
    """The not-found error for the first id the call sends, where the state keeps records of the kind its key
    names (`customer_id` -> `customers`), in the style of the world's earlier text errors."""
    kinds = {kind_of(path) for path, node in walk(state) if isinstance(node, (list, dict)) and path
             and isinstance(path[-1], str)}
    for key, value in call.arguments.items():
        said = words(key)
        kind = "_".join(said[:-1]) if said[-1:] == ["id"] else ""
        if kind and kind in kinds and value in set(argument_ids({key: value})):
            return f"{_error_prefix(history)}{kind.replace('_', ' ')} {value} not found"
    return None


def _error_prefix(history: Sequence[HistoryStep]) -> str:
    """How the world's earlier text errors open (`Error: `, `ERROR - `), else ERROR_PREFIX."""
    for step in reversed(history):
        answer = step.response_value()
        match = ERROR_STYLE.match(answer) if isinstance(answer, str) else None
        if match:
            return match.group(1)
    return ERROR_PREFIX


def _done_sentence(call: Call, path: tuple) -> str | None:
    """A write's confirmation: its object and verb made past (`suspend_line` -> `Line suspended`) for the record it
    acts on (`for customer C1001`)."""
    verb, *rest = words(call.name) or [""]
    if len(verb) < 3 or not rest:
        return None
    ids = list(argument_ids(call.arguments))
    kind = kind_of(path).replace("_", " ")
    subject = " ".join(rest)
    where = f" for {kind} {ids[0]}" if ids and kind and kind not in subject else f" {ids[0]}" if ids else ""
    return f"{subject[0].upper()}{subject[1:]} {_past(verb)}{where}."


def _past(verb: str) -> str:
    """A regular verb's past participle (`suspend` -> `suspended`, `cancel` -> `cancelled`, `apply` -> `applied`)."""
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ied"
    if verb in ("cancel", "travel", "label", "model"):
        return verb + "led"
    if re.search(r"[^aeiou][aeiou][bdgmnpt]$", verb) and len(verb) <= 4:
        return verb + verb[-1] + "ed"
    return verb + "ed"
