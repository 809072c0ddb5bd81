"""Character grammars for canvas spans: JSON string content, numbers, option lists, typed arrays, bounded JSON.

Each grammar is a frozen dataclass with `start()`, `step(state, ch) -> state | None` and `accepts(state)`;
states are small hashables, so constraints.py can compile a grammar into a per-token transition table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

from wmstudio.world.tools.regex_automata import Automaton, automaton, search_regex


@dataclass(frozen=True)
class AnyText:
    """Free text: every character (a free span's only rule is where its pads go, which constraints.py adds)."""

    def start(self) -> Hashable:
        return 0

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        return 0

    def accepts(self, state: Hashable) -> bool:
        return True


HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
PLAIN = 0  # inside a JSON string, not within an escape (1: after a backslash, 2-5: the four hex digits of \\u)


def string_step(state: int, ch: str) -> int | None:
    """The escape state inside a JSON string after `ch` (None: `ch` cannot come next). A closing quote is the
    caller's to see, at PLAIN; a raw control character never comes, a backslash only as an escape."""
    if state == PLAIN:
        return 1 if ch == "\\" else (PLAIN if ch != '"' and ord(ch) >= 0x20 else None)
    if state == 1:
        return 2 if ch == "u" else (PLAIN if ch in '"\\/bfnrt' else None)
    return (state + 1 if state < 5 else PLAIN) if ch in HEX_DIGITS else None


@dataclass(frozen=True)
class TextContent:
    """The inside of a JSON string (quotes are anchors): no raw quote or control character, a backslash only as an
    escape (`\\n`, `\\"`, `\\u00e9`), so a file's lines or a quoted word can be written (and copied)."""

    def start(self) -> Hashable:
        return PLAIN

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        return string_step(state, ch)

    def accepts(self, state: Hashable) -> bool:
        return state == PLAIN


@dataclass(frozen=True)
class QuotedText:
    """A whole JSON string with its quotes (array items, bounded JSON): `"` content `"`."""

    def start(self) -> Hashable:
        return "open"

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        if state == "open":
            return PLAIN if ch == '"' else None
        if state == "closed":
            return None
        if state == PLAIN and ch == '"':
            return "closed"
        return string_step(state, ch)

    def accepts(self, state: Hashable) -> bool:
        return state == "closed"


@dataclass(frozen=True)
class NumberText:
    """A JSON number: `-?(0|[1-9][0-9]*)`, plus `(\\.[0-9]+)?` unless `integer`; no `-` unless `signed`;
    no value below 1 when `at_least_one` (an unsigned integer with `minimum >= 1`)."""

    integer: bool = False
    signed: bool = True
    at_least_one: bool = False

    def start(self) -> Hashable:
        return "start"

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        digit = "0" <= ch <= "9"
        if state in ("start", "minus"):
            if ch == "-" and state == "start" and self.signed:
                return "minus"
            if ch == "0" and self.at_least_one:
                return None
            return ("zero" if ch == "0" else "int") if digit else None
        if state == "int" and digit:
            return "int"
        if state in ("zero", "int") and ch == "." and not self.integer:
            return "dot"
        if state in ("dot", "frac") and digit:
            return "frac"
        return None

    def accepts(self, state: Hashable) -> bool:
        return state in ("zero", "int", "frac")


@dataclass(frozen=True)
class Options:
    """Exactly one of the option texts (booleans, enums, null): a trie over their characters."""

    options: tuple[str, ...]

    def start(self) -> Hashable:
        return ""

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        prefix = state + ch
        return prefix if any(option.startswith(prefix) for option in self.options) else None

    def accepts(self, state: Hashable) -> bool:
        return state in self.options


@dataclass(frozen=True)
class ArrayText:
    """A JSON array of values of one grammar, `[a, b]` (one optional space after each comma)."""

    item: Any

    def start(self) -> Hashable:
        return ("open", None)

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        phase, inner = state
        if phase == "open":
            return ("first", None) if ch == "[" else None
        if phase == "done":
            return None
        if phase == "item":
            nxt = self.item.step(inner, ch)
            if nxt is not None:
                return ("item", nxt)
            if self.item.accepts(inner):
                return ("comma", None) if ch == "," else (("done", None) if ch == "]" else None)
            return None
        if phase == "first" and ch == "]":
            return ("done", None)
        if phase == "comma" and ch == " ":
            return ("space", None)
        nxt = self.item.step(self.item.start(), ch)
        return ("item", nxt) if nxt is not None else None

    def accepts(self, state: Hashable) -> bool:
        return state[0] == "done"


@dataclass(frozen=True)
class JsonText:
    """Any JSON value nested at most `depth` containers deep (spaces allowed between tokens);
    `root` "{" or "[" requires the value to be an object or an array."""

    depth: int = 1
    root: str = ""

    def start(self) -> Hashable:
        return ((), "value", None)

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        stack, mode, sub = state
        if mode == "num":
            nxt = _NUMBER.step(sub, ch)
            if nxt is not None:
                return (stack, "num", nxt)
            return self._after(stack, ch) if _NUMBER.accepts(sub) else None
        if mode == "lit":
            prefix = sub + ch
            if any(word.startswith(prefix) for word in ("true", "false", "null")):
                return (stack, "lit" if prefix not in ("true", "false", "null") else "after", prefix)
            return None
        if mode in ("str", "key_str"):
            if ch == '"' and sub == PLAIN:
                return (stack, "after" if mode == "str" else "colon", None)
            nxt = string_step(sub, ch)
            return (stack, mode, nxt) if nxt is not None else None
        if ch == " " and mode in ("value", "first_value", "key", "first_key", "colon", "after"):
            return state
        if mode in ("key", "first_key"):
            if ch == '"':
                return (stack, "key_str", PLAIN)
            return (stack[:-1], "after", None) if ch == "}" and mode == "first_key" else None
        if mode == "colon":
            return (stack, "value", None) if ch == ":" else None
        if mode == "after":
            return self._after(stack, ch)
        # mode is "value" or "first_value"
        if self.root and not stack and mode == "value" and ch != self.root:
            return None
        if ch == "]" and mode == "first_value":
            return (stack[:-1], "after", None)
        if ch in "{[" and len(stack) < self.depth:
            return (stack + (ch,), "first_key" if ch == "{" else "first_value", None)
        if ch == '"':
            return (stack, "str", PLAIN)
        if ch in "tfn":
            return (stack, "lit", ch)
        nxt = _NUMBER.step(_NUMBER.start(), ch)
        return (stack, "num", nxt) if nxt is not None else None

    def _after(self, stack: tuple, ch: str) -> Hashable | None:
        if not stack:
            return None
        if ch == ",":
            return (stack, "key" if stack[-1] == "{" else "value", None)
        if (ch == "}" and stack[-1] == "{") or (ch == "]" and stack[-1] == "["):
            return (stack[:-1], "after", None)
        return None

    def accepts(self, state: Hashable) -> bool:
        stack, mode, sub = state
        return not stack and (mode == "after" or (mode == "num" and _NUMBER.accepts(sub)))


_NUMBER = NumberText()


# JSON Schema `format`s a span can be held to, as regular expressions over the string's content
FORMAT_PATTERNS = {
    "date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "time": r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?",
    "date-time": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
                 r"(Z|[+-]\d{2}:\d{2})",
    "email": r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
}


@dataclass(frozen=True)
class Pattern:
    """A JSON string's content that matches a regular expression (a schema's `pattern`, or a `format` as one).

    The expression is compiled to a finite automaton (world/tools/regex_automata.py); a pattern JSON Schema leaves
    unanchored may have any text around its match. Quotes, backslashes and control characters stay out, as in
    TextContent, so the content is its own unescaped value."""

    regex: str
    fsm: Automaton = field(compare=False, repr=False)  # built once, when the span was laid out

    def start(self) -> Hashable:
        return self.fsm.start

    def step(self, state: Hashable, ch: str) -> Hashable | None:
        if ch in '"\\' or ord(ch) < 0x20:
            return None
        return self.fsm.step(state, ch)

    def accepts(self, state: Hashable) -> bool:
        return self.fsm.accepts(state)


def pattern_grammar(schema: dict) -> Pattern | None:
    """The Pattern a string schema asks for (its `pattern`, else a known `format`), or None; patterns the
    compiler cannot read (look-arounds, back-references) or whose automaton is over the caps are left to the checks."""
    regex = schema.get("pattern") if isinstance(schema.get("pattern"), str) else None
    if regex is not None:
        regex = search_regex(regex)
    elif isinstance(schema.get("format"), str):
        regex = FORMAT_PATTERNS.get(schema["format"])
    if regex is None:
        return None
    try:
        return Pattern(regex, automaton(regex))
    except ValueError:  # no automaton (look-arounds, back-references) or one over the caps: left to the checks
        return None


