"""API-Bank API definitions (`{name, description, input_parameters, output_parameters}`) into Tools.

Types are Python-style (`str`, `list(str)`, `Union[List[dict], dict]`) and nothing says which inputs are
required: every input is taken as required unless its description starts `[Optional]` (one warning says
so). `output_parameters` becomes the response object; `source_file` and `database_name` are provenance."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.fields import fields_schema
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

API_KEYS = frozenset({"name", "description", "input_parameters", "output_parameters"})
QUIET_KEYS = frozenset({"source_file", "database_name"})
REQUIRED_RULE = ("API-Bank declares no required parameters: every input parameter is taken as required "
                 "unless its description starts with [Optional]")
_OPTIONAL = re.compile(r"^\s*[\[(]\s*optional\s*[\])]", re.IGNORECASE)


def parse_api(item: Any, path: str, findings: Findings) -> list[Tool]:
    """One API-Bank API; inputs are required unless described `[Optional] ...`."""
    if not isinstance(item, dict):
        findings.problem(path, 'expected an API-Bank API {"name": ..., "description": ..., "input_parameters": {...}}')
        return []
    run = start_tool(path, item.get("name"), at(path, "name"), findings, loose=True)
    if run is None:
        return []
    inputs, outputs = item.get("input_parameters"), item.get("output_parameters")
    if inputs:
        findings.warn("", REQUIRED_RULE)
    parameters = fields_schema(inputs, at(path, "input_parameters"), run, required_default=_required)
    response = None
    if outputs is not None:
        response = fields_schema(outputs, at(path, "output_parameters"), run, required_default=True, what="output")
    extra = sorted(set(item) - API_KEYS - QUIET_KEYS)
    if extra:
        run.warn("", f"field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, item["name"], item.get("description"), at(path, "description"), parameters,
                        at(path, "input_parameters"), response, at(path, "output_parameters"))]


def _required(record: dict[str, Any]) -> bool:
    """API-Bank's only hint: a description that starts `[Optional]`."""
    description = record.get("description")
    return not (isinstance(description, str) and _OPTIONAL.match(description))


FORMAT = ToolFormat("api-bank", "APIs with `input_parameters` and `output_parameters`", order=40,
                    looks_like=lambda item: "input_parameters" in item or "output_parameters" in item,
                    parse=parse_api)
