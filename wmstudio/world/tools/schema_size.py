"""How large a tool's schema is with its `$ref`s followed: the most a validator may walk for one value.

`anyOf` branches that `$ref` further `anyOf`s multiply: 4 branches over 10 levels is a 1.5 KB schema that
expands to a million nodes, and a validator spent minutes on one response against it. Such a schema is refused
where tools are imported, naming the limit; a `$ref` back into itself (a recursive type) counts once."""

from __future__ import annotations

from typing import Any

MAX_SCHEMA_NODES = 50_000  # expanded nodes of one schema (a validator walks ~100,000 a second); real ones: < 5,000


def expanded_nodes(schema: Any, limit: int = MAX_SCHEMA_NODES) -> int:
    """The nodes (objects, lists and values) of `schema` with each local `$ref` replaced by its target, counted up
    to just past `limit` (so a bomb is measured in microseconds)."""
    sizes: dict[str, int] = {}
    open_refs: set[str] = set()

    def count(node: Any) -> int:
        if isinstance(node, dict):
            ref = node.get("$ref")
            total = 1 + (target(ref) if isinstance(ref, str) else 0)
            children = node.values()
        elif isinstance(node, list):
            total, children = 1, node
        else:
            return 1
        for child in children:
            if total > limit:
                break
            total += count(child)
        return min(total, limit + 1)

    def target(ref: str) -> int:
        if ref in sizes:
            return sizes[ref]
        if ref in open_refs or not ref.startswith("#"):
            return 1  # recursive (its depth is the value's) or outside this schema
        node = _pointer(schema, ref[1:])
        open_refs.add(ref)
        sizes[ref] = count(node) if node is not None else 1
        open_refs.discard(ref)
        return sizes[ref]

    return count(schema)


def too_large_message() -> str:
    return (f"expands to over {MAX_SCHEMA_NODES:,} schema nodes once its $refs are followed, the limit (nested "
            "anyOf/oneOf of $refs multiply): flatten it or drop branches")


def _pointer(root: Any, pointer: str) -> Any:
    """The node a JSON pointer (`/$defs/Order`) names in `root`, or None."""
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
