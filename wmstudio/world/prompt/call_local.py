"""The part of an environment state that concerns one call: records sharing a value with it, the rest counted.

A small world model cannot find one order among 200 by attention, and a real state does not fit its context;
showing the records that share a value with the call (or with the turns shown before it) keeps what the response
is made of and says how much was left out. Collections are lists of objects and maps keyed by id or path; every
other value (top-level scalars, a record's own fields) is kept as it is."""

from __future__ import annotations

import copy
import re
from typing import Any

from wmstudio.world.records import json_leaves

OMITTED_KEY = "…"  # the key (in maps) or the text prefix (in lists) that says how many entries were left out
FIELD_NAME = re.compile(r"^[a-z][a-z_]*$")  # record keys look like this; ids and paths do not
LONG_SCALAR_LIST = 8  # lists of plain values longer than this keep only the entries that touch the call


def touches(value: Any, needles: set[str | int | float]) -> bool:
    """Whether any leaf (or map key) of `value` shares a needle: equal, or the same path at a `/` boundary."""
    for leaf in json_leaves(value, keys=True):
        if isinstance(leaf, bool):
            continue
        if leaf in needles:
            return True
        if isinstance(leaf, str) and "/" in leaf and any(_same_path(leaf, n) for n in needles if isinstance(n, str)):
            return True
    return False


def call_local(state: Any, needles: set[str | int | float]) -> tuple[Any, int]:
    """(the state with each collection cut to the entries that touch a needle, entries left out). A cut list
    ends with `"… N more"`, a cut map gets the key `"…"`; kept records are cut the same way inside."""
    omitted = 0

    def prune(node: Any) -> Any:
        nonlocal omitted
        if isinstance(node, list):
            records = node and all(isinstance(item, dict) for item in node)
            if not records and len(node) <= LONG_SCALAR_LIST:
                return [prune(item) for item in node]
            kept = [keep(item) for item in node if touches(item, needles)]
            left = len(node) - len(kept)
            omitted += left
            return kept + ([f"{OMITTED_KEY} {left} more"] if left else [])
        if isinstance(node, dict):
            if not is_collection(node):
                return {key: prune(value) for key, value in node.items()}
            kept = {key: keep(value) for key, value in node.items()
                    if key in needles or touches(key, needles) or touches(value, needles)}
            left = len(node) - len(kept)
            omitted += left
            if left:
                kept[OMITTED_KEY] = f"{left} more"
            return kept
        return node

    def keep(record: Any) -> Any:
        """A record that shares a value: its small collections whole (an order's items), large ones cut."""
        if isinstance(record, dict):
            return {key: value if _small(value) else prune(value) for key, value in record.items()}
        return prune(record)

    return copy.deepcopy(prune(state)), omitted  # a copy: callers cut it further without touching the state


def with_references(state: Any, needles: set[str | int | float]) -> set[str | int | float]:
    """`needles` plus the ids the records they touch point to, one hop: a booking names its flight, so the flight's
    record (its date, its fares) is shown beside the booking. An id is a value that identifies one record of a
    collection (a map's key, or a list's `id` / `*_id` / singular-named field, unique across its records)."""
    identifiers = record_ids(state)
    if not identifiers:
        return needles
    local, _ = call_local(state, needles)
    found = {leaf for leaf in json_leaves(local, keys=True)
             if isinstance(leaf, str) and leaf in identifiers and not leaf.startswith(OMITTED_KEY)}
    return needles | found


def record_ids(state: Any) -> set[str]:
    """The values that identify a record anywhere in `state`: the keys of id-keyed maps and, in a list of records,
    the values of a field named `id`, `*_id` or after the list (`flight` in `flights`) when no two records share one."""
    found: set[str] = set()
    stack: list[tuple[Any, str]] = [(state, "")]
    while stack:
        node, name = stack.pop()
        if isinstance(node, dict):
            if is_collection(node):
                found.update(str(key) for key in node if key != OMITTED_KEY)
            stack.extend((value, str(key)) for key, value in node.items())
        elif isinstance(node, list):
            records = [item for item in node if isinstance(item, dict)]
            if len(records) >= 2 and len(records) == len(node):
                for key in records[0]:
                    if not (key == "id" or key.endswith("_id") or (name.endswith("s") and key == name[:-1])):
                        continue
                    values = [record.get(key) for record in records]
                    if all(isinstance(v, str) and v for v in values) and len(set(values)) == len(values):
                        found.update(values)
            stack.extend((item, name) for item in node)
    return found


def _small(value: Any) -> bool:
    return not isinstance(value, (list, dict)) or len(value) <= LONG_SCALAR_LIST


def drop_last_record(state: Any) -> bool:
    """Cut the last kept entry of the largest collection in a call-local state (in place), adding it to that
    collection's count of entries left out; False when no collection has an entry left to cut."""
    best: tuple[int, Any] | None = None
    stack = [state]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            kept = [i for i, item in enumerate(node) if not _is_marker(item)]
            if kept and (len(kept) < len(node) or all(isinstance(node[i], dict) for i in kept)):
                best = max(best or (0, None), (len(kept), node), key=lambda pair: pair[0])
            stack.extend(node)
        elif isinstance(node, dict):
            entries = [k for k in node if k != OMITTED_KEY]
            if OMITTED_KEY in node and entries:
                best = max(best or (0, None), (len(entries), node), key=lambda pair: pair[0])
            stack.extend(node.values())
    if best is None:
        return False
    node = best[1]
    if isinstance(node, list):
        last = max(i for i, item in enumerate(node) if not _is_marker(item))
        node.pop(last)
        left = _marker_count(node[-1]) + 1 if node and _is_marker(node[-1]) else 1
        if node and _is_marker(node[-1]):
            node[-1] = f"{OMITTED_KEY} {left} more"
        else:
            node.append(f"{OMITTED_KEY} {left} more")
    else:
        node.pop([k for k in node if k != OMITTED_KEY][-1])
        node[OMITTED_KEY] = f"{_marker_count(node[OMITTED_KEY]) + 1} more"
    return True


def _is_marker(item: Any) -> bool:
    return isinstance(item, str) and item.startswith(OMITTED_KEY) and item.endswith(" more")


def _marker_count(text: str) -> int:
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits) if digits else 0


def is_collection(node: dict) -> bool:
    """A map of entries rather than a record: keyed by ids or paths, or by 3+ keys whose values share one shape."""
    if len(node) < 3:
        return False
    keys = list(node)
    if sum(not FIELD_NAME.match(str(k)) for k in keys) >= 0.8 * len(keys):
        return True
    values = list(node.values())
    return all(isinstance(v, dict) for v in values) and len({tuple(v) for v in values}) == 1


def _same_path(a: str, b: str) -> bool:
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.endswith("/" + b.lstrip("/")) or b.endswith("/" + a.lstrip("/")) or a.startswith(b + "/") \
        or b.startswith(a + "/") or f"/{b.strip('/')}/" in a
