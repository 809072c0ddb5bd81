"""SWE-agent tool bundles (`config.yaml`: `tools: {name: {signature, docstring, arguments}}`) into Tools.

The docstring becomes the description with the command-line signature appended; each argument record
becomes a property. `argument_format` (how the shell command is spelled) and bundle-level keys such as
`state_command` concern running the tool, not its interface, and are dropped quietly."""

from __future__ import annotations

from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.fields import fields_schema
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

TOOL_KEYS = frozenset({"name", "signature", "docstring", "arguments"})
QUIET_TOOL_KEYS = frozenset({"end_name"})
QUIET_ARGUMENT_KEYS = frozenset({"argument_format"})


def bundle_tools(bundle: dict[str, Any], path: str, findings: Findings) -> list[tuple[Any, str]]:
    """The tool entries of a bundle `{"tools": {name: spec}}`, each with its name put in and its path."""
    tools = bundle.get("tools")
    if not isinstance(tools, dict):
        findings.problem(at(path, "tools"), "a SWE-agent bundle needs `tools: {name: {signature, docstring, "
                                            "arguments}}`")
        return []
    where = at(path, "tools")
    return [({"name": name, **spec} if isinstance(spec, dict) else spec, at(where, name))
            for name, spec in tools.items()]


def parse_swe_tool(item: Any, path: str, findings: Findings) -> list[Tool]:
    """One SWE-agent tool entry (name already put in); arguments are optional unless `required: true`."""
    if not isinstance(item, dict):
        findings.problem(path, "expected a tool entry {signature, docstring, arguments}")
        return []
    run = start_tool(path, item.get("name"), at(path, "name"), findings, loose=True)
    if run is None:
        return []
    parameters = fields_schema(item.get("arguments"), at(path, "arguments"), run,
                               ignored=QUIET_ARGUMENT_KEYS, what="argument")
    docstring, signature = item.get("docstring"), item.get("signature")
    description = docstring.strip() if isinstance(docstring, str) else docstring
    if isinstance(signature, str) and signature.strip() and (description is None or isinstance(description, str)):
        description = f"{description}\n\nSignature: {signature.strip()}" if description else \
            f"Signature: {signature.strip()}"
    extra = sorted(set(item) - TOOL_KEYS - QUIET_TOOL_KEYS)
    if extra:
        run.warn("", f"field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, item["name"], description, at(path, "docstring"), parameters, at(path, "arguments"))]


FORMAT = ToolFormat("swe-agent", "a bundle `tools: {name: {signature, docstring, arguments}}`", order=70,
                    looks_like=lambda item: "signature" in item or "docstring" in item or "arguments" in item,
                    parse=parse_swe_tool)
