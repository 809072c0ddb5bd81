"""Matching text against a world's patterns in linear time: RE2 (which CEL's `matches` already uses) for JSON
Schema's `pattern` and `patternProperties` and for the rules' `matches`, never Python's backtracking `re`, whose
`^(a+)+$` on 27 characters held a server's only interpreter lock for 23 s.

A pattern RE2 cannot run (a look-around, a back-reference) is refused where the world is read
(`pattern_problems`), naming the field; one met anyway (a world saved before) is not judged: its check passes."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2
from jsonschema import _utils as _jsonschema_utils
from jsonschema import validators
from jsonschema.exceptions import ValidationError

from wmstudio.problems import Problem
from wmstudio.world.tools.findings import at
from wmstudio.world.tools.regex_automata import MAX_PATTERN_CHARS, PatternTooComplex, automaton, search_regex

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 8 << 20  # an RE2 program's memory: bounds what one pattern may cost to compile
_OPTIONS.log_errors = False


@lru_cache(maxsize=1024)
def compiled(pattern: str):
    """The RE2 program of `pattern`, or the error text when RE2 cannot run it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is {len(pattern):,} characters, over the {MAX_PATTERN_CHARS:,} a pattern may have"
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except Exception as err:  # noqa: BLE001 - re2.error, and TypeError/ValueError for odd text
        said = err.args[0] if err.args else ""
        said = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
        return said.strip() or "RE2 cannot compile it"


def search(pattern: str, text: str) -> bool | None:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's and CEL's reading), in time linear in the
    text; None when RE2 cannot run the pattern."""
    program = compiled(pattern)
    if isinstance(program, str):
        return None
    return program.search(text) is not None


def pattern_problem(pattern: str, where: str) -> Problem | None:
    """Why a world's pattern cannot be used (not runnable in linear time, an automaton over the caps), naming
    `where`; None when it can."""
    program = compiled(pattern)
    if isinstance(program, str):
        return Problem(where, f"the pattern {pattern[:60]!r} cannot be matched in linear time ({program}): rewrite "
                              "it without look-arounds or back-references")
    try:
        automaton(search_regex(pattern))
    except PatternTooComplex as err:
        return Problem(where, f"the pattern {pattern[:60]!r} is too complex: {err}")
    except ValueError:
        pass  # no automaton (word boundaries, inline flags): its span is written freely and checked by RE2
    return None


def pattern_problems(schema: Any, where: str) -> list[Problem]:
    """A Problem for every `pattern` and `patternProperties` key of `schema` (walked whole) that cannot be used."""
    problems: list[Problem] = []
    stack = [(schema, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if key == "pattern" and isinstance(child, str):  # one of another type: the metaschema says so
                    found = pattern_problem(child, at(path, "pattern"))
                    problems += [found] if found else []
                elif key == "patternProperties" and isinstance(child, dict):
                    problems += [p for k in child if (p := pattern_problem(k, at(path, key))) is not None]
                    stack.append((child, at(path, key)))
                else:
                    stack.append((child, at(path, key)))
        elif isinstance(node, list):
            stack.extend((child, at(path, i)) for i, child in enumerate(node))
    return sorted(problems, key=lambda p: p.path)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and search(pattern, instance) is False:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


class _Re2Search:
    """Stands in for `re` inside jsonschema's helpers that search property names by `patternProperties` (which
    properties are additional, which were evaluated): the same search, in RE2."""

    @staticmethod
    def search(pattern: str, text: str) -> bool | None:
        return search(pattern, text) or None


if hasattr(_jsonschema_utils, "re"):
    _jsonschema_utils.re = _Re2Search


@lru_cache(maxsize=16)
def _linear(base: type) -> type:
    return validators.extend(base, {"pattern": _pattern, "patternProperties": _pattern_properties})


def validator_for(schema: Any) -> type:
    """jsonschema's validator class for `schema`, matching its patterns with RE2."""
    return _linear(validators.validator_for(schema))
