"""BFCL (Berkeley Function Calling Leaderboard) function docs, question files and multi-turn tasks.

Function docs are OpenAI-like with their own type names (`dict`, `float`, `tuple`, `any`, Java and JS
names) and a non-standard `optional`; question files carry a `function` list per record (their union is
imported); multi-turn tasks name classes whose docs live in `multi_turn_func_doc/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput
from wmstudio.world.tools.files import read_tools_file
from wmstudio.world.tools.findings import Findings, at
from wmstudio.world.tools.formats.openai import parse_function_doc
from wmstudio.world.tools.tool import Tool
from wmstudio.world.tools.tool_format import ToolFormat

FUNC_DOC_FOLDER = "multi_turn_func_doc"
CLASS_FILES = {  # multi-turn class -> its function-doc file, as in BFCL's own constants
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}

Located = tuple[Any, str]  # a raw record and the path that names it


def record_kind(item: Any) -> str | None:
    """`function` (a function doc), `question` (a record with a `function` list), `task` (multi-turn) or None."""
    if not isinstance(item, dict):
        return None
    if "involved_classes" in item or ("initial_config" in item and "question" in item):
        return "task"
    if isinstance(item.get("function"), list):
        return "question"
    if "name" in item and "function" not in item:
        return "function"
    return None


def parse_bfcl_function(item: Any, path: str, findings: Findings) -> list[Tool]:
    """One BFCL function doc: BFCL's type names map silently, lossy ones (tuple, any) with a warning."""
    return parse_function_doc(item, path, findings, loose=True)


def functions_of_questions(records: list[Located], findings: Findings) -> list[Located]:
    """The union of the `function` lists of question records, first definition of each name kept."""
    functions: list[Located] = []
    for record, path in records:
        listed = record.get("function") if isinstance(record, dict) else None
        if not isinstance(listed, list):
            findings.problem(at(path, "function"), "a BFCL question record needs a `function` list of tool docs")
            continue
        functions += [(doc, at(at(path, "function"), i)) for i, doc in enumerate(listed)]
    return _union(functions, findings)


def functions_of_tasks(records: list[Located], func_doc_dir: Path | None, findings: Findings) -> list[Located]:
    """The tools that multi-turn tasks use: each involved class's docs minus the task's `excluded_function`."""
    classes_seen: list[str] = []
    for record, path in records:
        classes = record.get("involved_classes") if isinstance(record, dict) else None
        if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            findings.problem(at(path, "involved_classes"), "a BFCL multi-turn task needs a list of class names")
            continue
        unknown = [c for c in classes if c not in CLASS_FILES]
        if unknown:
            findings.problem(at(path, "involved_classes"), f"unknown BFCL class(es) {', '.join(unknown)}: known "
                                                           f"ones are {', '.join(CLASS_FILES)}")
        classes_seen += [c for c in classes if c in CLASS_FILES and c not in classes_seen]
    if findings.problems:
        return []
    if func_doc_dir is None or not func_doc_dir.is_dir():
        where = f"{func_doc_dir} was not found" if func_doc_dir else "no file location is known"
        names = ", ".join(CLASS_FILES[c] for c in classes_seen)
        findings.problem(records[0][1] if records else "", (
            f"BFCL multi-turn tasks hold no tool definitions; their classes are defined in {FUNC_DOC_FOLDER}/ "
            f"({names}) and {where}: import the task file from its BFCL data folder, or those function-doc files"))
        return []
    excluded = _excluded_by_all(records)
    functions: list[Located] = []
    for cls in classes_seen:
        functions += _read_func_docs(func_doc_dir / CLASS_FILES[cls], cls, excluded, findings)
    return _union(functions, findings)


def _excluded_by_all(records: list[Located]) -> dict[str, set[str]]:
    """Per class, the names that every task using the class excludes (a tool any task may call is kept)."""
    excluded_by_all: dict[str, set[str]] = {}
    for record, _ in records:
        excluded = {n for n in record.get("excluded_function") or [] if isinstance(n, str)}
        for cls in record.get("involved_classes") or []:
            excluded_by_all[cls] = excluded_by_all[cls] & excluded if cls in excluded_by_all else set(excluded)
    return excluded_by_all


def _read_func_docs(file: Path, cls: str, excluded: dict[str, set[str]], findings: Findings) -> list[Located]:
    try:
        loaded = read_tools_file(file)
    except InvalidInput as err:
        findings.problems.extend(err.problems)
        return []
    records = loaded.data if isinstance(loaded.data, list) else [loaded.data]
    lines = loaded.lines or list(range(1, len(records) + 1))
    never = excluded.get(cls, set())
    out = []
    for record, line in zip(records, lines, strict=False):
        if isinstance(record, dict) and isinstance(record.get("name"), str) and record["name"] in never:
            continue
        out.append((record, f"{file.parent.name}/{file.name} line {line}"))
    return out


def _union(functions: list[Located], findings: Findings) -> list[Located]:
    """Keep the first doc of each name; a later different doc of the same name is dropped with a warning."""
    first: dict[str, Located] = {}
    kept: list[Located] = []
    for doc, path in functions:
        name = doc.get("name") if isinstance(doc, dict) else None
        if not isinstance(name, str):
            kept.append((doc, path))  # the parser reports the missing name
            continue
        if name in first:
            if first[name][0] != doc:
                findings.warn(path, f"tool {name!r} is defined differently at {first[name][1]}: the first kept")
            continue
        first[name] = (doc, path)
        kept.append((doc, path))
    return kept


FORMAT = ToolFormat(
    "bfcl", 'function docs with "type": "dict" parameters, or records with a `function` list or `involved_classes`',
    order=10, looks_like=lambda item: record_kind(item) in ("task", "question"), parse=parse_bfcl_function,
    also_reads=("openai", "bfcl"), function_docs=True)
