"""Domain rules: natural-language text for the prompt plus an optional CEL check over a step.

A check sees `state` (initial state), `call`, `response` (parsed JSON) and `history` (earlier steps)
and must be true; it runs in cel-python, a maintained CEL implementation, never in Python `eval`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy

from wmstudio.problems import InvalidInput, Problem

CEL_VARIABLES = ("state", "call", "response", "history")


@dataclass
class Rule:
    """One domain rule; `check` is a CEL expression that holds for every consistent response."""

    text: str
    check: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "check": self.check} if self.check else {"text": self.text}


_ENV = celpy.Environment()


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


def cel_syntax_problem(expression: str, path: str = "check") -> Problem | None:
    """None when `expression` parses as CEL, else a Problem naming line, column and the offending text."""
    if not isinstance(expression, str) or not expression.strip():
        return Problem(path, "empty CEL expression: write one such as `response.total >= 0`, or drop `check`")
    try:
        _compiled(expression)
    except celpy.CELParseError as err:
        line, column = getattr(err, "line", None), getattr(err, "column", None)
        where = f"line {line}, column {column}" if line else "unknown position"
        first = str(err).splitlines()[0].strip() if str(err).strip() else expression
        return Problem(path, f"CEL syntax error at {where} in `{first}`: fix the expression")
    except Exception as err:  # noqa: BLE001 - cel-python raises assorted errors on odd input
        return Problem(path, f"CEL expression cannot be compiled ({err}): fix the expression")
    return None


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


def evaluate_check(expression: str, variables: dict[str, Any]) -> tuple[bool, str | None]:
    """Evaluate one check: (True, None) when it holds, else (False, why). Eval errors count as violations.

    A missing field or a type mismatch means the response does not have the shape the rule expects,
    which is itself an inconsistency, so it is reported rather than silently passed."""
    activation = {name: _to_cel(variables.get(name)) for name in CEL_VARIABLES}
    try:
        result = _compiled(expression).evaluate(activation)
    except celpy.CELEvalError as err:
        return False, f"check could not be evaluated: {_eval_message(err)}"
    except celpy.CELParseError as err:
        return False, f"check is not valid CEL: {str(err).splitlines()[0]}"
    if isinstance(result, celpy.CELEvalError):
        return False, f"check could not be evaluated: {_eval_message(result)}"
    if isinstance(result, celpy.celtypes.BoolType) or isinstance(result, bool):
        return (True, None) if bool(result) else (False, "check is false")
    return False, f"check returned {type(result).__name__}, not a boolean: make it a true/false condition"


def _eval_message(err: Exception) -> str:
    args = getattr(err, "args", ())
    return str(args[0]) if args else str(err)
