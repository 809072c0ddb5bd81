"""Error codes as rules: a response may carry an error code only when the call, the state and the history give its
cause (REFUND_WINDOW_EXPIRED: the order was delivered over the window ago), or a directive forced it.

Without these a pinned `status: "error"` passes every check whatever code and reason the model writes. Each rule's
check reads `response.error != "CODE" || <steered> ? true : call.name in [tools] ? (<cause>) : false`, the shape repair reads (model/generation/repair.py) to find
the codes a state allows. A check sees the *initial* state, so a cause that earlier steps can change also looks at
the history (an order cancelled two steps ago). `directives` are the world's steering directives as canonical text
(`inject_error: CODE`, `empty_result`): an injected code needs no cause, and `empty_result` makes a lookup answer
its not-found code. Codes with no cause in the state (an outage, a rate limit) get no rule."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from wmstudio.world.rules.cel import Rule
from wmstudio.world.tools import Tool

JSON = dict[str, Any]
INJECTED = '("inject_error: " + response.error) in directives'
ARGUMENT_CODES = ("MISSING_ARGUMENT", "INVALID_ARGUMENT")
_CEL_TYPES = {"string": "[string]", "integer": "[int]", "number": "[int, double]", "boolean": "[bool]",
              "array": "[list]", "object": "[map]"}


def precondition(codes: str | Iterable[str], text: str, tools: Iterable[str], cause: str,
                 steered_by: str | None = None) -> Rule:
    """The rule that `codes` (one or several) answer only a call to one of `tools` for which the CEL `cause` holds, or
    one where an `inject_error` directive (or the directive `steered_by`, e.g. `empty_result`) asked for the code.

    The outer test is a conditional, not `||`: cel-python lets an error inside filter() or map() escape `||`."""
    names = [codes] if isinstance(codes, str) else list(codes)
    guard = f'response.error != "{names[0]}"' if len(names) == 1 else f"!(response.error in {_cel_list(names)})"
    steered = INJECTED + (f' || "{steered_by}" in directives' if steered_by else "")
    return Rule(text, f"{guard} || {steered} ? true : call.name in {_cel_list(tools)} ? ({cause}) : false")


def argument_rules(tools: list[Tool], invalid_also: dict[str, str] | None = None) -> list[Rule]:
    """One rule: MISSING_ARGUMENT only when the call lacks a required argument; INVALID_ARGUMENT only when one breaks
    the tool's parameters (type, enum, bounds, unknown name) or, per tool, `invalid_also[tool]` (CEL) holds: the
    simulator's own refusals of well-typed values (a date that is not YYYY-MM-DD)."""
    extra = invalid_also or {}
    needing = [t for t in tools if t.parameters.get("required")]
    missing = " : ".join(f'call.name == "{t.name}" ? {_any_missing(t.parameters)}' for t in needing) + " : false"
    invalid = " : ".join(
        f'call.name == "{t.name}" ? !({fits_parameters(t.parameters)})'
        + (f" || ({extra[t.name]})" if t.name in extra else "") for t in tools) + " : false"
    return [precondition(ARGUMENT_CODES, "MISSING_ARGUMENT, INVALID_ARGUMENT: only for bad arguments",
                         [t.name for t in tools], f'response.error == "MISSING_ARGUMENT" ? ({missing}) : ({invalid})')]


def fits_parameters(parameters: JSON) -> str:
    """CEL that holds when `call.arguments` fit a parameters schema in the subset the simulators check
    (world/tools/arguments.py): each given argument's type, enum, bounds, lengths and item type, and no unknown names."""
    properties = parameters.get("properties", {})
    parts = []
    if parameters.get("additionalProperties") is False:
        parts.append(f"call.arguments.all(k, k in {_cel_list(properties)})")
    for name, schema in properties.items():
        value = f"call.arguments.{name}"
        checks = _value_checks(value, schema)
        if checks:
            parts.append(f"(!has({value}) || ({' && '.join(checks)}))")
    return f"type(call.arguments) == map ? ({' && '.join(parts) or 'true'}) : false"


def _value_checks(value: str, schema: JSON) -> list[str]:
    """CEL conditions on one argument, the type first; the rest only run on a value of that type (a conditional: a
    macro over a value that is not a list fails even behind `&&` in cel-python)."""
    kind = schema.get("type")
    checks = _bounds(value, schema, kind)
    if kind not in _CEL_TYPES:
        return checks
    typed = f"type({value}) in {_CEL_TYPES[kind]}"
    return [f"({typed} ? {' && '.join(checks)} : false)" if checks else typed]


def _bounds(value: str, schema: JSON, kind: Any) -> list[str]:
    checks = []
    if "enum" in schema:
        checks.append(f"{value} in {_cel_list(schema['enum'])}")
    if "minimum" in schema:
        checks.append(f"{value} >= {schema['minimum']}")
    if "maximum" in schema:
        checks.append(f"{value} <= {schema['maximum']}")
    if "minLength" in schema:
        checks.append(f"size({value}) >= {schema['minLength']}")
    if kind == "array":
        if "minItems" in schema:
            checks.append(f"size({value}) >= {schema['minItems']}")
        if "maxItems" in schema:
            checks.append(f"size({value}) <= {schema['maxItems']}")
        item_kind = schema.get("items", {}).get("type")
        if item_kind in _CEL_TYPES:
            checks.append(f"{value}.all(i, type(i) in {_CEL_TYPES[item_kind]})")
    return checks


def _any_missing(parameters: JSON) -> str:
    return "(" + " || ".join(f"!has(call.arguments.{name})" for name in parameters["required"]) + ")"


def _cel_list(values: Iterable[Any]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"
