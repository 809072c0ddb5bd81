"""Values a response can copy: the JSON leaves of what a prompt shows, each with its key path and source.

A copy mechanism points into these instead of spelling an id or an amount token by token: the call's arguments,
the call-local state, the earlier turns' calls and responses, the values of steering directives. Each leaf knows
where it sits (`("orders", 3, "id")`), which source it came from, and whether its record shares a value with the
call (the order the call names, not another one)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wmstudio.world.prompt.call_local import FIELD_NAME, OMITTED_KEY, is_collection, touches
from wmstudio.world.prompt.render import Shown
from wmstudio.world.records import needles_of

SOURCES = ("call", "state", "query", "turn_call", "turn_response", "directive")
MAX_TEXT = 120  # longer text is prose, not a value to copy
MAX_CANDIDATES = 400


@dataclass(frozen=True)
class CopySource:
    """One value the prompt shows: the value, its key path within its source, the source, how many turns back
    (0 when not from a turn), whether the record holding it shares a value with the call, and whether the call
    selects it by key."""

    value: str | int | float
    path: tuple[str | int, ...]
    source: str
    turns_back: int = 0
    call_record: bool = False
    call_key: bool = False  # a key on its path is a value the call sends (`fares.standard` for fare "standard")
    derived: str = ""  # the operation that computed it from a shown value (world/heads/copy_candidates.py), "" if shown

    @property
    def key(self) -> str:
        """The nearest key name on its path (`id` for `("orders", 3, "id")`), "" when there is none."""
        return next((str(p) for p in reversed(self.path) if isinstance(p, str)), "")


def copy_sources(shown: Shown) -> list[CopySource]:
    """Every copyable leaf of what the prompt shows (strings up to MAX_TEXT characters and numbers), the call
    first, then the newest turns, the query state, the state and the directives; at most MAX_CANDIDATES."""
    needles = needles_of(shown.call.arguments)
    found: list[CopySource] = []
    found += shown_leaves(shown.call.arguments, ("arguments",), "call", 0, needles)
    last = max((number for number, _ in shown.turns), default=0)
    for number, step in reversed(shown.turns):
        back = last - number + 1
        found += shown_leaves(step.call.arguments, ("arguments",), "turn_call", back, needles)
        found += shown_leaves(step.response_value(), ("response",), "turn_response", back, needles)
    if shown.query is not None:
        found += shown_leaves(shown.query, (), "query", 0, needles)
    if shown.state is not None:
        found += shown_leaves(shown.state, (), "state", 0, needles)
    for text in shown.directives:
        kind, sep, value = text.partition(":")
        if sep and value.strip():
            found.append(CopySource(value.strip(), (kind.strip(),), "directive"))
    unique = list(dict.fromkeys(found))
    return unique[:MAX_CANDIDATES]


def shown_leaves(value: Any, prefix: tuple, source: str, back: int, needles: set,
                 max_text: int | None = MAX_TEXT) -> Iterator[CopySource]:
    """The leaves of `value` (map keys of id-keyed maps too) as sources, in document order; strings longer than
    `max_text` are left out (None: none are), and so are booleans and nulls."""
    stack: list[tuple[Any, tuple, bool]] = [(value, prefix, False)]
    out = []
    while stack:
        node, path, in_call_record = stack.pop()
        if isinstance(node, dict) and is_collection(node):  # a map keyed by id: its keys are values too
            for key, child in node.items():  # (`credit_card_1`); each entry is a record of its own
                if key == OMITTED_KEY:
                    continue
                record = in_call_record or (source != "call" and (touches(key, needles)
                                                                  or _shares_value(child, needles)))
                out.append(CopySource(key, path, source, back, record, _selected(path, source, needles)))
                stack.append((child, path + (key,), record))
        elif isinstance(node, dict):  # the state as a whole is no record: it touches every call
            whole_state = source in ("state", "query") and path == prefix
            record = in_call_record or (source != "call" and not whole_state and _shares_value(node, needles))
            for key, child in node.items():
                if key != OMITTED_KEY:
                    stack.append((child, path + (key,), record))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                stack.append((child, path + (index,), in_call_record))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, (int, float)) or (isinstance(node, str) and 0 < len(node)
                                                 and (max_text is None or len(node) <= max_text)
                                                 and not node.startswith(OMITTED_KEY)):
            out.append(CopySource(node, path, source, back, in_call_record, _selected(path, source, needles)))
    out.reverse()
    return iter(out)


def _shares_value(node: Any, needles: set) -> bool:
    """Whether a value inside `node` (or a key of an id-keyed map in it, or an id- or path-like key) is one the call
    sends; field names never count (every flight has a `flex` fare, only one is the flight the call books)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys = [k for k in item if k != OMITTED_KEY and (is_collection(item) or not FIELD_NAME.match(str(k)))]
            if keys and touches(keys, needles):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif touches(item, needles):
            return True
    return False


def _selected(path: tuple, source: str, needles: set) -> bool:
    return source != "call" and any(isinstance(part, str) and part in needles for part in path)
