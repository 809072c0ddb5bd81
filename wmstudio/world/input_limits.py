"""Limits on what users hand the studio, set where a real file never reaches them and an attack always does.

Files are read up to their limit (devices and pipes too), JSON is scanned for depth before parsing and parsed with
hooks that bound numbers, YAML aliases may not expand past a node budget, and lone surrogates are refused on entry."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from wmstudio.problems import InvalidInput, join_path

MAX_RESPONSE_BYTES = 5_000_000  # a tool response given to `wmstudio check` (world files: 5 MB; tool files: 20 MB)
MAX_JSON_DEPTH = 100  # objects and lists inside one another; tool schemas need ~15
MAX_NUMBER_CHARS = 100  # characters of one number literal; Python refuses 4,300-digit integers with a traceback
MAX_YAML_BYTES = 2_000_000  # YAML parses ~1 MB/s; larger tool lists come as JSON (20 MB)
MAX_YAML_VALUES = 500_000  # values in a YAML document once its aliases (*name) are expanded
YAML_MAX_BRACKETS = 1_000  # [ and { open at once, counted anywhere in a YAML file (text too) before parsing
YAML_DEPTH_COUNTED = 500  # block nesting is counted this deep, no deeper: PyYAML 6.0.4's libyaml refuses 1,000 levels
MAX_CHECK_CHARS = 4_096  # characters of one rule's CEL check; a compiled check holds ~600 bytes per character
CHECK_SECONDS_ENV = "WMSTUDIO_CHECK_SECONDS"
DEFAULT_CHECK_SECONDS = 2.0  # CPU seconds one check may run on one response (a rule of a few fields needs < 0.01)

_READ_CHUNK = 1 << 20
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_JSON_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class InputRefused(ValueError):
    """JSON or YAML the studio will not hold: over one of the limits above, or not Unicode text."""


def check_seconds() -> float:
    """The CPU-time budget of one rule check: WMSTUDIO_CHECK_SECONDS when set to a positive number, else 2 s."""
    try:
        seconds = float(os.environ.get(CHECK_SECONDS_ENV, ""))
    except ValueError:
        return DEFAULT_CHECK_SECONDS
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_CHECK_SECONDS


def read_limited(path: str | Path, max_bytes: int, what: str = "", fix: str = "split or trim it") -> bytes:
    """The bytes of a file, refusing one over `max_bytes` before reading it (a device or pipe: after `max_bytes`).

    `what` names the limit in the message (`for a tool file`); missing files and folders are the caller's to name."""
    p = Path(path)
    limit = f"the {max_bytes:,}-byte limit{' ' + what if what else ''}"
    try:
        info = p.stat()
        if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
            raise InvalidInput(f"{p}: file is {info.st_size:,} bytes, over {limit}: {fix}")
        with p.open("rb") as handle:
            raw = _read_at_most(handle, max_bytes + 1)
    except IsADirectoryError:
        raise InvalidInput(f"{p}: is a folder, not a file") from None
    except FileNotFoundError:
        raise InvalidInput(f"{p}: no such file") from None
    except OSError as err:
        raise InvalidInput(f"{p}: cannot be read ({err.strerror or err}): check the path and its permissions") \
            from None
    if len(raw) > max_bytes and stat.S_ISREG(info.st_mode):  # it grew while being read
        raise InvalidInput(f"{p}: file holds more than {max_bytes:,} bytes, over {limit}: {fix}")
    if len(raw) > max_bytes:
        raise InvalidInput(f"{p}: reading it gave more than {limit} (it is a device or pipe, not a file): "
                           "give a file under the limit")
    return raw


def _read_at_most(handle: Any, count: int) -> bytes:
    parts, left = [], count
    while left > 0:
        chunk = handle.read(min(left, _READ_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def json_depth(text: str) -> int:
    """How deeply objects and lists nest in JSON text, counted without parsing it (strings are skipped)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", _ESCAPE.sub("", text)))
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def loads_limited(text: str) -> Any:
    """`json.loads` for input from users: json.JSONDecodeError for bad syntax (NaN and Infinity too), InputRefused
    for nesting over MAX_JSON_DEPTH, a number over MAX_NUMBER_CHARS or beyond a float, and lone surrogates."""
    _refuse_raw_surrogate(text)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InputRefused(f"nested {depth:,} levels deep, over the {MAX_JSON_DEPTH}-level limit: flatten it")
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except _Constant as found:
        pos = max(text.find(found.name), 0)
        raise json.JSONDecodeError(f"{found.name} is not JSON, write null or a number", text, pos) from None
    except RecursionError:  # the scan above counts brackets; this is for a scan fooled by stray quotes
        raise InputRefused(f"nested too deeply to read, over the {MAX_JSON_DEPTH}-level limit: flatten it") from None
    if _SURROGATE_ESCAPE.search(text):
        refuse_lone_surrogates(value)
    return value


def json_lines_limited(text: str, source: str) -> tuple[list[Any], list[int]]:
    """(records, their line numbers) of JSON Lines text, each line read by `loads_limited`; InvalidInput names
    `source`, the line and the column of the first bad record."""
    records, lines = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(loads_limited(line))
        except InputRefused as err:
            raise InvalidInput(f"{source}:{number}: {err}") from None
        except json.JSONDecodeError as err:
            raise InvalidInput(f"{source}:{number}:{err.colno}: invalid JSON Lines record ({err.msg}): each line "
                               "must be one complete JSON value; fix that line") from None
        lines.append(number)
    return records, lines


class _Constant(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _constant(name: str) -> Any:
    raise _Constant(name)


def _integer(digits: str) -> int:
    if len(digits) > MAX_NUMBER_CHARS:
        raise InputRefused(f"a number of {len(digits):,} digits ({digits[:12]}...) is over the {MAX_NUMBER_CHARS}-"
                           "character limit for numbers: write it as text (in quotes)")
    return int(digits)


def _float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise InputRefused(f"a number of {len(literal):,} characters ({literal[:12]}...) is over the "
                           f"{MAX_NUMBER_CHARS}-character limit for numbers: write it as text (in quotes)")
    value = float(literal)
    if not math.isfinite(value):
        raise InputRefused(f"the number {literal} is too large to hold (it reads as infinity): write a smaller "
                           "number, or text in quotes")
    return value


def find_lone_surrogate(value: Any, root: str = "") -> tuple[str, str] | None:
    """(path, text) of the first text or object key in `value` holding a lone surrogate, or None when none does."""
    stack, seen = [(value, root)], set()
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return printable(path) or "(root)", item
        elif isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return printable(join_path(path, key)), key
                stack.append((child, join_path(path, key)))
    return None


def printable(text: str) -> str:
    """`text` with any lone surrogate written as an escape (`\\ud800`), so a message naming it can be printed."""
    return text.encode("utf-8", errors="backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text


def surrogate_message(text: str) -> str:
    """Why a lone surrogate is refused, showing it as `\\ud800`."""
    found = _SURROGATE.search(text)
    shown = f"\\u{ord(found.group()):04x}" if found else "\\ud800"
    return (f"holds a lone surrogate ({shown}), which is not Unicode text and cannot be saved or shown: remove it "
            "(a character outside the basic plane is written as a pair, e.g. \\ud83d\\ude00)")


def refuse_lone_surrogates(value: Any, root: str = "") -> None:
    """InputRefused naming where `value` holds a lone surrogate; nothing when it holds none."""
    found = find_lone_surrogate(value, root)
    if found is not None:
        where = "" if found[0] == "(root)" else f"{found[0]}: "
        raise InputRefused(where + surrogate_message(found[1]))


def _refuse_raw_surrogate(text: str) -> None:
    if text.isascii():
        return
    found = _SURROGATE.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        column = found.start() - text.rfind("\n", 0, found.start())
        raise InputRefused(f"line {line}, column {column}: {surrogate_message(found.group())}")


def yaml_limited(text: str) -> Any:
    """`yaml.safe_load` for input from users: yaml.YAMLError for bad syntax, InputRefused for a file over
    MAX_YAML_BYTES, nesting over MAX_JSON_DEPTH, aliases expanding past MAX_YAML_VALUES or an alias inside itself."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise InputRefused(f"YAML of {size:,} bytes is over the {MAX_YAML_BYTES:,}-byte limit for YAML (it parses "
                           "slowly): convert it to JSON, which may be larger")
    _refuse_raw_surrogate(text)
    # libyaml slows down quadratically with [ { nesting, and its composer recurses in C (a document ~100,000 levels
    # deep crashes the process): brackets anywhere (in text too) bound the first, a scan of the events the second.
    brackets = max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, _NOT_BRACKET.sub("", text))), default=0)
    depth = brackets if brackets > YAML_MAX_BRACKETS else _yaml_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InputRefused(f"nested {depth:,} levels deep, over the {MAX_JSON_DEPTH}-level limit: flatten it")
    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure_yaml(node)
        value = loader.construct_document(node)
    except RecursionError:
        raise InputRefused(f"nested too deeply to read, over the {MAX_JSON_DEPTH}-level limit: flatten it") from None
    except InputRefused:
        raise
    except (ValueError, TypeError, OverflowError) as err:  # a value its tag cannot be, e.g. 2001-02-30 as a date
        raise InputRefused(f"a value cannot be read ({err}): fix it, or quote it to keep it as text") from None
    finally:
        loader.dispose()
    if "\\u" in text or "\\U" in text:  # YAML writes a surrogate only as an escape in double quotes
        refuse_lone_surrogates(value)
    return value


def _yaml_loader() -> type:
    return _LimitedLoader


def _yaml_int(loader: Any, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_NUMBER_CHARS:
        raise InputRefused(f"a number of {len(node.value):,} characters ({node.value[:12]}...) is over the "
                           f"{MAX_NUMBER_CHARS}-character limit for numbers: write it as text (in quotes)")
    return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)


def _yaml_float(loader: Any, node: yaml.ScalarNode) -> float:
    if len(node.value) > MAX_NUMBER_CHARS:
        raise InputRefused(f"a number of {len(node.value):,} characters ({node.value[:12]}...) is over the "
                           f"{MAX_NUMBER_CHARS}-character limit for numbers: write it as text (in quotes)")
    value = yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    if not math.isfinite(value):
        raise InputRefused(f"{node.value} is not a JSON number (JSON has no infinity or NaN): write null, a "
                           "number, or text in quotes")
    return value


class _LimitedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml's safe loader (libyaml's when installed) whose numbers keep to the limits JSON's do."""


_LimitedLoader.add_constructor("tag:yaml.org,2002:int", _yaml_int)
_LimitedLoader.add_constructor("tag:yaml.org,2002:float", _yaml_float)


def _yaml_depth(text: str) -> int:
    """How deeply a YAML document nests, from its parse events (the parser keeps an explicit stack: no recursion).

    Counting stops past YAML_DEPTH_COUNTED levels (InputRefused), before any libyaml's own nesting limit (1,000 in
    PyYAML 6.0.4, none in 6.0.3) can fire, so every PyYAML version gives the same message."""
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=_yaml_loader()):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                deepest = max(deepest, depth)
                if depth > YAML_DEPTH_COUNTED:
                    raise InputRefused(_too_deep_to_count())
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except yaml.YAMLError as err:
        if "nesting" in str(getattr(err, "problem", "")):  # a libyaml whose own limit is lower than ours
            raise InputRefused(f"nested deeper than the YAML reader can go, over the {MAX_JSON_DEPTH}-level limit: "
                               "flatten it") from None
        raise
    return deepest


def _too_deep_to_count() -> str:
    return f"nested more than {YAML_DEPTH_COUNTED} levels deep, over the {MAX_JSON_DEPTH}-level limit: flatten it"


def _measure_yaml(root: yaml.Node) -> None:
    """Count the values of a YAML node graph as if every alias were copied out, and its depth, without copying."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in measured:
            continue
        children = _yaml_children(node)
        if not children_done:
            if key in on_path:
                raise InputRefused("a YAML alias (*name) refers to the value it is inside: it would never end; "
                                   "write the value out")
            on_path.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in measured)
            continue
        on_path.discard(key)
        values = 1 + sum(measured[id(child)][0] for child in children)
        depth = 1 + max((measured[id(child)][1] for child in children), default=0)
        if values > MAX_YAML_VALUES:
            raise InputRefused(f"YAML aliases (*name) expand it to over {MAX_YAML_VALUES:,} values, the limit: "
                               "write the repeated parts out once, or convert the file to JSON")
        if depth > MAX_JSON_DEPTH:
            raise InputRefused(f"nested over the {MAX_JSON_DEPTH}-level limit: flatten it")
        measured[key] = (values, depth)


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
