"""Values a rule's `matches` implies: `response.api_key.matches("^pl_live_[A-Za-z0-9]{32}$")` says what shape the
field's text must have, so a text of another shape can be brought to the nearest one that matches.

A small model writes a token's characters but not always its exact prefix and length. The nearest matching text
keeps every character of the model's text that the pattern still admits, in order, then completes the shortest
way to a match with characters drawn by a generator seeded from the text (a fresh token looks like one, and the
same text always gives the same repair). Repair tries these values as steering, like a rule's equalities."""

from __future__ import annotations

import functools
import random
import re
from collections import deque
from typing import Any

from wmstudio.world.rules.references import STRING_LITERAL
from wmstudio.world.tools.regex_automata import pattern_automaton

_FIELD_MATCHES = re.compile(r"response\.([A-Za-z_]\w*)\.matches\(\s*(" + STRING_LITERAL.pattern + r")\s*\)")
MAX_PATTERN_TEXT = 256  # longer completions are not a token's shape: left to the model


def implied_texts(check: str, response: Any) -> list[tuple[str, str]]:
    """(field, text) for each `response.F.matches("RE")` of `check` where F holds text that does not match: the
    nearest text that does. Patterns the compiler cannot read give nothing."""
    if not isinstance(response, dict):
        return []
    found: list[tuple[str, str]] = []
    for match in _FIELD_MATCHES.finditer(check):
        name, current = match.group(1), response.get(match.group(1))
        regex = regex_literal(match.group(2))
        if not isinstance(current, str) or regex is None or _matches(regex, current):
            continue
        nearest = nearest_match(regex, current)
        if nearest is not None and nearest != current:
            found.append((name, nearest))
    return found


def nearest_match(regex: str, text: str) -> str | None:
    """A text matching `regex` (CEL's `matches`: anywhere unless anchored) made of `text`'s characters the
    pattern admits, in order, completed the shortest way; None when the pattern cannot be compiled."""
    fsm = pattern_automaton(regex)
    if fsm is None:
        return None
    distance = _distance_to_accept(fsm)
    state, kept = fsm.initial, []
    for ch in text:
        following = _next(fsm, state, ch)
        if following is not None and following in distance:
            state = following
            kept.append(ch)
    rng = random.Random(text)
    while state not in fsm.finals:
        if len(kept) > MAX_PATTERN_TEXT:
            return None
        choices = [ch for ch in _alphabet_chars(fsm)
                   if (nxt := _next(fsm, state, ch)) is not None and distance.get(nxt, -1) == distance[state] - 1]
        if not choices:
            return None
        ch = rng.choice(choices)
        kept.append(ch)
        state = _next(fsm, state, ch)
    return "".join(kept)


@functools.lru_cache(maxsize=1024)
def shortest_text(regex: str) -> str | None:
    """The shortest non-empty text `regex` admits (its characters the first in the automaton's order), None when
    the pattern cannot be compiled or admits no such text: how long a slot must be to hold a value of that shape."""
    fsm = pattern_automaton(regex)
    if fsm is None:
        return None
    distance = _distance_to_accept(fsm)
    firsts = [(distance[nxt], ch) for ch in _alphabet_chars(fsm)
              if (nxt := _next(fsm, fsm.initial, ch)) is not None and nxt in distance]
    if not firsts:
        return None
    state, kept = _next(fsm, fsm.initial, min(firsts)[1]), [min(firsts)[1]]
    while state not in fsm.finals and len(kept) <= MAX_PATTERN_TEXT:
        ch = next(ch for ch in _alphabet_chars(fsm)
                  if (nxt := _next(fsm, state, ch)) is not None and distance.get(nxt, -1) == distance[state] - 1)
        kept.append(ch)
        state = _next(fsm, state, ch)
    return "".join(kept) if state in fsm.finals else None


def regex_literal(quoted: str) -> str | None:
    """The regex text of a CEL string literal (simple escapes), or None for one it cannot read."""
    inner = quoted[1:-1]
    try:
        return inner.encode("utf-8").decode("unicode_escape") if "\\\\" in inner else inner
    except UnicodeDecodeError:
        return None


def _matches(regex: str, text: str) -> bool:
    try:
        return re.search(regex, text) is not None
    except re.error:
        return True  # a pattern Python cannot read: nothing to say about the text


def _next(fsm, state, ch: str):
    """The state after `ch` (a character the pattern names, or one its wildcards take), or None."""
    try:
        symbol = fsm.alphabet[ch]
    except KeyError:
        return None
    return fsm.map.get(state, {}).get(symbol)


def _alphabet_chars(fsm) -> list[str]:
    """The printable characters the automaton names, in a fixed order (text outside them is not proposed)."""
    return sorted(ch for ch in fsm.alphabet if isinstance(ch, str) and len(ch) == 1 and ch.isprintable()
                  and ch not in '"\\')


def _distance_to_accept(fsm) -> dict[Any, int]:
    """Fewest characters from each state to an accepting one (states that cannot accept are absent)."""
    incoming: dict[Any, list[Any]] = {}
    for source, moves in fsm.map.items():
        for target in moves.values():
            incoming.setdefault(target, []).append(source)
    distance = {state: 0 for state in fsm.finals}
    queue = deque(fsm.finals)
    while queue:
        state = queue.popleft()
        for source in incoming.get(state, []):
            if source not in distance:
                distance[source] = distance[state] + 1
                queue.append(source)
    return distance
