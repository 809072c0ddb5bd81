"""What an answer makes up, found with no rule written: records a read-only answer lists that nothing holds, fields
of a lookup that contradict the record it names, and text that stutters.

- A read-only call (a tool marked `readOnlyHint`, or named get/list/search/find/lookup/read/show/fetch/query...)
  answers with what exists: an id in one of its listings (an array of records or of ids) that neither the call, the
  state nor the history holds is invented.
- A successful read-only lookup of a record the state holds, which no earlier step touched, answers that record: a
  top-level field of the same name with another value contradicts it.
- A text value that repeats a word, or a run of words, right after itself ("after after", "on_status_on_status")
  stutters.
Each line names the field (`orders[2].order_id`) and what is wrong; the simulators' own answers raise none."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from wmstudio.world.episode.lookup import field_for, named_records, record_path
from wmstudio.world.episode.state import episode_state
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import ENVELOPE_FIELDS, json_leaves, matches, understood
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool
from wmstudio.world.tools.reading import read_only

ID_KEY = re.compile(r"(^|_)(id|ids|key|code|number|sku)$", re.IGNORECASE)
ID_VALUE = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_\-:.]{2,}$")
MAX_LINES = 5


def invention_lines(world: WorldSpec, call: Call, tool: Tool, response: Any,
                    history: Sequence[HistoryStep] = ()) -> list[str]:
    """The check's lines: invented listing entries, contradicted lookup fields, stuttering text (at most MAX_LINES
    of each kind)."""
    lines: list[str] = []
    if read_only(tool):
        held = _held_words([call.arguments, world.initial_state,
                            *([step.call.arguments, step.response_value()] for step in history)])
        lines += invented_entries(response, held)[:MAX_LINES]
        lines += contradicted_fields(world, call, response, history)[:MAX_LINES]
        lines += listing_slips(call, response)[:MAX_LINES]
    lines += stutters(response)[:MAX_LINES]
    return lines


def invented_entries(response: Any, held: set[str]) -> list[str]:
    """`path: value` of each id in a listing of `response` that `held` (the call's, the state's and the history's
    words) lacks."""
    found = []
    for path, items in _listings(response, ""):
        for i, item in enumerate(items):
            values = item.items() if isinstance(item, dict) else [("", item)]
            for key, value in values:
                is_id = (ID_KEY.search(key) if key else True) and isinstance(value, str) and ID_VALUE.match(value)
                if is_id and value.lower() not in held:
                    where = f"{path}[{i}].{key}" if key else f"{path}[{i}]"
                    found.append(f"{where}: lists {value}, which neither the state nor the history holds (a "
                                 "read-only answer lists only what exists)")
    return found


def contradicted_fields(world: WorldSpec, call: Call, response: Any, history: Sequence[HistoryStep]) -> list[str]:
    """`field` of each top-level value of a successful lookup that differs from the field it names (by key, or
    `<kind>_<key>`: `order_status` for an order's `status`) of the record the call names, as the episode left it
    (world/episode/): the initial record, each earlier answer about it and each earlier write's effect. A
    field a write may have changed without saying how is not held against the answer."""
    if not isinstance(response, dict) or response.get("status") not in (None, "ok") or response.get("error"):
        return []
    tracked = episode_state(world, history) if history else None
    state = tracked.state if tracked is not None else world.initial_state
    found = named_records(state, call.arguments) if isinstance(call.arguments, dict) else []
    if not found:
        return []
    path, record = _described(response, found[0], state)
    lines = []
    for key, value in response.items():
        name = field_for(key, record, path) if key not in ENVELOPE_FIELDS else None
        if name is None or (tracked is not None and not tracked.is_sure(path + (name,))):
            continue
        known = record.get(name)
        if _scalar(known) and _scalar(value) and value != known and not _same_number(value, known):
            changed = tracked is not None and any(change.path == path + (name,) for step in tracked.steps
                                                  for change in step)
            why = "the history changed it to" if changed else "the record the call names holds"
            where = f" ({name})" if name != key else ""
            lines.append(f"{key}: {value!r}, but {why} {known!r}{where} (a lookup answers the record as it is)")
    return lines


def _described(response: dict[str, Any], named: tuple[tuple, dict[str, Any]], state: Any
               ) -> tuple[tuple, dict[str, Any]]:
    """The record a lookup's answer describes: the one the call names, or one whose own id the answer holds that
    shares more of the answer's fields (a customer found by the phone of one of their lines)."""
    def shared(found: tuple[tuple, dict[str, Any]]) -> int:
        return sum(field_for(key, found[1], found[0]) is not None for key in response if key not in ENVELOPE_FIELDS)

    others = [found for value in response.values() if isinstance(value, str) and value
              and (found := record_path(state, value)) is not None and found[0] != named[0]]
    return max([named, *others], key=shared)


def listing_slips(call: Call, response: Any) -> list[str]:
    """`path` of each record a successful read-only listing holds twice (the same own id), and of each that fails a
    filter the call sent on a field the records hold (`status: "shipped"` listing a delivered order)."""
    if not isinstance(response, dict) or response.get("status") not in (None, "ok") or response.get("error"):
        return []
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    found = []
    for key, items in response.items():
        records = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
        if not records or len(records) != len(items):
            continue
        seen: dict[Any, int] = {}
        for index, record in enumerate(records):
            own = next(((name, value) for name, value in record.items() if ID_KEY.search(name)
                        and isinstance(value, (str, int)) and not isinstance(value, bool)), None)
            if own is not None and own in seen:
                found.append(f"{key}[{index}].{own[0]}: lists {own[1]} again (as {key}[{seen[own]}]; a listing holds "
                             "each record once)")
            elif own is not None:
                seen[own] = index
            if arguments and understood(arguments, [record]) and not matches(record, arguments):
                found.append(f"{key}[{index}]: fails the call's filter ({_filters(arguments, record)}; a listing "
                             "holds only the records that match)")
    return found


def _filters(arguments: dict[str, Any], record: dict[str, Any]) -> str:
    """The call's filters the record fails, as `name=value`."""
    failing = [f"{name}={value!r}" for name, value in arguments.items() if not matches(record, {name: value})]
    return ", ".join(failing) or "its filters"


def stutters(response: Any) -> list[str]:
    """`path` of each text value written as prose (words and spaces on one line: not an id, a token or a file's
    content) that repeats a word, or a run of up to three words, right after itself."""
    found = []
    for path, text in _texts(response, ""):
        if not (" " in text.strip() or "_" in text) or "\n" in text:
            continue
        snake = len(text.split()) == 1  # one token: its underscores part words; in prose a snake_case token is a name
        words = [word for token in text.split() for word in _words(token, snake)]  # ids and numbers part words
        for size in (1, 2, 3):
            repeats = [" ".join(words[i:i + size]) for i in range(len(words) - 2 * size + 1)
                       if None not in words[i:i + 2 * size] and words[i:i + size] == words[i + size:i + 2 * size]]
            if repeats:
                found.append(f"{path or 'response'}: repeats {repeats[0]!r} (a stutter, not text a tool writes)")
                break
    return found


def _words(token: str, snake: bool) -> list[str | None]:
    """The words of one whitespace-separated token: with `snake`, an underscore-joined run of letters
    (`on_status_on`) is several words; an id (`HUT_64471`, `ORD-1`), a name or a number is one non-word (None)."""
    parts = token.strip("\"'.,;:!?()[]{}").split("_")
    if snake and len(parts) > 1 and all(part.isalpha() for part in parts if part):
        return [_word(part) for part in parts if part]
    return [_word(token)]


def _word(token: str) -> str | None:
    """A token as a word (lower case) when it is letters only, of two or more; None for an id, a number, a sign."""
    word = token.strip("\"'.,;:!?()[]{}").lower()
    return word if len(word) > 1 and word.isalpha() else None


def _listings(value: Any, path: str) -> Iterator[tuple[str, list]]:
    """(path, items) of every array of records or of ids in `value`, in document order (no recursion: a response
    nested deeper than Python recurses is walked too)."""
    for where, node in _nodes(value, path):
        if isinstance(node, list) and node and all(isinstance(item, (dict, str)) for item in node):
            yield where, node


def _texts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every string in `value`, in document order."""
    for where, node in _nodes(value, path):
        if isinstance(node, str):
            yield where, node


def _nodes(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, node) of `value` and everything inside it, depth first in document order, with an explicit stack."""
    stack = [(path, value)]
    while stack:
        where, node = stack.pop()
        yield where, node
        if isinstance(node, dict):
            stack.extend(reversed([(f"{where}.{key}" if where else str(key), child) for key, child in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(f"{where}[{i}]", child) for i, child in enumerate(node)]))


def _held_words(sources: Any) -> set[str]:
    """Every string (and each of its words), map key and number inside `sources`, lower case."""
    held: set[str] = set()
    for leaf in json_leaves(sources, keys=True):
        if isinstance(leaf, str):
            held.add(leaf.lower())
            held.update(word.strip("\"'.,;:()[]{}").lower() for word in leaf.split())
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            held.add(str(leaf))
    return held


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _same_number(a: Any, b: Any) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
        and not isinstance(b, bool) and float(a) == float(b)
