"""The steps every importer shares: check the tool's name, sanitise it, check both schemas, make the Tool.

Format modules turn their source shape into schemas; this module is where a Tool is finally made, so
the name rules and the metaschema check are the same whatever the source."""

from __future__ import annotations

from typing import Any

from wmstudio.world.tools.findings import Findings, tool_label
from wmstudio.world.tools.schema import SchemaPass, schema_problems
from wmstudio.world.tools.tool import NAME_PATTERN, Tool, sanitise_name


def start_tool(
    path: str, name: Any, name_path: str, findings: Findings, loose: bool, schema_root: str | None = None
) -> SchemaPass | None:
    """Check the tool's name; return the SchemaPass its schemas are normalised with, or None if nameless.

    `path` names the tool in warnings; `schema_root` (default `path`) is where its `parameters` live."""
    if not isinstance(name, str) or not name.strip():
        what = "missing" if name is None else f"not usable as a name ({_short(name)})"
        findings.problem(name_path, f"{what}: every tool needs a `name` (text such as \"get_weather\")")
        return None
    root = path if schema_root is None else schema_root
    return SchemaPass(findings=findings, label=tool_label(path, name), tool_path=root, loose=loose, tool=name)


def finish_tool(
    run: SchemaPass,
    name: str,
    description: Any,
    description_path: str,
    parameters: dict[str, Any],
    parameters_path: str,
    response: Any = None,
    response_path: str = "",
    original_name: Any = None,
    annotations: dict[str, Any] | None = None,
) -> Tool:
    """Make the Tool: sanitised name (original kept), text description, metaschema-checked schemas."""
    clean = sanitise_name(name)
    if clean != name:
        run.warn("", f"name {name!r} does not fit {NAME_PATTERN.pattern}: renamed {clean!r} "
                                     "(the original is kept as original_name)")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        run.findings.problem(description_path, f"must be text, got {_short(description)}: describe the tool in words")
        description = ""
    schema_problems(parameters, parameters_path, run.findings)
    if response is not None:
        schema_problems(response, response_path, run.findings)
    kept = original_name if isinstance(original_name, str) and original_name else None
    if kept is None and clean != name:
        kept = name
    return Tool(
        name=clean,
        description=description,
        parameters=parameters,
        response=response,
        original_name=kept if kept != clean else None,
        annotations=annotations,
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
