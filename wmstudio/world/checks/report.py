"""Deterministic verdicts on one tool response: JSON, the response schema, the world's rules, the pinned anchors, and
the ids and numbers its message names, and what it makes up with no rule written (world/checks/invention.py).

The same CheckReport feeds the UI badges, RL reward terms and coherence metrics, so it never needs a model."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import exceptions as schema_exceptions

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.checks.explained_codes import unexplained_code
from wmstudio.world.checks.invention import invention_lines
from wmstudio.world.checks.message_mentions import message_strays
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path, get_path
from wmstudio.world.rules.cel import cel_activation, evaluate_check
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.directives import parse_directive
from wmstudio.world.tools import Tool
from wmstudio.world.tools.linear_patterns import validator_for

MAX_MESSAGE_CHARS = 500


@dataclass
class CheckReport:
    """What held and what did not for one response; `ok` only when it is JSON and nothing was violated.
    `message_strays`: ids and numbers the response's message names that nothing holds (world/checks/message_mentions.py)."""

    ok: bool
    json_valid: bool
    schema_errors: list[str] = field(default_factory=list)
    rule_violations: list[dict[str, str]] = field(default_factory=list)  # {"rule": text, "message": why}
    anchor_violations: list[str] = field(default_factory=list)
    message_strays: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)  # records, fields and text made up (world/checks/invention.py)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "json_valid": self.json_valid,
            "schema_errors": list(self.schema_errors),
            "rule_violations": [dict(v) for v in self.rule_violations],
            "anchor_violations": list(self.anchor_violations),
            "message_strays": list(self.message_strays),
            "invented": list(self.invented),
        }


def check_step(
    world: WorldSpec,
    call: Call,
    response_text: str,
    anchors: Sequence[Anchor] = (),
    history: Sequence[HistoryStep] = (),
) -> CheckReport:
    """Check `response_text` as the response of `call` after `history` in `world`, honouring `anchors`.

    InvalidInput (never a verdict) for a call to a tool the world lacks."""
    the_call, pinned, steps = call, list(anchors), list(history)
    tool = _called_tool(world, the_call)

    json_valid, response = parse_response(response_text)
    where = f"tools[{world.tools.index(tool)}].response"
    schema_errors = schema_errors_of(response, tool, where) if json_valid else []
    variables = check_variables(world, the_call, response, steps)
    activation = cel_activation(variables) if any(rule.check for rule in world.rules) else {}
    rule_violations = []
    for rule in world.rules:
        if rule.check is None:
            continue
        holds, why = evaluate_check(rule.check, variables, activation=activation)
        if not holds:
            why = why or "check is false"
            if not json_valid:
                why = f"the response is not JSON, so the check cannot hold ({why})"
            rule_violations.append({"rule": rule.text, "message": why})
    anchor_violations = [v for a in pinned if (v := anchor_violation(response, a, json_valid)) is not None]
    strays = message_strays(world, the_call, response, steps) if json_valid else []
    invented = invention_lines(world, the_call, tool, response, steps) if json_valid else []
    if json_valid and (unexplained := unexplained_code(world, response)) is not None:
        invented.append(unexplained)
    ok = json_valid and not schema_errors and not rule_violations and not anchor_violations and not strays \
        and not invented
    return CheckReport(ok, json_valid, schema_errors, rule_violations, anchor_violations, strays, invented)


def check_variables(world: WorldSpec, call: Call, response: Any, history: Sequence[HistoryStep]) -> dict[str, Any]:
    """What a rule's CEL check reads: `state`, `call`, `response` and `history` as JSON values, and `directives`, the
    world's steering directives as canonical text (`inject_error: CARD_DECLINED`; free text left out)."""
    return {
        "state": world.initial_state,
        "call": call.to_json(),
        "response": response,
        "history": [{"call": s.call.to_json(), "response": s.response_value()} for s in history],
        "directives": steering_texts(world.directives),
    }


def steering_texts(directives: Sequence[Any]) -> list[str]:
    """The vocabulary directives among `directives` as canonical text; free text and bad values are left out."""
    texts = []
    for text in directives:
        try:
            directive = parse_directive(text)
        except InvalidInput:
            continue
        if directive is not None:
            texts.append(directive.text())
    return texts


def parse_response(response_text: Any) -> tuple[bool, Any]:
    """(True, value) when the response is strict JSON (no NaN/Infinity), else (False, the text as given).

    A value that is not text is taken as already parsed; JSON nested deeper than Python can read counts as not JSON."""
    if isinstance(response_text, bytes):
        response_text = response_text.decode("utf-8", errors="replace")
    if not isinstance(response_text, str):
        return True, response_text
    try:
        return True, json.loads(response_text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError, RecursionError):
        return False, response_text


def schema_errors_of(response: Any, tool: Tool, where: str = "response") -> list[str]:
    """Each way `response` breaks the tool's response schema, as `<json path>: <message>`, sorted by path.

    The response root is written `(root)`; a tool without a response schema has no errors. A schema that
    cannot be applied is bad input: InvalidInput names it as `where` (e.g. `tools[2].response`)."""
    if tool.response is None:
        return []
    try:
        validator_cls = validator_for(tool.response)
        validator_cls.check_schema(tool.response)
        errors = sorted(validator_cls(tool.response).iter_errors(response), key=_error_order)
    except schema_exceptions.SchemaError as err:
        raise InvalidInput(
            Problem(where, f"not a valid JSON Schema ({err.message}): fix the tool's schema")
        ) from None
    except RecursionError:  # the response (not the schema) is nested deeper than validation can follow
        return ["(root): nested too deeply to check against the response schema"]
    except Exception as err:  # noqa: BLE001 - unknown types or unresolvable $refs inside the schema
        raise InvalidInput(
            Problem(where, f"cannot be applied ({err}): fix the tool's schema")
        ) from None
    return [f"{format_path(list(e.absolute_path)) or '(root)'}: {_shortened(e.message)}" for e in errors]


def _shortened(message: str) -> str:
    """A schema error quotes the value it is about; a huge value is cut so a report stays readable (and small)."""
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 1] + "\u2026"


def anchor_violation(response: Any, anchor: Anchor, json_valid: bool = True) -> str | None:
    """None when the response holds the pinned value at the anchor's path, else what it holds instead."""
    pinned = json.dumps(anchor.value, ensure_ascii=False)
    if not json_valid:
        return f"{anchor.path}: pinned to {pinned}, but the response is not JSON"
    try:
        actual = get_path(response, anchor.path)
    except (KeyError, ValueError):
        return f"{anchor.path}: missing, pinned to {pinned}"
    if json_equal(actual, anchor.value):
        return None
    return f"{anchor.path}: is {json.dumps(actual, ensure_ascii=False)}, pinned to {pinned}"


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but "1" != 1 and true != 1; objects compare by keys, lists by order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _called_tool(world: WorldSpec, call: Call) -> Tool:
    try:
        return world.tool(call.name)
    except KeyError:
        known = ", ".join(t.name for t in world.tools) or "none"
        raise InvalidInput(
            Problem("call.name", f"no tool {call.name!r} in world {world.name!r}: call one of {known}")
        ) from None


def _error_order(error: Any) -> tuple[str, str]:
    return (format_path(list(error.absolute_path)), error.message)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def argument_problems(tool: Tool, call: Call) -> list[str]:
    """Where the call's arguments break the tool's parameter schema (`arguments.amount_cents: ...`).

    Not an error: agents do send bad calls, and how the world answers them is worth simulating."""
    try:
        validator = validator_for(tool.parameters)(tool.parameters)
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(map(str, e.absolute_path)))
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot apply was reported when the world was saved
        return []
    return [f"arguments{'.' + format_path(list(e.absolute_path)) if e.absolute_path else ''}: {e.message}"
            for e in errors]
