"""Domain rules: natural-language text for the prompt plus an optional CEL check over a step.

A check sees `state` (initial state), `call`, `response` (parsed JSON), `history` (earlier steps) and `directives`
(the world's steering directives as canonical text) and must be true; it runs in cel-python, a maintained CEL implementation, never in Python `eval`.
Numbers compare as JSON numbers (100 == 100.0), and a check that cannot run says why in words. A check is at most
MAX_CHECK_CHARS long and runs within a CPU-time budget (`input_limits.check_seconds`)."""

from __future__ import annotations

import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import base_functions

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.input_limits import CHECK_SECONDS_ENV, MAX_CHECK_CHARS, check_seconds
from wmstudio.world.rules.budget import OverBudget, charge_shared, check_clock, evaluate_within
from wmstudio.world.rules.patterns import matches_problem

CEL_VARIABLES = ("state", "call", "response", "history", "directives")
PLACES = {"response": "the response", "state": "the initial state", "call": "the call", "history": "the history",
          "directives": "the directives"}
KINDS = {"String": "text", "Int": "a number", "Uint": "a number", "Double": "a number", "Bool": "true/false",
         "List": "a list", "Map": "an object", "Null": "null", "Bytes": "bytes", "Timestamp": "a timestamp",
         "Duration": "a duration"}
VERBS = {"relation": "compares", "addition": "adds", "multiplication": "multiplies"}


@dataclass
class Rule:
    """One domain rule; `check` is a CEL expression that holds for every consistent response."""

    text: str
    check: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "check": self.check} if self.check else {"text": self.text}


_ONE_TOOL = re.compile(r'^\s*call\.name\s*!=\s*"([^"\\]+)"\s*(?:\|\||\?\s*true\s*:)')
_SOME_TOOLS = re.compile(r'^\s*!\(\s*call\.name\s+in\s+\[([^\]]*)\]\s*\)\s*\|\|')
_PRECONDITION_TOOLS = re.compile(r'\?\s*true\s*:\s*call\.name\s+in\s+\[([^\]]*)\]\s*\?')


def rule_tools(rule: Rule) -> set[str] | None:
    """The tools a rule's check is about, read from how it starts (`call.name != "refund_order" || ...`,
    `!(call.name in [...]) || ...`, an error code's `... ? true : call.name in [...] ? ...`); None when the check says
    nothing about the tool (or there is no check): the rule is about every call. A prompt can leave out the rules
    of other tools (a world with error-code rules has two or three times the rules of one without)."""
    check = rule.check or ""
    if (one := _ONE_TOOL.match(check)) is not None:
        return {one.group(1)}
    some = _SOME_TOOLS.match(check) or (_PRECONDITION_TOOLS.search(check) if check.startswith(("response.error",
                                                                                               "!(response.error"))
                                        else None)
    if some is None:
        return None
    return set(re.findall(r'"([^"\\]+)"', some.group(1)))


_ONE_CODE = re.compile(r'^\s*response\.error\s*!=\s*"([^"\\]+)"')
_SOME_CODES = re.compile(r'^\s*!\(\s*response\.error\s+in\s+\[([^\]]*)\]\s*\)')


def rule_codes(rule: Rule) -> list[str]:
    """The error codes whose cause a rule states: its check starts `response.error != "CODE" || ...` or
    `!(response.error in ["A", "B"]) || ...` (sims/preconditions.py writes them so); [] for any other rule."""
    check = rule.check or ""
    if (one := _ONE_CODE.match(check)) is not None:
        return [one.group(1)]
    some = _SOME_CODES.match(check)
    return re.findall(r'"([^"\\]+)"', some.group(1)) if some is not None else []


def rules_for_tool(rules: list[Rule], tool: str) -> list[Rule]:
    """The rules that may bear on a call to `tool` (see rule_tools), in their order."""
    return [rule for rule in rules if (tools := rule_tools(rule)) is None or tool in tools]


def _is_number(value: Any) -> bool:
    return isinstance(value, (celtypes.IntType, celtypes.UintType, celtypes.DoubleType))


def _mixed(value: Any, other: Any) -> bool:
    """True for an int and a double (or uint): JSON has one number type, so such a pair is compared by value."""
    return _is_number(value) and _is_number(other) and type(value) is not type(other)


def _json_numbers(cel_operator: Callable[[Any, Any], Any], python_operator: Callable[[Any, Any], Any],
                  result: type) -> Callable[[Any, Any], Any]:
    """`cel_operator`, except that an int and a double meet as numbers (Python compares them exactly)."""

    def apply(left: Any, right: Any) -> Any:
        if _mixed(left, right):
            if result is celtypes.DoubleType:
                return celtypes.DoubleType(python_operator(float(left), float(right)))
            native = (float(left) if isinstance(left, celtypes.DoubleType) else int(left),
                      float(right) if isinstance(right, celtypes.DoubleType) else int(right))
            return result(python_operator(*native))
        return cel_operator(left, right)

    return apply


def _json_in(item: Any, container: Any) -> Any:
    """`x in list` with JSON numbers: 100 is in [100.0]."""
    if _is_number(item) and isinstance(container, celtypes.ListType) and all(_is_number(v) for v in container):
        return celtypes.BoolType(any(float(v) == float(item) for v in container))
    return base_functions["_in_"](item, container)


def _divide(left: Any, right: Any) -> Any:
    return left / right if right else float("inf") if left > 0 else float("-inf") if left < 0 else float("nan")


JSON_NUMBERS = {
    "_==_": _json_numbers(base_functions["_==_"], operator.eq, celtypes.BoolType),
    "_!=_": _json_numbers(base_functions["_!=_"], operator.ne, celtypes.BoolType),
    "_<_": _json_numbers(base_functions["_<_"], operator.lt, celtypes.BoolType),
    "_<=_": _json_numbers(base_functions["_<=_"], operator.le, celtypes.BoolType),
    "_>_": _json_numbers(base_functions["_>_"], operator.gt, celtypes.BoolType),
    "_>=_": _json_numbers(base_functions["_>=_"], operator.ge, celtypes.BoolType),
    "_+_": _json_numbers(base_functions["_+_"], operator.add, celtypes.DoubleType),
    "_-_": _json_numbers(base_functions["_-_"], operator.sub, celtypes.DoubleType),
    "_*_": _json_numbers(base_functions["_*_"], operator.mul, celtypes.DoubleType),
    "_/_": _json_numbers(base_functions["_/_"], _divide, celtypes.DoubleType),
    "_in_": _json_in,
}

_ENV = celpy.Environment()
MAX_CHECK_DEPTH = 300  # levels of a check's syntax tree (one parenthesis adds ten); Python's stack allows ~800
CACHE_CHARS = 100_000  # checks kept compiled, counted in characters: a compiled check holds ~600 bytes a character
# (the five demo worlds' rules hold 40,431: an evaluation over them must not recompile as it goes)
_CACHE: OrderedDict[str, Any] = OrderedDict()  # expression -> program, least recently used first
_CACHE_LOCK = threading.Lock()  # the studio checks in several threads at once


def _compiled(expression: str) -> Any:
    """The compiled check, from a cache bounded by the characters of the checks it holds (not their count: a long
    check costs memory in proportion), so a server's memory stays bounded whatever rules its users write."""
    with _CACHE_LOCK:
        program = _CACHE.get(expression)
        if program is not None:
            _CACHE.move_to_end(expression)
            return program
    if _bracket_depth(expression) > MAX_CHECK_DEPTH // 10:  # each bracket is ten levels of the tree: not parsed
        raise NestedTooDeep(too_deep_message())
    started = check_clock()
    try:
        program = _ENV.program(_ENV.compile(expression), functions=JSON_NUMBERS)
        if _tree_depth(program.ast) > MAX_CHECK_DEPTH:  # evaluating and reading it would recurse past Python's stack
            raise NestedTooDeep(too_deep_message())
    finally:
        charge_shared(check_clock() - started)  # a request's compiling is part of its checks' CPU budget
    with _CACHE_LOCK:
        _CACHE[expression] = program
        held = sum(map(len, _CACHE))
        while held > CACHE_CHARS and len(_CACHE) > 1:
            held -= len(_CACHE.popitem(last=False)[0])
    return program


class NestedTooDeep(RecursionError):
    """A check whose syntax tree is deeper than MAX_CHECK_DEPTH: refused before anything walks it."""


def too_deep_message() -> str:
    return (f"the check nests over {MAX_CHECK_DEPTH} levels deep (about {MAX_CHECK_DEPTH // 10} nested parentheses, "
            f"or {MAX_CHECK_DEPTH // 2} terms chained by one operator): split it into several rules")


def _bracket_depth(expression: str) -> int:
    """How deep the check's parentheses, brackets and braces nest outside its string literals."""
    deepest = depth = 0
    for part in re.split(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', expression):
        for ch in part:
            if ch in "([{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in ")]}":
                depth -= 1
    return deepest


def _tree_depth(tree: Any) -> int:
    """The depth of a parsed check's tree, counted without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in getattr(node, "children", ()))
    return deepest


def parsed_check(expression: str) -> Any:
    """The syntax tree of a check, compiled once for evaluation and reading alike (its compiling counts against the
    request's check budget); the compiler's errors pass through."""
    if len(expression) > MAX_CHECK_CHARS:
        raise ValueError(too_long_message(expression))
    return _compiled(expression).ast


def too_long_message(expression: str) -> str:
    """Why a check over MAX_CHECK_CHARS is refused (it is never compiled: a 1 MB check took 26 s and 1.3 GB)."""
    return (f"the check is {len(expression):,} characters, over the {MAX_CHECK_CHARS:,}-character limit: split it "
            "into several rules")


def cel_syntax_problem(expression: str, path: str = "check") -> Problem | None:
    """None when `expression` parses as CEL, else a Problem naming line, column and the offending text."""
    if not isinstance(expression, str) or not expression.strip():
        return Problem(path, "empty CEL expression: write one such as `response.total >= 0`, or drop `check`")
    if len(expression) > MAX_CHECK_CHARS:
        return Problem(path, too_long_message(expression))
    try:
        _compiled(expression)
    except NestedTooDeep:
        return Problem(path, too_deep_message())
    except RecursionError:
        return Problem(path, "CEL expression nested too deeply to compile: write it with fewer nested parentheses")
    except celpy.CELParseError as err:
        line, column = getattr(err, "line", None), getattr(err, "column", None)
        where = f"line {line}, column {column}" if line else "unknown position"
        first = str(err).splitlines()[0].strip() if str(err).strip() else expression
        return Problem(path, f"CEL syntax error at {where} in `{first}`: fix the expression")
    except Exception as err:  # noqa: BLE001 - cel-python raises assorted errors on odd input
        return Problem(path, f"CEL expression cannot be compiled ({err}): fix the expression")
    unmatchable = matches_problem(expression)
    return Problem(path, unmatchable) if unmatchable else None


def compile_rules(rules: list[Rule], path: str = "rules") -> None:
    """Raise InvalidInput naming every rule whose check is not valid CEL (`rules[1].check: ...`)."""
    problems = [
        p
        for i, rule in enumerate(rules)
        if rule.check is not None
        and (p := cel_syntax_problem(rule.check, f"{path}[{i}].check")) is not None
    ]
    if problems:
        raise InvalidInput(problems)


def _to_cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def evaluate_value(expression: str, variables: dict[str, Any]) -> Any:
    """The JSON value (text, number or true/false) of a CEL expression over `variables`; ValueError when it
    cannot be evaluated within the check budget or is not such a value. Repair uses it to compute what a rule
    says a field must hold."""
    if len(expression) > MAX_CHECK_CHARS:
        raise ValueError(too_long_message(expression))
    try:
        activation = {name: _to_cel(variables.get(name)) for name in CEL_VARIABLES}
        result = evaluate_within(_compiled(expression), activation, check_seconds())
    except (OverBudget, RecursionError, OverflowError, TypeError, celpy.CELEvalError, celpy.CELParseError) as err:
        raise ValueError(f"cannot evaluate {expression!r}: {type(err).__name__}") from None
    if isinstance(result, celtypes.BoolType):
        return bool(result)
    if isinstance(result, (celtypes.IntType, celtypes.UintType)):
        return int(result)
    if isinstance(result, celtypes.DoubleType):
        return float(result)
    if isinstance(result, str):  # a StringType, or the plain str some of cel-python's operators give (`"a" + b`)
        return str(result)
    raise ValueError(f"{expression!r} gives {type(result).__name__}, not text, a number or true/false")


def cel_activation(variables: dict[str, Any], names: tuple[str, ...] = CEL_VARIABLES) -> dict[str, Any] | str:
    """`variables` as CEL values, or why one cannot be read: converted once, the activation serves every check of a
    step (converting a state for each of a world's rules cost as much as evaluating them)."""
    activation = {}
    for name in names:
        try:
            activation[name] = _to_cel(variables.get(name))
        except RecursionError:
            return f"check not run: {PLACES.get(name, name)} is nested too deeply for a check to read it"
        except (ValueError, OverflowError) as err:  # cel-python's integers are 64-bit, as CEL's are
            what = "a whole number beyond CEL's 64-bit range" if "overflow" in str(err) else f"a value ({err})"
            return f"check not run: {PLACES.get(name, name)} holds {what}, which a check cannot read"
    return activation


def evaluate_check(expression: str, variables: dict[str, Any], names: tuple[str, ...] = CEL_VARIABLES,
                   activation: dict[str, Any] | str | None = None) -> tuple[bool, str | None]:
    """Evaluate one check: (True, None) when it holds, else (False, why). Eval errors count as violations.

    A missing field or a type mismatch means the response does not have the shape the rule expects,
    which is itself an inconsistency, so it is reported rather than silently passed; so is a check that is too long,
    runs out of its CPU-time budget, or meets values nested too deeply to read. `names` are the variables it sees
    (a step's five by default; a scenario's success condition sees `state` and `trajectory`). `activation` is
    `cel_activation(variables, names)` when the caller converted them already."""
    if len(expression) > MAX_CHECK_CHARS:
        return False, f"check not run: {too_long_message(expression)}"
    if activation is None:
        activation = cel_activation(variables, names)
    if isinstance(activation, str):
        return False, activation
    seconds = check_seconds()
    try:
        result = evaluate_within(_compiled(expression), activation, seconds)
    except NestedTooDeep:
        return False, f"check not run: {too_deep_message()}"
    except OverBudget:
        return False, (f"check stopped after {seconds:g} s of CPU time, its budget: simplify it (nested .all(), "
                       f".exists() or .map() multiply their lists' lengths) or raise {CHECK_SECONDS_ENV}")
    except RecursionError:
        return False, "check could not be evaluated: it or the values it reads are nested too deeply"
    except TypeError:  # cel-python runs a macro (all, exists, map, filter) over a number or null without a CEL error
        return False, ("check could not be evaluated: `.all()`, `.exists()`, `.map()` or `.filter()` met a value that "
                       "is not a list or an object")
    except celpy.CELEvalError as err:
        return False, f"check could not be evaluated: {eval_message(err, expression)}"
    except celpy.CELParseError as err:
        return False, f"check is not valid CEL: {str(err).splitlines()[0]}"
    if isinstance(result, celpy.CELEvalError):
        return False, f"check could not be evaluated: {eval_message(result, expression)}"
    if isinstance(result, celpy.celtypes.BoolType) or isinstance(result, bool):
        return (True, None) if bool(result) else (False, "check is false")
    return False, f"check returned {type(result).__name__}, not a boolean: make it a true/false condition"


def eval_message(err: Exception, expression: str) -> str:
    """Why a check could not run, in words and naming the part of it that failed (no cel-python internals)."""
    args = getattr(err, "args", ())
    text = str(args[0]) if args else str(err)
    kind = args[1] if len(args) > 1 else None
    part = _failed_part(err, expression) or expression.strip()
    quoted = f"`{part}`"
    if kind is KeyError and text.startswith("undeclared reference"):
        name = re.search(r"undeclared reference to '([^']*)'", text)
        return (f"`{name.group(1) if name else part}` is not known: a check can use "
                f"{', '.join(CEL_VARIABLES)} and CEL's functions")
    if kind is KeyError:
        root = re.match(r"\s*(\w+)", part)
        place = PLACES.get(root.group(1), "") if root else ""
        return f"{quoted} is not in {place}" if place else f"{quoted} does not exist"
    if kind is IndexError:
        return f"{quoted} is past the end of the list"
    if kind is ZeroDivisionError:
        return f"{quoted} divides by zero"
    if "does not support field selection" in text:
        value = re.match(r"(\w+)Type", text)
        what = KINDS.get(value.group(1), "a value") if value else "a value"
        return f"{quoted} reads a field of {what}, which has no fields"
    kinds = [KINDS.get(name, name.lower()) for name in re.findall(r"celtypes\.(\w+?)Type", text)]
    if kind is TypeError and len(kinds) == 2:
        verb = next((v for key, v in VERBS.items() if _rule_of(err).startswith(key)), "combines")
        joiner = "to" if verb == "adds" else "with" if verb in ("compares", "combines") else "by"
        return f"{quoted} {verb} {kinds[0]} {joiner} {kinds[1]}"
    if kind is TypeError:
        return f"{quoted} uses a value of the wrong type for its operator or function"
    plain = len(text) <= 80 and not re.search(r"Token\(|<class|_\W+_|overload|Type\(", text)
    return f"{quoted} could not be computed ({text})" if plain else f"{quoted} could not be computed"


def _failed_part(err: Exception, expression: str) -> str | None:
    """The text of the sub-expression cel-python was evaluating when it failed, when it says."""
    meta = getattr(getattr(err, "tree", None), "meta", None)
    start, end = getattr(meta, "start_pos", None), getattr(meta, "end_pos", None)
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(expression):
        return expression[start:end].strip()
    return None


def _rule_of(err: Exception) -> str:
    """The grammar rule of the failed sub-expression (`relation`, `addition`...), or ""."""
    data = getattr(getattr(err, "tree", None), "data", "")
    return str(getattr(data, "value", data))
