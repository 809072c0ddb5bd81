"""OpenAI-style function tools (and tau-bench / tau2, which use the same shape), into Tools.

Accepts `{"type": "function", "function": {...}}`, the bare `{name, description, parameters}`, the
Responses-API flat form, AppWorld's bare parameter maps, and wmstudio's own output (`response`,
`original_name`, `annotations`), which round-trips."""

from __future__ import annotations

import json
from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.fields import BARE_MAP_NOTE, is_bare_parameter_map
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.schema import SchemaPass, normalise_schema, parameters_schema
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

FUNCTION_KEYS = frozenset({"name", "description", "parameters", "response", "original_name", "annotations"})
TOOL_FIELDS = FUNCTION_KEYS | {"type", "strict", "function"}  # any one of them besides `name` makes an entry a tool
HINT_TYPES = {"title": str, "readOnlyHint": bool, "destructiveHint": bool, "idempotentHint": bool,
              "openWorldHint": bool}


def has_tool_fields(item: dict[str, Any]) -> bool:
    """False for an object with a name but only fields no tool has (a test case, a task, a chat row)."""
    others = set(item) - {"name"}
    return not others or bool(others & TOOL_FIELDS)


def fields_only_message(item: dict[str, Any]) -> str:
    """Why an object with a name and only unknown fields is not a tool, and what to give instead."""
    fields = ", ".join(sorted(set(item) - {"name"})[:6])
    return (f"not a tool: a name but no description or parameters, only {fields}; give a file of tool definitions "
            "(a JSON list of OpenAI functions, an MCP tools/list result...)")


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
            name = function.get("name")
            findings.warn(path, f"field(s) not kept: {', '.join(extra)}", name if isinstance(name, str) else None)
    elif "function" in item:
        findings.problem(at(path, "function"), 'must be an object {"name", "description", "parameters": {...}}')
        return []
    elif not has_tool_fields(item):
        findings.problem(path, fields_only_message(item))
        return []
    run = start_tool(path, function.get("name"), at(function_path, "name"), findings, loose, function_path)
    if run is None:
        return []
    parameters_path = at(function_path, "parameters")
    raw_parameters = _maybe_json_text(function.get("parameters"), parameters_path, run)
    if is_bare_parameter_map(raw_parameters):
        run.warn("", BARE_MAP_NOTE)
        raw_parameters = {"type": "object", "properties": raw_parameters}
    parameters = parameters_schema(raw_parameters, parameters_path, run)
    response, response_path = function.get("response"), at(function_path, "response")
    if response is not None:
        response = normalise_schema(_maybe_json_text(response, response_path, run), response_path, run)
    annotations = checked_annotations(function.get("annotations"), at(function_path, "annotations"), findings)
    extra = sorted(set(function) - FUNCTION_KEYS - ({"type"} if function is item else set()))
    if extra:
        run.warn("", f"field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, function["name"], function.get("description"), at(function_path, "description"),
                        parameters, parameters_path, response, response_path, function.get("original_name"),
                        annotations)]


def checked_annotations(raw: Any, path: str, findings: Findings) -> dict[str, Any] | None:
    """MCP tool annotations as given (an object); a known hint of the wrong type is a problem."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        findings.problem(path, 'must be an object such as {"readOnlyHint": true, "title": "Get weather"}')
        return None
    for key, kind in HINT_TYPES.items():
        if key in raw and not isinstance(raw[key], kind):
            findings.problem(at(path, key), "must be text" if kind is str else "must be true or false")
    return raw


def _maybe_json_text(value: Any, path: str, run: SchemaPass) -> Any:
    """Some dumps store a schema as JSON text; parse it (with a warning) rather than reject it."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        run.findings.problem(path, f"must be a JSON Schema object; got text that is not JSON ({err.msg} at column "
                                   f"{err.colno}): write the schema as an object")
        return None
    run.warn("", f"{path.rsplit('.', 1)[-1]} given as JSON text: parsed")
    return parsed


FORMAT = ToolFormat(
    "openai", 'tools like {"type": "function", "function": {"name", "description", "parameters"}}', order=60,
    looks_like=lambda item: item.get("type") == "function" or isinstance(item.get("function"), dict),
    parse=parse_function_doc, also_reads=("openai", "bfcl"), function_docs=True)
