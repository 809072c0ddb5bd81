"""Tool import entry points: detect the source format and turn raw tool lists into normalised Tools.

PLACEHOLDER: only the OpenAI shape for now; the full set of formats is being written (issue [worlds])."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.problems import InvalidInput, Problem
from wmstudio.world.tools.tool import Tool, sanitise_name

FORMATS = ("auto", "openai", "mcp", "bfcl", "toolemu", "tau", "api-bank", "swe-agent")


@dataclass
class ImportResult:
    """Tools read from one source plus warnings about lossy conversions (for stderr or the UI)."""

    tools: list[Tool]
    warnings: list[str] = field(default_factory=list)


def parse_tools(raw: Any, fmt: str = "auto", source: str = "tools") -> ImportResult:
    """Normalise an already-parsed tool list; problems name `source[i]...` paths."""
    if not isinstance(raw, list):
        raise InvalidInput([Problem(source, "expected a list of tools")])
    tools, problems = [], []
    for i, item in enumerate(raw):
        fn = item.get("function", item) if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            problems.append(Problem(f"{source}[{i}]", "expected a tool object with a `name`"))
            continue
        name = sanitise_name(fn["name"])
        tools.append(
            Tool(
                name=name,
                description=fn.get("description", ""),
                parameters=fn.get("parameters") or {"type": "object", "properties": {}},
                response=fn.get("response"),
                original_name=fn.get("original_name") or (fn["name"] if name != fn["name"] else None),
            )
        )
    if problems:
        raise InvalidInput(problems)
    return ImportResult(tools)
