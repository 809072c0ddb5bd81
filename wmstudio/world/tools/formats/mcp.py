"""MCP tools (a `tools/list` result: `{name, title?, description, inputSchema, outputSchema?, annotations?}`).

`inputSchema` becomes the parameters, `outputSchema` the response schema and `annotations` (readOnlyHint,
destructiveHint, idempotentHint, openWorldHint, title) the tool's annotations; the JSON-RPC envelope and
the `{"tools": [...]}` wrapper are taken off by the importer before a tool gets here."""

from __future__ import annotations

from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.formats.openai import checked_annotations
from wmstudio.world.tools.schema import normalise_schema, parameters_schema
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

MCP_KEYS = frozenset({"name", "description", "inputSchema", "outputSchema", "title", "annotations"})
QUIET_KEYS = frozenset({"_meta", "icons"})  # display and transport details, nothing a world model needs


def parse_mcp_tool(item: Any, path: str, findings: Findings) -> list[Tool]:
    """One MCP tool definition; a missing `inputSchema` is a problem, as the MCP schema requires it."""
    if not isinstance(item, dict):
        findings.problem(path, 'expected an MCP tool {"name": ..., "description": ..., "inputSchema": {...}}')
        return []
    run = start_tool(path, item.get("name"), at(path, "name"), findings, loose=False)
    if run is None:
        return []
    if "inputSchema" not in item:
        findings.problem(at(path, "inputSchema"), "missing: an MCP tool declares its arguments in `inputSchema` "
                                                  '(use {"type": "object", "properties": {}} for none)')
    parameters = parameters_schema(item.get("inputSchema"), at(path, "inputSchema"), run)
    response = item.get("outputSchema")
    if response is not None:
        response = normalise_schema(response, at(path, "outputSchema"), run)
    annotations = checked_annotations(item.get("annotations"), at(path, "annotations"), findings)
    description, title = item.get("description"), item.get("title")
    if isinstance(title, str) and title and title != item["name"]:
        if description in (None, ""):
            description = title
        elif annotations is None or "title" not in annotations:
            annotations = {"title": title, **(annotations or {})}  # MCP shows `title` first, then annotations.title
        elif annotations["title"] != title:
            run.warn("", "`title` not kept (the description and annotations.title are)")
    extra = sorted(set(item) - MCP_KEYS - QUIET_KEYS)
    if extra:
        run.warn("", f"MCP field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, item["name"], description, at(path, "description"), parameters,
                        at(path, "inputSchema"), response, at(path, "outputSchema"), annotations=annotations)]


FORMAT = ToolFormat("mcp", "tools with an `inputSchema`, as in a tools/list result", order=30,
                    looks_like=lambda item: "inputSchema" in item, parse=parse_mcp_tool)
