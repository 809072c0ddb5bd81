"""Values a rule's equalities imply: `response.count == size(response.entries)` says what `count` must hold.

A small model does not do the arithmetic a rule states (a fee plus a fare difference, a list's length); the rule
itself can. In a check, each equality with a top-level response field alone on one side (`response.F == E` or
`E == response.F`), or first in a sum (`response.F + E1 == E2`, so F = E2 - E1), gives a value for F: E evaluated
on the current call, state and response. Inside a macro (`LIST.exists(f, response.F == f.fare * 2)`) each
element of LIST in turn stands in for the variable, giving one value per element. A field read as a time
(`timestamp(response.F) - timestamp(state.now) == duration("3600s")`) is solved the same way and written back as
RFC 3339 text. Repair tries these values as steering; they are never reported as the model's own output."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.rules.cel import evaluate_value
from wmstudio.world.rules.references import STRING_LITERAL

_LONE_FIELD_LEFT = re.compile(r"response\.([A-Za-z_]\w*)\s*==(?!=)")
_LONE_FIELD_RIGHT = re.compile(r"(?<![=!<>])==\s*response\.([A-Za-z_]\w*)")
_FIELD_FIRST_IN_SUM = re.compile(r"response\.([A-Za-z_]\w*)\s*([+-])(?![=+-])")
_TIME_FIRST = r"timestamp\(\s*response\.([A-Za-z_]\w*)\s*\)\s*"
_TIME_FIRST_IN_SUM = re.compile(_TIME_FIRST + r"([+-])(?![=+-])")
_LONE_TIME_LEFT = re.compile(_TIME_FIRST + r"==(?!=)")
_MACRO = re.compile(r"\.(exists|all|exists_one)\(\s*([A-Za-z_]\w*)\s*,")
MAX_MACRO_ELEMENTS = 32  # elements tried per macro: a rule over a long list stays cheap
_OPENERS, _CLOSERS = "([{", ")]}"
# operators that bind looser than `==` (or as loosely): an operand of `==` ends where one of them starts
_TWO_CHAR = ("&&", "||", "==", "!=", "<=", ">=")
_BOUNDARIES = (*_TWO_CHAR, "?", ":", ",", "<", ">")


def implied_values(check: str, variables: dict[str, Any]) -> list[tuple[str, Any]]:
    """(field, value) for each equality of `check` with a top-level response field alone on one side (or first in
    a sum) whose other side evaluates, in the order written, then those inside macros, one per list element;
    each (field, value) once."""
    bare = _blank_strings(check)
    found: list[tuple[str, Any]] = []
    for match in _LONE_FIELD_LEFT.finditer(bare):
        if _stands_alone_before(bare, match.start()):
            other = check[match.end():_operand_end(bare, match.end())]
            found += _evaluated(match.group(1), other, variables)
    for match in _LONE_FIELD_RIGHT.finditer(bare):
        if _stands_alone_after(bare, match.end()):
            other = check[_operand_start(bare, match.start()):match.start()]
            found += _evaluated(match.group(1), other, variables)
    for match in _FIELD_FIRST_IN_SUM.finditer(bare):
        if _stands_alone_before(bare, match.start()):
            found += _solved_sum(check, bare, match, variables)
    for match in _LONE_TIME_LEFT.finditer(bare):
        if _stands_alone_before(bare, match.start()):
            other = check[match.end():_operand_end(bare, match.end())]
            found += _evaluated(match.group(1), f"string({other.strip()})", variables) if other.strip() else []
    for match in _TIME_FIRST_IN_SUM.finditer(bare):
        if _stands_alone_before(bare, match.start()):
            found += _solved_sum(check, bare, match, variables, as_text=True)
    for match in _MACRO.finditer(bare):
        found += _inside_macro(check, bare, match, variables)
    unique: list[tuple[str, Any]] = []
    for pair in found:
        if not any(pair[0] == seen[0] and pair[1] == seen[1] and type(pair[1]) is type(seen[1]) for seen in unique):
            unique.append(pair)
    return unique


def _solved_sum(check: str, bare: str, match: re.Match, variables: dict[str, Any],
                as_text: bool = False) -> list[tuple[str, Any]]:
    """`response.F + REST == OTHER` gives F = (OTHER) - (REST); with `-`, F = (OTHER) + (REST). `as_text`: F is read
    as a time, so its value is that time's RFC 3339 text."""
    rest_end = _operand_end(bare, match.end())
    if not bare.startswith("==", rest_end) or bare.startswith("===", rest_end):
        return []
    rest = check[match.end():rest_end]
    other = check[rest_end + 2:_operand_end(bare, rest_end + 2)]
    if not rest.strip() or not other.strip():
        return []
    inverse = "-" if match.group(2) == "+" else "+"
    solved = f"({other.strip()}) {inverse} ({rest.strip()})"
    return _evaluated(match.group(1), f"string({solved})" if as_text else solved, variables)


def _inside_macro(check: str, bare: str, match: re.Match, variables: dict[str, Any]) -> list[tuple[str, Any]]:
    """The values a macro's body implies with each element of its list (up to MAX_MACRO_ELEMENTS) written in
    place of the macro's variable."""
    receiver = check[_operand_start(bare, match.start()):match.start()].strip()
    body_end = _operand_end(bare, match.end())
    while body_end < len(bare) and bare[body_end] not in _CLOSERS:  # a body runs to the macro's own closer
        body_end = _operand_end(bare, body_end + 1)
    body, variable = check[match.end():body_end], match.group(2)
    if not receiver or variable not in body:
        return []
    try:
        count = evaluate_value(f"size({receiver})", variables)
    except ValueError:
        return []
    found: list[tuple[str, Any]] = []
    for index in range(min(int(count), MAX_MACRO_ELEMENTS)):
        element = f"({receiver})[{index}]"
        found += implied_values(re.sub(rf"(?<![\w.]){variable}(?=\s*[.\[])", lambda _: element, body), variables)
    return found


def _evaluated(name: str, expression: str, variables: dict[str, Any]) -> list[tuple[str, Any]]:
    if not expression.strip() or re.search(rf"\bresponse\.{name}\b", expression):
        return []  # the field on both sides says nothing about its value
    try:
        return [(name, evaluate_value(expression.strip(), variables))]
    except ValueError:
        return []


def _blank_strings(text: str) -> str:
    """The text with every string literal's inside blanked (same length), so quotes hide no operators."""
    return STRING_LITERAL.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], text)


def _stands_alone_before(text: str, start: int) -> bool:
    """Nothing that binds tighter than `==` sits just before `response.F` (so it is the whole left operand)."""
    before = text[:start].rstrip()
    return not (before.endswith(("!", ".", "-", "+", "*", "/", "%")) or re.search(r"[\w\]\)]$", before))


def _stands_alone_after(text: str, end: int) -> bool:
    """`response.F` is the whole right operand: what follows is an end, a closer or a looser operator."""
    after = text[end:].lstrip()
    return not after or after[0] in _CLOSERS or after.startswith(_BOUNDARIES)


def _operand_end(text: str, start: int) -> int:
    """Where the operand that begins at `start` ends: a looser operator or a closer at its own depth."""
    depth, i = 0, start
    while i < len(text):
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _CLOSERS:
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and text.startswith(_BOUNDARIES, i):
            return i
        i += 1
    return len(text)


def _operand_start(text: str, end: int) -> int:
    """Where the operand that ends at `end` begins, scanning back the same way."""
    depth, i = 0, end - 1
    while i >= 0:
        if text[i] in _CLOSERS:
            depth += 1
        elif text[i] in _OPENERS:
            if depth == 0:
                return i + 1
            depth -= 1
        elif depth == 0 and (text[max(i - 1, 0):i + 1] in _TWO_CHAR or text[i] in "?:,<>"):
            return i + 1
        i -= 1
    return 0
