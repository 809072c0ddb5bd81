"""tau2-bench tool dumps (`Tool.model_dump_json()`: `{name, short_desc, long_desc, params, returns, raises}`).

`params` is the parameters schema and the description is tau2's own (`short_desc`, a blank line, `long_desc`).
`returns` is pydantic's wrapper model `{"properties": {"returns": <schema>}, "$defs": {...}}`: the response
schema is that `returns` property with the wrapper's `$defs` lifted into it, as real responses are the
bare value. `raises` is written into the description, as ToolEmu's exceptions are."""

from __future__ import annotations

from typing import Any

from wmstudio.world.tools.build import finish_tool, start_tool
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.formats.openai import parse_function_doc
from wmstudio.world.tools.schema import SchemaPass, normalise_schema, parameters_schema
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

DUMP_KEYS = frozenset({"name", "short_desc", "long_desc", "params", "returns", "raises"})
QUIET_WHEN_EMPTY = ("examples", "info")


def is_tau2_dump(item: Any) -> bool:
    """True for a tau2 `Tool.model_dump()` record: `params` beside `returns` or `short_desc`."""
    return isinstance(item, dict) and "params" in item and ("returns" in item or "short_desc" in item)


def parse_tau_tool(item: Any, path: str, findings: Findings) -> list[Tool]:
    """One tau-bench / tau2 tool: a model dump, or the OpenAI-shaped `openai_schema` the agent sees."""
    if not is_tau2_dump(item):
        return parse_function_doc(item, path, findings)
    run = start_tool(path, item.get("name"), at(path, "name"), findings, loose=False)
    if run is None:
        return []
    short, long = item.get("short_desc"), item.get("long_desc")
    description = short if not (isinstance(short, str) and isinstance(long, str) and long) else f"{short}\n\n{long}"
    raises = _raises_lines(item.get("raises"), at(path, "raises"), findings)
    if raises and isinstance(description, (str, type(None))):
        description = ((description or "").rstrip() + "\n\nRaises:\n" + "\n".join(raises)).lstrip()
        run.warn("", "`raises` written into the description (the response schema has no error shape)")
    parameters = parameters_schema(item.get("params"), at(path, "params"), run)
    response = _response(item.get("returns"), at(path, "returns"), run)
    dropped = [key for key in QUIET_WHEN_EMPTY if item.get(key)]
    extra = sorted(set(item) - DUMP_KEYS - set(QUIET_WHEN_EMPTY)) + dropped
    if extra:
        run.warn("", f"field(s) not kept: {', '.join(extra)}")
    return [finish_tool(run, item["name"], description, at(path, "short_desc"), parameters, at(path, "params"),
                        response, at(path, "returns"))]


def _response(raw: Any, path: str, run: SchemaPass) -> Any:
    """The schema of the bare returned value: `returns.properties.returns` plus the wrapper's `$defs`."""
    if raw is None:
        return None
    inner = raw.get("properties", {}).get("returns") if isinstance(raw, dict) else None
    if not isinstance(inner, dict):
        run.warn(path, "no `properties.returns` in the pydantic wrapper: the whole schema is kept as the response")
        return normalise_schema(raw, path, run)
    schema = dict(inner)
    definitions = raw.get("$defs")
    if isinstance(definitions, dict) and definitions:
        schema["$defs"] = {**definitions, **schema.get("$defs", {})}
    return normalise_schema(schema, at(at(path, "properties"), "returns"), run)


def _raises_lines(raw: Any, path: str, findings: Findings) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        findings.problem(path, 'must be a list of {"type": "ValueError", "desc": "..."}')
        return []
    lines = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            findings.problem(at(path, i), 'expected {"type": "ValueError", "desc": "If the order is not found."}')
            continue
        desc = entry.get("desc")
        lines.append(f"- {entry['type']}: {desc}" if isinstance(desc, str) and desc else f"- {entry['type']}")
    return lines


FORMAT = ToolFormat(
    "tau", "OpenAI-shaped tools whose schemas may use $defs, $ref and anyOf, or tau2 dumps {name, params, returns}",
    order=50, looks_like=is_tau2_dump, parse=parse_tau_tool, also_reads=("openai", "bfcl"), function_docs=True)
