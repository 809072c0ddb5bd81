"""Ids and numbers a response's message names that nothing it answers holds: "ORD-12002 was delivered 19 days ago" in
the refund of ORD-22930 from a state without ORD-12002.

A message is prose, so it is read for three kinds of mention, each held when the call, the state, the history, the
rest of the response or the world's own words (rules, tool descriptions: a message may quote a policy) hold it:
- an id: a word that mixes letters and digits (ORD-12002, NX482, ch_3Kx9Pq2LmZ7wYt, 2025-03-14, after30), held when
  some value or key is or contains the same word, case aside; a timestamp is also held when it lies a period the
  world's rules state (`duration("7776000s")` in a check) after or before a held timestamp (a window's end);
- a path (/home/alex/docs/x.txt): held when it is a held value or every one of its names is (a move's target);
- a number of 100 or more ($1,234.56 is read as 123456 cents): held as a number or inside text, in cents or in
  dollars, as the sum or difference of two held numbers of 100 or more (the amount left), as a held number
  times a held one under 100 (72 seats × 2 each), or as the days between two held dates.
Numbers under 100 are counts and durations a message derives (3 of 5 orders, 2 seats left, 30 days, 45s) and go
unread."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec

MESSAGE_KEY = "message"
SMALLEST_CHECKED = 100  # numbers below are counts and durations
MAX_HELD_NUMBERS = 2_000  # sums and differences are tried over at most this many held numbers
MAX_STRAYS = 5
_PUNCTUATION = "\"'`.,;:!?()[]{}<>*#"
_MONEY = re.compile(r"^(\$)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?$")
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?Z")
_DURATION = re.compile(r'duration\("(\d+)s"\)')


@dataclass(frozen=True)
class Mention:
    """One id, path or number a text names: `text` as written, `kind`, a number's value and whether it was written
    as dollars ($12.99, which a state keeps as 1299 cents)."""

    text: str
    kind: str  # "id", "path" or "number"
    value: float = 0.0
    dollars: bool = False


def mentions(text: str) -> list[Mention]:
    """The ids, paths and numbers (any size) `text` names, in order."""
    found = []
    for raw in text.split():
        word = raw.strip(_PUNCTUATION)
        if not word or not any(c.isdigit() for c in word) and not word.startswith("/"):
            continue
        if word.startswith("/") and len(word) > 1:
            found.append(Mention(word.rstrip("/"), "path"))
        elif (span := _SPAN.match(word)) is not None:  # 45s, 2h: a duration, read as its number
            found.append(Mention(word, "number", float(span.group(1))))
        elif (money := _MONEY.match(word)) is not None:
            whole, fraction = money.group(2).replace(",", ""), money.group(3)
            value = float(f"{whole}.{fraction}") if fraction else float(whole)
            found.append(Mention(word, "number", value, dollars=bool(money.group(1))))
        elif any(c.isalpha() for c in word) or _DATE.fullmatch(word[:10]):
            found.append(Mention(word, "id"))
        else:  # digits joined by "-", ":" or "/": a range or a time, read as its numbers
            found += [Mention(part, "number", float(part)) for part in _DIGITS.findall(word)]
    return found


def message_strays(world: WorldSpec, call: Call, response: Any, history: Sequence[HistoryStep] = ()) -> list[str]:
    """The check's lines: one per mention of the response's message that nothing holds (at most MAX_STRAYS)."""
    return [f"message names {text}, which no value of the call, the state, the history or the rest of the response "
            "holds" for text in stray_mentions(world, call, response, history)[:MAX_STRAYS]]


def stray_mentions(world: WorldSpec, call: Call, response: Any, history: Sequence[HistoryStep] = ()) -> list[str]:
    """The ids, paths and numbers the response's `message` names that nothing holds, as written, each once; [] when
    the response has no text message."""
    message = response.get(MESSAGE_KEY) if isinstance(response, dict) else None
    if not isinstance(message, str) or not message.strip():
        return []
    rest = {key: value for key, value in response.items() if key != MESSAGE_KEY}
    sources = [call.arguments, world.initial_state, rest, [rule.text for rule in world.rules],
               [tool.description for tool in world.tools],
               *([step.call.arguments, step.response_value()] for step in history)]
    held = Held.of(sources)
    periods = {int(n) for rule in world.rules for n in _DURATION.findall(rule.check or "")}  # a text rule has none
    return list(dict.fromkeys(m.text for m in mentions(message)
                              if not held.holds(m) and not held.offset_stamp(m, periods)))


@dataclass
class Held:
    """What the values of a step hold, read once: words (lower case), path names, numbers and dates."""

    words: set[str]
    names: set[str]
    numbers: set[float]
    dates: list[dt.date]
    stamps: set[dt.datetime]

    @classmethod
    def of(cls, sources: Iterable[Any]) -> Held:
        words, names, numbers, dates, stamps = set(), set(), set(), set(), set()
        for value in _leaves(sources):
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                numbers.add(float(value))
                continue
            text = value.lower()
            words.add(text.strip())
            for raw in text.split():
                word = raw.strip(_PUNCTUATION)
                words.add(word)
                names.update(part for part in word.split("/") if part)
            numbers.update(float(n) for n in _DIGITS.findall(text))
            dates.update(_DATE.findall(text))
            stamps.update(_STAMP.findall(value))
        return cls(words, names, numbers, sorted({d for d in map(_date, dates) if d is not None}),
                   {t for t in map(_stamp, stamps) if t is not None})

    def offset_stamp(self, mention: Mention, periods: set[int]) -> bool:
        """True when `mention` is a timestamp a stated period (seconds) away from a held one."""
        when = _stamp(mention.text) if mention.kind == "id" and _STAMP.fullmatch(mention.text) else None
        if when is None or not periods:
            return False
        return any(abs((when - held).total_seconds()) in periods for held in self.stamps)

    def holds(self, mention: Mention) -> bool:
        if mention.kind == "id":
            return mention.text.lower() in self.words
        if mention.kind == "path":
            path = mention.text.lower()
            return path in self.words or all(name in self.names for name in path.split("/") if name)
        value = mention.value
        if (round(value * 100) if mention.dollars else value) < SMALLEST_CHECKED:
            return True
        candidates = [round(value * 100), value] if mention.dollars else [value, round(value * 100)]
        return any(self._number(float(n)) for n in candidates if n >= SMALLEST_CHECKED)

    def _number(self, value: float) -> bool:
        if value in self.numbers:
            return True
        large = {n for n in self.numbers if n >= SMALLEST_CHECKED}  # small ones would make almost any number
        pool = sorted(large)[:MAX_HELD_NUMBERS]
        if any(value - a in large or a - value in large for a in pool):
            return True  # a sum or a difference of two amounts: what is left, a total so far
        factors = sorted(n for n in self.numbers if 2 <= n < SMALLEST_CHECKED)[:MAX_HELD_NUMBERS]
        if any(value / f in self.numbers for f in factors):
            return True  # a held number times a small held one: 72 seats × 2 each
        return any(abs((b - a).days) == value for i, a in enumerate(self.dates) for b in self.dates[i + 1:])


def _leaves(value: Any) -> Iterator[Any]:
    """Every string (dict keys too) and number inside `value`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (str, int, float)):
            yield item


def _stamp(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None
