"""Field names a rule's CEL check reads, held against the world's schemas: a typo is caught at Validate.

A check reads `response.<field>...`, `call.arguments.<field>...`, `call.name` and `state.<key>...`. A response
field that no tool's response schema declares, where every schema is closed, is a problem (with the nearest
declared name); where some tool's response is open (no schema, or no `properties`) it is only a warning, as is a
state key the initial state does not have (state has no schema, and a simulator may add keys)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from wmstudio.problems import Problem

STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
REFERENCE = re.compile(r"(?<![\w.])(response|state|call)((?:\.[A-Za-z_]\w*(?!\w)(?!\s*\())+)")  # not .size()
CALL_FIELDS = ("name", "arguments")
OPEN = None  # a schema level whose field names are not known


def reference_findings(tools: list[Any], rules: list[Any], initial_state: Any) -> tuple[list[Problem], list[str]]:
    """(problems, warnings) for every field reference of every rule's check; problems name the rule's `check`."""
    responses = [tool.response for tool in tools]
    arguments = [tool.parameters for tool in tools]
    problems: list[Problem] = []
    warnings: list[str] = []
    for i, rule in enumerate(rules):
        if not rule.check:
            continue
        path = f"rules[{i}].check"
        for root, names in references(rule.check):
            if root == "call":
                if names[0] not in CALL_FIELDS:
                    problems.append(Problem(path, f"`call.{names[0]}` does not exist: a check reads `call.name` and "
                                                  "`call.arguments.<argument>`"))
                elif names[0] == "arguments" and len(names) > 1:
                    _hold(f"call.arguments.{'.'.join(names[1:])}", names[1:], arguments, "no tool's parameters",
                          path, problems, warnings)
            elif root == "response":
                _hold(f"response.{'.'.join(names)}", names, responses, "no tool's response schema", path, problems,
                      warnings)
            elif isinstance(initial_state, dict) and names[0] not in initial_state:
                warnings.append(f"{path}: `state.{names[0]}` is not a key of the initial state (keys: "
                                f"{', '.join(list(initial_state)[:8]) or 'none'}); a check reading it fails unless "
                                "the state gains it")
    return problems, warnings


def references(expression: str) -> list[tuple[str, list[str]]]:
    """(root, [field, ...]) for each `response.a.b`, `call.x`, `state.k` the expression reads (not in strings)."""
    bare = STRING_LITERAL.sub('""', expression)
    return [(m.group(1), m.group(2).lstrip(".").split(".")) for m in REFERENCE.finditer(bare)]


def _hold(shown: str, names: list[str], schemas: list[Any], nowhere: str, path: str, problems: list[Problem],
          warnings: list[str]) -> None:
    """Walk `names` down the schemas; a name that no schema at its level declares is a problem when every
    schema there is closed, a warning when some is open (it may hold the field), nothing when all are open."""
    level = list(schemas)
    for name in names:
        fields = [_properties(schema) for schema in level]
        closed = [f for f in fields if f is not OPEN]
        below = [f[name] for f in closed if name in f]
        if below:
            level = below
            continue
        if not closed:
            return
        if len(closed) < len(fields):
            warnings.append(f"{path}: `{shown}`: `{name}` is in {nowhere} that declares its fields; others are "
                            "open, so the name is not checked")
            return
        near = difflib.get_close_matches(name, sorted({key for f in closed for key in f}), n=1)
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        problems.append(Problem(path, f"`{shown}`: `{name}` is in {nowhere}{hint}: fix the name, or declare the "
                                      "field in the schema"))
        return


def _properties(schema: Any) -> dict[str, Any] | None:
    """A schema's declared fields, or OPEN when it declares none (no schema, no properties, a list/union)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return OPEN
    return schema["properties"]
