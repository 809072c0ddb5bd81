"""Dotted JSON paths with indices (`status`, `items[0].price`): parse, read and write; and JSON Pointers
(`#/$defs/Leg`), which schemas use in `$ref`.

Anchors, check reports and the canvas all name response fields this way, so there is one parser."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"""\.?([A-Za-z_$@][\w$@\-]*)|\[(\d+)\]|\[["']([^"']*)["']\]""")


def parse_path(path: str) -> list[str | int]:
    """Split `items[0].price` into `["items", 0, "price"]`; raises ValueError on anything else."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("empty path: write a field name such as `status` or `items[0].price`")
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        match = _TOKEN.match(path, pos)
        if not match or (pos == 0 and path.startswith(".")):
            raise ValueError(
                f"cannot read path {path!r} at character {pos + 1}: use dotted names and [index], "
                "e.g. items[0].price or ['odd key']"
            )
        name, index, quoted = match.groups()
        parts.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = match.end()
    return parts


def format_path(parts: list[str | int]) -> str:
    """Inverse of parse_path: `["items", 0, "price"]` -> `items[0].price`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_$@][\w$@\-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


_MISSING = object()


def get_path(document: Any, path: str | list[str | int], default: Any = _MISSING) -> Any:
    """Value at `path` in a parsed JSON document; KeyError (or `default`) when it is absent."""
    parts = parse_path(path) if isinstance(path, str) else path
    node = document
    for part in parts:
        if isinstance(part, int) and isinstance(node, list) and -len(node) <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            if default is _MISSING:
                raise KeyError(format_path(parts) if isinstance(path, list) else path)
            return default
    return node


def set_path(document: Any, path: str | list[str | int], value: Any) -> Any:
    """Set `path` in `document`, creating objects and list slots on the way; returns the document."""
    parts = parse_path(path) if isinstance(path, str) else path
    if not parts:
        return value
    root = document if document is not None else ({} if isinstance(parts[0], str) else [])
    node = root
    for part, nxt in zip(parts, parts[1:] + [None]):
        fresh: Any = value if nxt is None else ({} if isinstance(nxt, str) else [])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise TypeError(f"cannot index a {type(node).__name__} with [{part}]")
            while len(node) <= part:
                node.append(None)
            if nxt is None or node[part] is None:
                node[part] = fresh
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise TypeError(f"cannot take field {part!r} of a {type(node).__name__}")
            if nxt is None or part not in node:
                node[part] = fresh
            node = node[part]
    return root


NOT_FOUND = object()  # what follow_pointer returns when a pointer leads nowhere


def follow_pointer(root: Any, pointer: str) -> Any:
    """The node that a JSON Pointer (`/$defs/Leg`, `~1` for `/`, `~0` for `~`) points to in `root`, or NOT_FOUND."""
    node = root
    for raw in pointer.split("/")[1:] if pointer else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return NOT_FOUND
    return node


def resolve_local(schema: Any, root: Any, depth: int = 8) -> Any:
    """`schema` with its local `$ref` (`#/$defs/Leg`) followed through `root`, as far as `depth` references; a
    reference that points nowhere (or elsewhere than this document) reads as {}."""
    while depth > 0 and isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        target = follow_pointer(root, ref[1:]) if ref.startswith("#") else NOT_FOUND
        schema, depth = (target if isinstance(target, dict) else {}), depth - 1
    return schema
