"""Values a rule's `matches` implies: `response.api_key.matches("^pl_live_[A-Za-z0-9]{32}$")` says what shape the
field's text must have, so a text of another shape can be brought to the nearest one that matches.

A small model writes a token's characters but not always its exact prefix and length. The nearest matching text
keeps every character of the model's text that the pattern still admits, in order, then completes the shortest
way to a match with characters drawn by a generator seeded from the text (a fresh token looks like one, and the
same text always gives the same repair). Repair tries these values as steering, like a rule's equalities."""

from __future__ import annotations

import random
import re
from typing import Any

from wmstudio.world.rules.references import STRING_LITERAL
from wmstudio.world.tools.linear_patterns import compiled, search
from wmstudio.world.tools.regex_automata import Automaton, pattern_automaton

_FIELD_MATCHES = re.compile(r"response\.([A-Za-z_]\w*)\.matches\(\s*(" + STRING_LITERAL.pattern + r")\s*\)")
_ANY_MATCHES = re.compile(r"\.matches\(\s*(" + STRING_LITERAL.pattern + r")\s*\)")
MAX_PATTERN_TEXT = 256  # longer completions are not a token's shape: left to the model
SHORTEST_KEPT = 1024  # shortest texts remembered, by pattern
_SHORTEST: dict[str, str | None] = {}


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
    state, kept = fsm.start, []
    for ch in text:
        following = fsm.step(state, ch)
        if following is not None:
            state = following
            kept.append(ch)
    rng = random.Random(text)
    while not fsm.accepts(state):
        if len(kept) > MAX_PATTERN_TEXT:
            return None
        choices = _closer(fsm, state)
        if not choices:
            return None
        ch = rng.choice(choices)
        kept.append(ch)
        state = fsm.step(state, ch)
    return "".join(kept)


def shortest_text(regex: str) -> str | None:
    """The shortest non-empty text `regex` admits (its characters the first in the automaton's order), None when
    the pattern cannot be compiled or admits no such text: how long a slot must be to hold a value of that shape.
    Remembered once worked out (not a None for want of an automaton: a request's spent budget may be why)."""
    if regex in _SHORTEST:
        return _SHORTEST[regex]
    fsm = pattern_automaton(regex)
    if fsm is None:
        return None
    if len(_SHORTEST) >= SHORTEST_KEPT:
        _SHORTEST.clear()
    found = _SHORTEST[regex] = _shortest(fsm)
    return found


def _shortest(fsm: Automaton) -> str | None:
    candidates = _printable(fsm.named) + [ch for ch in FALLBACK_CHARS if ch not in fsm.named]  # its own first
    firsts = [(fsm.distance[nxt], rank, ch) for rank, ch in enumerate(candidates)
              if (nxt := fsm.step(fsm.start, ch)) is not None]
    if not firsts:
        return None
    first = min(firsts)[2]
    state, kept = fsm.step(fsm.start, first), [first]
    while not fsm.accepts(state) and len(kept) <= MAX_PATTERN_TEXT:
        choices = _closer(fsm, state)
        if not choices:
            return None
        kept.append(choices[0])
        state = fsm.step(state, choices[0])
    return "".join(kept) if fsm.accepts(state) else None


def matches_problem(check: str) -> str | None:
    """Why a check's `matches("RE")` cannot run in linear time (RE2 cannot compile RE), naming the pattern; None
    when every literal pattern it matches with can."""
    for match in _ANY_MATCHES.finditer(check):
        regex = regex_literal(match.group(1))
        program = compiled(regex) if regex is not None else None
        if isinstance(program, str):
            return (f"the pattern it matches with, {regex[:60]!r}, cannot be matched in linear time ({program}): "
                    "rewrite it without look-arounds or back-references")
    return None


def regex_literal(quoted: str) -> str | None:
    """The regex text of a CEL string literal (simple escapes), or None for one it cannot read."""
    inner = quoted[1:-1]
    try:
        return inner.encode("utf-8").decode("unicode_escape") if "\\\\" in inner else inner
    except UnicodeDecodeError:
        return None


def _matches(regex: str, text: str) -> bool:
    """Whether `regex` matches in `text` (RE2: linear time); True for a pattern RE2 cannot run (nothing to say)."""
    return search(regex, text) is not False


FALLBACK_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_."  # for `[^x]` and `.`


def _printable(chars) -> list[str]:
    """`chars` that may stand in a JSON string as themselves, in their order."""
    return [ch for ch in chars if ch.isprintable() and ch not in '"\\']


def _closer(fsm: Automaton, state: int) -> list[str]:
    """The characters one step closer to a match from `state`: the pattern's own, else common ones (a negated
    class or a wildcard names none it takes)."""
    for chars in (fsm.named, FALLBACK_CHARS):
        found = [ch for ch in _printable(chars)
                 if (nxt := fsm.step(state, ch)) is not None and fsm.distance[nxt] == fsm.distance[state] - 1]
        if found:
            return found
    return []
