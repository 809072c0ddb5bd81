"""Tool import entry points: tool files or parsed data in any known format, to normalised Tools.

`parse_tools` reads already-parsed data (a world file's `tools`, a paste in the UI); `import_tools_file`
reads a JSON, JSON Lines or YAML file. Both report every problem at once as InvalidInput and every lossy
conversion as a warning."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput
from wmstudio.world.tools.detect import Entry, check_format, locate_entries, not_tool_problem
from wmstudio.world.tools.files import read_tools_file
from wmstudio.world.tools.findings import Findings
from wmstudio.world.tools.formats import BY_NAME, FORMATS, bfcl
from wmstudio.world.tools.not_tools import non_tool_problem
from wmstudio.world.tools.schema_size import MAX_SCHEMA_NODES, expanded_nodes, too_large_message
from wmstudio.world.tools.tool import Tool

__all__ = ["FORMATS", "ImportResult", "import_tools_file", "parse_tools"]



@dataclass
class ImportResult:
    """Tools read from one source plus warnings about lossy conversions (for stderr or the UI)."""

    tools: list[Tool]
    warnings: list[str] = field(default_factory=list)


def parse_tools(raw: Any, fmt: str = "auto", source: str = "tools") -> ImportResult:
    """Normalise already-parsed tool data (a list, or e.g. an MCP `{"tools": [...]}`); problems name `source[i]...`."""
    return _import(raw, fmt, root=source, lines=None, func_doc_dir=None, origin=None)


def import_tools_file(path: str | Path, fmt: str = "auto") -> ImportResult:
    """Read a tool file (JSON, JSON Lines or YAML) in `fmt` (or detect it); messages name the file and line."""
    check_format(fmt)
    loaded = read_tools_file(path)
    result = _import(loaded.data, fmt, root="", lines=loaded.lines,
                     func_doc_dir=loaded.path.parent / bfcl.FUNC_DOC_FOLDER, origin=str(path))
    if not result.tools:
        result.warnings.append(f"{path}: no tools found")
    return result


def _import(raw: Any, fmt: str, root: str, lines: list[int] | None, func_doc_dir: Path | None,
            origin: str | None) -> ImportResult:
    check_format(fmt)
    looks_like = non_tool_problem(raw, root)
    if looks_like is not None:
        raise InvalidInput([looks_like], origin)
    findings = Findings()
    entries = locate_entries(raw, fmt, root, lines, findings)
    entries = _expand_bfcl_records(entries, func_doc_dir, findings)
    made: list[tuple[Tool, str]] = []
    for entry in entries:
        if entry.fmt is None:
            findings.problems.append(not_tool_problem(entry))
            continue
        made += [(tool, entry.path) for tool in BY_NAME[entry.fmt].parse(entry.item, entry.path, findings)]
    for tool, path in made:  # a schema a validator could spend minutes on is refused here, for every caller
        for part, schema in (("parameters", tool.parameters), ("response", tool.response)):
            if expanded_nodes(schema) > MAX_SCHEMA_NODES:
                findings.problem(f"{path}.{part}" if path else part, too_large_message())
    tools = _without_duplicates(made, findings)
    if findings.problems:
        findings.fold_problems()
        raise InvalidInput(findings.problems, origin)
    findings.fold_warnings()
    return ImportResult(tools, findings.warnings)


def _expand_bfcl_records(entries: list[Entry], func_doc_dir: Path | None, findings: Findings) -> list[Entry]:
    """Replace BFCL question records by the union of their functions, multi-turn tasks by their classes' docs."""
    kinds = [bfcl.record_kind(e.item) if e.fmt in BY_NAME and BY_NAME[e.fmt].function_docs else None
             for e in entries]
    expanded: list[Entry] = []
    done: set[str] = set()
    for entry, kind in zip(entries, kinds, strict=False):
        if kind not in ("question", "task"):
            expanded.append(entry)
            continue
        if kind in done:
            continue  # every record of this kind was expanded where the first one stood
        done.add(kind)
        records = [(e.item, e.path) for e, k in zip(entries, kinds, strict=False) if k == kind]
        docs = (bfcl.functions_of_questions(records, findings) if kind == "question"
                else bfcl.functions_of_tasks(records, func_doc_dir, findings))
        expanded += [Entry(doc, path, entry.fmt) for doc, path in docs]
    return expanded


def _without_duplicates(made: list[tuple[Tool, str]], findings: Findings) -> list[Tool]:
    """Drop exact repeats (with a warning); two different tools under one name is a problem."""
    first: dict[str, tuple[Tool, str]] = {}
    tools: list[Tool] = []
    for tool, path in made:
        if tool.name not in first:
            first[tool.name] = (tool, path)
            tools.append(tool)
        elif first[tool.name][0] == tool:
            findings.warn(path, f"tool {tool.name!r} repeats {first[tool.name][1]} exactly: dropped")
        else:
            earlier, earlier_path = first[tool.name]
            findings.problem(path, f"duplicate tool name {tool.name!r}{_origin(tool)}, also used at {earlier_path}"
                                   f"{_origin(earlier)}: rename or remove one")
    return tools


def _origin(tool: Tool) -> str:
    return f" (from {tool.original_name!r})" if tool.original_name else ""
