"""Reading a tool file: JSON, JSON Lines (BFCL's `.json` files are JSON Lines) or YAML (SWE-agent bundles).

Every way a file can be unreadable gets a message with the file, the line and column where known, and
what to do: missing, a folder, huge, empty, not UTF-8, Python source, bad JSON / JSON Lines / YAML, and input over
the limits of `input_limits` (nesting, number length, YAML aliases, lone surrogates)."""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wmstudio.problems import InvalidInput
from wmstudio.world.input_limits import (
    MAX_YAML_BYTES,
    InputRefused,
    json_lines_limited,
    loads_limited,
    read_limited,
    yaml_limited,
)

MAX_TOOLS_FILE_BYTES = 20_000_000
YAML_SUFFIXES = (".yaml", ".yml")
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_PYTHON_START = re.compile(r"^(import \w|from [\w.]+ import |def \w|async def \w|class \w|@\w|"
                           r"[A-Za-z_]\w* *(: *[\w\[\], ]+)? *= *[\[{(]|\"\"\"|\'\'\')")
PYTHON_SOURCE = "looks like Python source, not a tool file: export the tools as JSON (OpenAI function format) first"


@dataclass
class ToolsFile:
    """A parsed tool file; for JSON Lines, `lines[i]` is the line number of record `i`."""

    path: Path
    data: Any
    kind: str  # "json", "jsonl" or "yaml"
    lines: list[int] | None = None


def read_tools_file(path: str | Path, max_bytes: int = MAX_TOOLS_FILE_BYTES) -> ToolsFile:
    """Read and parse a tool file, choosing JSON, JSON Lines or YAML by suffix and content."""
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file")
    if p.is_dir():
        raise InvalidInput(f"{p}: is a folder: give one tool file (JSON, JSON Lines or YAML)")
    text = _decode(read_limited(p, max_bytes, "for a tool file", "split it or keep only the tools you need"), p)
    if not text.strip():
        raise InvalidInput(f"{p}: file is empty: it should hold a JSON list of tools, JSON Lines "
                           "(one tool per line) or YAML")
    suffix = p.suffix.lower()
    if suffix == ".py" or (suffix not in YAML_SUFFIXES and _looks_like_python(text)):
        raise InvalidInput(f"{p}: {PYTHON_SOURCE}, e.g. json.dump(TOOLS, open('tools.json', 'w'))")
    if suffix in YAML_SUFFIXES:
        return ToolsFile(p, _parse_yaml(text, p), "yaml")
    if suffix in JSON_LINES_SUFFIXES:
        return _parse_json_lines(text, p)
    try:
        return ToolsFile(p, loads_limited(text), "json")
    except InputRefused as err:
        raise InvalidInput(f"{p}: {err}") from None
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # more than one value: JSON Lines
            return _parse_json_lines(text, p)
        if text.lstrip()[:1] not in ("[", "{"):
            data = _try_yaml(text, p)
            if isinstance(data, (dict, list)):
                return ToolsFile(p, data, "yaml")
        raise InvalidInput(f"{p}:{err.lineno}:{err.colno}: invalid JSON ({err.msg}): fix the syntax there") from None


def _looks_like_python(text: str) -> bool:
    """True when the first line that is not blank or a comment reads as Python (import, def, NAME = [...)."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return bool(_PYTHON_START.match(line))
    return False


def _decode(raw: bytes, p: Path) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InvalidInput(f"{p}: file is UTF-16 text: save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InvalidInput(f"{p}:{line}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}): "
                           "save the file as UTF-8") from None


def _parse_json_lines(text: str, p: Path) -> ToolsFile:
    records, lines = json_lines_limited(text, str(p))
    return ToolsFile(p, records, "jsonl", lines)


def _parse_yaml(text: str, p: Path) -> Any:
    try:
        return _jsonable(yaml_limited(text))
    except InputRefused as err:
        raise InvalidInput(f"{p}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InvalidInput(f"{where}: invalid YAML ({problem}): fix the syntax there") from None
    except RecursionError:
        raise InvalidInput(f"{p}: YAML nested too deeply to read: flatten it") from None


def _try_yaml(text: str, p: Path) -> Any:
    """The text as YAML when it reads as YAML, else None; YAML over a limit (an alias bomb) is refused."""
    if len(text) > MAX_YAML_BYTES:  # not JSON and too large to try as YAML: the JSON error is the message
        return None
    try:
        return _jsonable(yaml_limited(text))
    except InputRefused as err:
        raise InvalidInput(f"{p}: {err}") from None
    except (yaml.YAMLError, RecursionError):
        return None


def _jsonable(value: Any) -> Any:
    """YAML values as JSON would have them: dates as ISO text, keys as text, sets as lists."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
