"""Where the tools are in parsed data, and which source format each one is in.

Takes off the wrappers (JSON-RPC `result`, `{"tools": [...]}`, a single tool, a SWE-agent bundle),
then recognises each entry by its shape; when nothing fits, the message lists the formats tried."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.json_types import describe_value
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.formats import BY_NAME, FORMATS, TOOL_FORMATS
from wmstudio.world.tools.formats.openai import fields_only_message, has_tool_fields
from wmstudio.world.tools.formats.swe_agent import bundle_tools
from wmstudio.world.tools.schema import iter_subschemas
from wmstudio.world.tools.type_names import STANDARD_TYPES, map_type_name

Located = tuple[Any, str, "str | None"]  # an entry, its path, and its format when the wrapper already says it


NOT_A_TOOL = (f"not a tool in any known format (tried {', '.join(FORMATS[1:])}): a tool needs at least a `name`; "
              "or pass --format to say which format it is in")


@dataclass
class Entry:
    """One raw tool (or toolkit / BFCL record) with the path that names it and the format to read it as."""

    item: Any
    path: str
    fmt: str | None  # None: recognised as no format (NOT_A_TOOL)


def check_format(fmt: Any) -> None:
    """InvalidInput listing the known formats when `fmt` is not one of them."""
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)} (--format)")


def detect_item(item: Any) -> str | None:
    """The format one entry is in, judged by its keys (each format's `looks_like`, in their order); a bare function
    doc is BFCL's when it uses BFCL's own type names, else OpenAI's; None when it fits none."""
    if not isinstance(item, dict):
        return None
    for fmt in TOOL_FORMATS:
        if fmt.looks_like(item):
            return fmt.name
    if "name" in item and not has_tool_fields(item):
        return None  # a name and only fields no tool has: a test case, a task...
    if "name" in item or "parameters" in item or "description" in item or isinstance(item.get("type"), str):
        return "bfcl" if _uses_own_types(item.get("parameters"), item.get("response")) else "openai"
    return None


def not_tool_problem(entry: Entry) -> Problem:
    """Why an entry recognised as no format is not a tool, at its path."""
    item = entry.item
    if isinstance(item, dict) and "name" in item and not has_tool_fields(item):
        return Problem(entry.path, fields_only_message(item))
    return Problem(entry.path, NOT_A_TOOL)


def locate_entries(raw: Any, fmt: str, root: str, lines: list[int] | None, findings: Findings) -> list[Entry]:
    """Every tool entry in `raw` with its path (`line N` for JSON Lines) and the format it is read as."""
    located = _unwrap(raw, fmt, root, lines, findings)
    entries: list[Entry] = []
    misfits: list[tuple[str, str]] = []  # (path, the format the entry looks like)
    for item, path, known in located:
        found = known or detect_item(item)
        if fmt == "auto":
            entries.append(Entry(item, path, found))  # None: reported in order by the importer
        elif found is not None and found != fmt and found not in BY_NAME[fmt].also_reads:
            misfits.append((path, found))
        else:
            entries.append(Entry(item, path, fmt))
    looks = {found for _, found in misfits}
    if len(misfits) > 1 and len(looks) == 1 and not entries:  # one message for a whole file in the wrong format
        found = looks.pop()
        findings.problem(root, f"none of the {len(misfits)} entries looks like {fmt} ({BY_NAME[fmt].sign}); they look "
                               f"like {found}: use --format {found} or --format auto")
    else:
        for path, found in misfits:
            findings.problem(path, f"does not look like {fmt} ({BY_NAME[fmt].sign}); it looks like {found}: "
                                   f"use --format {found} or --format auto")
    return entries


def detect_format(raw: Any) -> str:
    """The format of already-parsed tool data (the most common among its entries); InvalidInput if none fits."""
    findings = Findings()
    entries = locate_entries(raw, "auto", "", None, findings)
    findings.problems += [not_tool_problem(entry) for entry in entries if entry.fmt is None]
    findings.fold_problems()
    if findings.problems or not entries:
        raise InvalidInput(findings.problems or "no tools found: nothing to detect a format from")
    return Counter(entry.fmt for entry in entries).most_common(1)[0][0]


def _unwrap(raw: Any, fmt: str, root: str, lines: list[int] | None, findings: Findings) -> list[Located]:
    """(item, path, format if the wrapper already says it) for each entry inside the wrappers."""
    if isinstance(raw, list):
        return [(item, f"line {lines[i]}" if lines else at(root, i), None) for i, item in enumerate(raw)]
    if not isinstance(raw, dict):
        findings.problem(root, f"expected a list of tools or an object holding them, got {describe_value(raw)}: "
                               "give a JSON list of tools, an MCP {\"tools\": [...]} result or a tool bundle")
        return []
    if "jsonrpc" in raw or ("result" in raw and "id" in raw) or ("error" in raw and "id" in raw):
        if "error" in raw:
            error = raw["error"] if isinstance(raw["error"], dict) else {"message": raw["error"]}
            findings.problem(at(root, "error"), f"a JSON-RPC error response ({error.get('message')!r}) holds no "
                                                "tools: save the result of a successful tools/list call")
            return []
        return _unwrap(raw.get("result"), fmt, at(root, "result"), None, findings)
    tools = raw.get("tools")
    if isinstance(tools, dict) and fmt in ("auto", "swe-agent"):
        return [(item, path, "swe-agent") for item, path in bundle_tools(raw, root, findings)]
    if detect_item(raw) == "toolemu":
        return [(raw, root, None)]
    if isinstance(tools, list):
        if raw.get("nextCursor"):
            findings.warn(root, "`nextCursor` is set: the server has more tools than this page holds")
        return [(item, at(at(root, "tools"), i), None) for i, item in enumerate(tools)]
    if isinstance(tools, dict):
        findings.problem(at(root, "tools"), f"an object of tools is a SWE-agent bundle, not {fmt}: "
                                            "use --format swe-agent or --format auto")
        return []
    if detect_item(raw) is not None or fmt != "auto":
        return [(raw, root, None)]  # a single tool
    keys = ", ".join(list(raw)[:8]) or "none"
    findings.problem(root, f"no tools found in an object with keys {keys} (tried {', '.join(FORMATS[1:])}): "
                           "give a list of tools or {\"tools\": [...]}, or pass --format")
    return []


def _uses_own_types(*schemas: Any) -> bool:
    """True when a schema uses known non-JSON-Schema type names (`dict`, `float`...) or BFCL's `optional`.

    An unknown name (a typo such as `strng`) does not count: OpenAI-style reading reports it as a problem."""
    for schema in schemas:
        for node, _ in iter_subschemas(schema, ""):
            kind = node.get("type")
            names = kind if isinstance(kind, list) else [kind]
            if "optional" in node or any(
                isinstance(n, str) and n not in STANDARD_TYPES and map_type_name(n) is not None for n in names
            ):
                return True
    return False


