"""What a copy head chooses among: the values the prompt shows and values computed from them.

A small model trained minutes on a CPU does not learn to multiply a fare by the seats asked, count a file's bytes
or add an hour to a clock, but it learns which of a few computed values a field holds as it learns which shown
value to copy. Each operation is generic (no domain rule is read): a shown number times a count the call asks for,
the byte length of a shown text or the item count of a list the call sends, a relative path of the call joined to
an absolute folder the state names, a shown time an hour, a day or a week later. The computed candidates come
right after the call's own values, so the cap on candidates never drops them for a big state."""

from __future__ import annotations

import posixpath
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from wmstudio.world.heads.copy_sources import MAX_CANDIDATES, CopySource, copy_sources, shown_leaves
from wmstudio.world.prompt.render import Shown
from wmstudio.world.records import needles_of

DERIVED_OPS = ("times", "length", "join", "hour later", "day later", "week later", "plus", "minus")
LATER = {"hour later": timedelta(hours=1), "day later": timedelta(days=1), "week later": timedelta(weeks=1)}
MAX_FACTOR = 9  # counts a call asks for (seats, copies); larger integers are amounts, not counts
MAX_DERIVED = 64
MAX_BASES = 8  # numbers of the named record that sums and differences start from
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z$")


def copy_candidates(shown: Shown) -> list[CopySource]:
    """The shown values (copy_sources) with the computed ones after the call's values; at most MAX_CANDIDATES."""
    shown_sources = copy_sources(shown)
    calls = [s for s in shown_sources if s.source == "call"]
    rest = [s for s in shown_sources if s.source != "call"]
    return list(dict.fromkeys(calls + derived_sources(shown, shown_sources) + rest))[:MAX_CANDIDATES]


def derived_sources(shown: Shown, shown_sources: list[CopySource]) -> list[CopySource]:
    """The computed candidates for a prompt whose plain copy candidates are `shown_sources`: each keeps the path and
    source of the value it was computed from and names its operation in `derived`; at most MAX_DERIVED."""
    arguments = shown.call.arguments
    found: list[CopySource] = []
    found += _products(arguments, shown_sources)
    found += _sums(arguments, shown_sources)
    found += _lengths(shown, arguments)
    found += _joins(shown.state, arguments)
    found += _later_times(shown_sources)
    return list(dict.fromkeys(found))[:MAX_DERIVED]


def _products(arguments: Any, sources: list[CopySource]) -> list[CopySource]:
    """Numbers of the record the call names (or of a key the call selects) times each small count in the call."""
    factors = sorted({v for v in _call_scalars(arguments) if isinstance(v, int) and not isinstance(v, bool)
                      and 2 <= v <= MAX_FACTOR})
    bases = [s for s in sources if s.source in ("state", "query") and (s.call_record or s.call_key)
             and isinstance(s.value, (int, float)) and not isinstance(s.value, bool) and s.value]
    return [_derived(base, base.value * factor, "times") for factor in factors for base in bases]


def _sums(arguments: Any, sources: list[CopySource]) -> list[CopySource]:
    """Arithmetic between shown numbers: each number of the record the call names plus and minus each number the
    call sends (a running total, what is left), and the difference of two numbers of one record (a total less
    what was already taken). Negative results are left out."""
    numbers = [v for v in _call_scalars(arguments) if _amount(v)]
    bases = [s for s in sources if s.source in ("state", "query") and s.call_record and _amount(s.value)][:MAX_BASES]
    found = []
    for base in bases:
        for number in numbers:
            found.append(_derived(base, base.value + number, "plus"))
            if base.value - number >= 0:
                found.append(_derived(base, base.value - number, "minus"))
        for other in bases:
            if other is not base and other.path[:-1] == base.path[:-1] and base.value > other.value:
                found.append(_derived(base, base.value - other.value, "minus"))
    return found


def _amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def _lengths(shown: Shown, arguments: Any) -> list[CopySource]:
    """The UTF-8 byte length of each text (not a name or an id) of the record the call names, and the item count of
    each list the call sends."""
    found = []
    if shown.state is not None:
        for leaf in shown_leaves(shown.state, (), "state", 0, needles_of(arguments), max_text=None):
            if isinstance(leaf.value, str) and leaf.call_record and _is_text(leaf.value):
                found.append(_derived(leaf, len(leaf.value.encode("utf-8")), "length"))
    for key, value in (arguments.items() if isinstance(arguments, dict) else ()):
        if isinstance(value, list) and value:
            found.append(CopySource(len(value), ("arguments", key), "call", derived="length"))
    return found


def _joins(state: Any, arguments: Any) -> list[CopySource]:
    """Each relative path the call sends, joined to each absolute folder the state names at its top level."""
    if not isinstance(state, dict) or not isinstance(arguments, dict):
        return []
    folders = [v for v in state.values() if isinstance(v, str) and v.startswith("/") and " " not in v]
    found = []
    for key, value in arguments.items():
        if isinstance(value, str) and value and not value.startswith("/") and " " not in value and "@" not in value \
                and ("/" in value or "." in value or value.isidentifier()):
            for folder in folders:
                found.append(CopySource(posixpath.normpath(posixpath.join(folder, value)), ("arguments", key), "call",
                                        derived="join"))
    return found


def _later_times(sources: list[CopySource]) -> list[CopySource]:
    """Each UTC time the state or call shows (`2025-07-07T00:16:00Z`), an hour, a day and a week later."""
    found = []
    for source in sources:
        if source.source not in ("state", "query", "call") or not isinstance(source.value, str) \
                or not _TIME.match(source.value):
            continue
        seconds = source.value.count(":") == 2
        try:
            moment = datetime.strptime(source.value, "%Y-%m-%dT%H:%M:%SZ" if seconds else "%Y-%m-%dT%H:%MZ")
        except ValueError:  # the shape of a time, not a real one (month 13)
            continue
        for op, delta in LATER.items():
            later = (moment + delta).replace(tzinfo=timezone.utc)
            found.append(_derived(source, later.strftime("%Y-%m-%dT%H:%M:%SZ" if seconds else "%Y-%m-%dT%H:%MZ"), op))
    return found


def _is_text(value: str) -> bool:
    return any(ch.isspace() for ch in value) or len(value) > 32


def _derived(base: CopySource, value: str | int | float, op: str) -> CopySource:
    return CopySource(value, base.path, base.source, base.turns_back, base.call_record, base.call_key, op)


def _call_scalars(arguments: Any) -> list[Any]:
    return [v for v in (arguments.values() if isinstance(arguments, dict) else ()) if not isinstance(v, (dict, list))]

