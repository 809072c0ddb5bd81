"""OpenAI-style function tools (and tau-bench / tau2, which use the same shape), into Tools.

Accepts `{"type": "function", "function": {...}}`, the bare `{name, description, parameters}`, the
Responses-API flat form, and wmstudio's own output (`response`, `original_name`), which round-trips."""

from __future__ import annotations

import json
from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.schema import normalise_schema, parameters_schema
from wmstudio.world.tools.tool import Tool

FUNCTION_KEYS = frozenset({"name", "description", "parameters", "response", "original_name"})


def parse_function_doc(item: Any, path: str, findings: Findings, loose: bool = False) -> list[Tool]:
    """One OpenAI-shaped tool (wrapped or bare).

    `loose` (BFCL) takes other ecosystems' type names silently and maps unknown ones to {} with a warning."""
    if not isinstance(item, dict):
        findings.problem(path, 'expected a tool object such as {"type": "function", "function": {"name": ...}}')
        return []
    kind = item.get("type")
    if kind not in (None, "function") and "function" not in item and "parameters" not in item:
        findings.warn(path, f"OpenAI built-in tool type {kind!r} has no schema: skipped")
        return []
    function, function_path = item, path
    if isinstance(item.get("function"), dict):
        function, function_path = item["function"], at(path, "function")
        extra = sorted(set(item) - {"type", "function"})
        if extra:
            findings.warn(path, f"field(s) not kept: {', '.join(extra)}")
    elif "function" in item:
        findings.problem(at(path, "function"), 'must be an object {"name", "description", "parameters": {...}}')
        return []
    run = start_tool(path, function.get("name"), at(function_path, "name"), findings, loose, function_path)
    if run is None:
        return []
    parameters_path = at(function_path, "parameters")
    raw_parameters = _maybe_json_text(function.get("parameters"), parameters_path, findings, run.label)
    parameters = parameters_schema(raw_parameters, parameters_path, run)
    response, response_path = function.get("response"), at(function_path, "response")
    if response is not None:
        response = normalise_schema(_maybe_json_text(response, response_path, findings, run.label), response_path, run)
    extra = sorted(set(function) - FUNCTION_KEYS - ({"type"} if function is item else set()))
    if extra:
        findings.warn(run.label, f"field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, function["name"], function.get("description"), at(function_path, "description"),
                        parameters, parameters_path, response, response_path, function.get("original_name"))]


def _maybe_json_text(value: Any, path: str, findings: Findings, label: str) -> Any:
    """Some dumps store a schema as JSON text; parse it (with a warning) rather than reject it."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        findings.problem(path, f"must be a JSON Schema object; got text that is not JSON ({err.msg} at column "
                               f"{err.colno}): write the schema as an object")
        return None
    findings.warn(label, f"{path.rsplit('.', 1)[-1]} given as JSON text: parsed")
    return parsed
