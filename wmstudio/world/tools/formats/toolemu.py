"""ToolEmu toolkits (`{name_for_model, tools: [{name, summary, parameters, returns, exceptions}]}`) into Tools.

The agent-facing name is `name_for_model + name` (`GmailSendEmail`), as ToolEmu itself names them;
`returns` becomes the response schema and `exceptions` are written into the description. The toolkit's
own human-facing fields (`name_for_human`, `description_for_*`, `category`) describe the kit, not a tool."""

from __future__ import annotations

from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.fields import fields_schema
from wmstudio.world.tools.findings import Findings, at, tool_label
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

TOOL_KEYS = frozenset({"name", "summary", "description", "parameters", "returns", "exceptions"})


def parse_toolkit(item: Any, path: str, findings: Findings) -> list[Tool]:
    """All tools of one ToolEmu toolkit, named `<name_for_model><name>`."""
    if not isinstance(item, dict):
        findings.problem(path, 'expected a ToolEmu toolkit {"name_for_model": ..., "tools": [...]}')
        return []
    prefix = item.get("name_for_model", item.get("toolkit"))
    if not isinstance(prefix, str) or not prefix.strip():
        findings.problem(at(path, "name_for_model"), "missing: a ToolEmu toolkit needs `name_for_model`, the prefix "
                                                     "of its tool names (Gmail + SendEmail -> GmailSendEmail)")
        return []
    listed = item.get("tools")
    if not isinstance(listed, list):
        findings.problem(at(path, "tools"), "a ToolEmu toolkit needs a `tools` list")
        return []
    tools: list[Tool] = []
    with_exceptions = 0
    for i, raw in enumerate(listed):
        tool, had_exceptions = _parse_tool(raw, prefix, at(at(path, "tools"), i), findings)
        tools += tool
        with_exceptions += had_exceptions
    if with_exceptions:
        findings.warn(tool_label(path, prefix), f"exceptions of {with_exceptions} tool(s) written into their "
                                                "descriptions (the response schema has no error shape)")
    return tools


def _parse_tool(raw: Any, prefix: str, path: str, findings: Findings) -> tuple[list[Tool], bool]:
    if not isinstance(raw, dict):
        findings.problem(path, 'expected a tool {"name": ..., "summary": ..., "parameters": [...], "returns": [...]}')
        return [], False
    name = raw.get("name")
    full_name = prefix + name if isinstance(name, str) and name.strip() else name
    run = start_tool(path, full_name, at(path, "name"), findings, loose=True)
    if run is None:
        return [], False
    parameters = fields_schema(raw.get("parameters"), at(path, "parameters"), run)
    response = None
    if raw.get("returns") is not None:
        response = fields_schema(raw["returns"], at(path, "returns"), run, required_default=True, what="return value")
    summary_key = "summary" if "summary" in raw else "description"
    description = raw.get(summary_key)
    exceptions = _exception_lines(raw.get("exceptions"), at(path, "exceptions"), findings)
    if exceptions and (description is None or isinstance(description, str)):
        description = ((description or "").rstrip() + "\n\nExceptions:\n" + "\n".join(exceptions)).lstrip()
    extra = sorted(set(raw) - TOOL_KEYS)
    if extra:
        run.warn("", f"field(s) not kept: {', '.join(extra)}")
    tool = finish_tool(run, full_name, description, at(path, summary_key), parameters, at(path, "parameters"),
                       response, at(path, "returns"))
    return [tool], bool(exceptions)


def _exception_lines(raw: Any, path: str, findings: Findings) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        findings.problem(path, 'must be a list of {"name": ..., "description": ...}')
        return []
    lines = []
    for i, exception in enumerate(raw):
        if not isinstance(exception, dict) or not isinstance(exception.get("name"), str):
            findings.problem(at(path, i), 'expected {"name": "NotFoundException", "description": "..."}')
            continue
        description = exception.get("description")
        lines.append(f"- {exception['name']}: {description}" if isinstance(description, str) else
                     f"- {exception['name']}")
    return lines


FORMAT = ToolFormat("toolemu", "toolkits with `name_for_model` and a `tools` list", order=20,
                    looks_like=lambda item: "name_for_model" in item or ("toolkit" in item and
                                                                         isinstance(item.get("tools"), list)),
                    parse=parse_toolkit)
