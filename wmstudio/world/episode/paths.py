"""Records named by path, as a file system keeps them: a made folder joins the list of folders (with any above it
the list lacks), a removed path goes with its children, a moved one is renamed with them; a path relative to the
state's working folder is read against it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from wmstudio.world.episode.changes import Change, EpisodeState
from wmstudio.world.episode.lookup import walk
from wmstudio.world.records import json_leaves, needles_of, own_id_keys

MOVE_PAIRS = (("source", "destination"), ("from", "to"), ("old_path", "new_path"), ("src", "dst"), ("old", "new"))


def listed_paths(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
    """A creating call's new path (`/home/maria/reports`, or one relative to the state's `cwd`) added to the state's
    list of such paths with any folder above it the list lacks, in the list's order where it is sorted."""
    if answer.get("created") is False:
        return []
    changes = []
    for value in arguments.values():
        path = absolute(tracked.state, value) if isinstance(value, str) else None
        if path is None:
            continue
        for where, node in walk(tracked.state):
            if isinstance(node, list) and node and all(isinstance(i, str) and i.startswith("/") for i in node):
                ordered = node == sorted(node)
                missing = [p for p in [*_ancestors(path), path] if p not in node]
                if not missing:
                    break
                node.extend(missing)
                if ordered:
                    node.sort()
                changes += [Change("add", where + (node.index(p),), None, p) for p in missing]
                break
    return changes


def absolute(state: Any, value: str) -> str | None:
    """`value` as an absolute path: itself when it starts with `/`, else joined to the state's working folder
    (`cwd`); None when it is no path."""
    if value.startswith("/"):
        return value.rstrip("/") or "/"
    cwd = working_folder(state)
    if cwd is None or not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)*/?", value) or value.startswith(".."):
        return None
    return f"{cwd.rstrip('/')}/{value.rstrip('/')}"


def working_folder(state: Any) -> str | None:
    """The state's working folder (`cwd`), the one a relative path is read against; None when it keeps none."""
    return next((state.get(k).rstrip("/") or "/" for k in ("cwd", "working_dir", "pwd", "current_dir")
                 if isinstance(state, dict) and isinstance(state.get(k), str) and state.get(k).startswith("/")), None)


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> ["/", "/a", "/a/b"]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/", *("/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1))] if path != "/" else []


def removed(tracked: EpisodeState, arguments: dict[str, Any], answer: dict[str, Any]) -> list[Change]:
    """What a deleting call removes: each record, map entry or list item its ids name (a path's children too)."""
    if answer.get("removed") in (0, False) or answer.get("deleted") in (0, False):
        return []
    changes: list[Change] = []
    for value in arguments.values():
        path = absolute(tracked.state, value) if isinstance(value, str) else None
        if path is not None or (isinstance(value, str) and value in needles_of(value, strict=True)):
            changes += _drop(tracked.state, path or value)
    return changes


def _drop(state: Any, value: str) -> list[Change]:
    """Remove everything `value` names from `state` (and under a path `value/...`)."""
    def named(item: Any, path: tuple) -> bool:
        if isinstance(item, str):
            return item == value or (value.startswith("/") and item.startswith(value.rstrip("/") + "/"))
        return isinstance(item, dict) and any(item.get(key) == value for key in own_id_keys(path))

    changes = []
    for path, node in list(walk(state)):
        if isinstance(node, dict):
            for key in [k for k in node if named(k, path)]:
                changes.append(Change("remove", path + (key,), node.pop(key)))
        elif isinstance(node, list):
            for index in reversed([i for i, item in enumerate(node) if named(item, path + (i,))]):
                changes.append(Change("remove", path + (index,), node.pop(index)))
    return changes


def moved(tracked: EpisodeState, arguments: dict[str, Any]) -> list[Change]:
    """A moving call's source renamed to its destination (into it, where the destination is a folder that exists),
    map keys and list items alike, a path's children with it."""
    pair = next(((arguments[a], arguments[b]) for a, b in MOVE_PAIRS if isinstance(arguments.get(a), str)
                 and isinstance(arguments.get(b), str)), None)
    if pair is None:
        return []
    source, target = (absolute(tracked.state, end) or end.rstrip("/") or "/" for end in pair)
    leaves = {leaf for leaf in json_leaves(tracked.state, keys=True) if isinstance(leaf, str)}
    if target in leaves and target.startswith("/") and not any(k == target for k in _map_keys(tracked.state)):
        target = f"{target}/{source.rsplit('/', 1)[-1]}"

    def renamed(text: str) -> str | None:
        if text == source:
            return target
        if source.startswith("/") and text.startswith(source + "/"):
            return target + text[len(source):]
        return None

    changes = []
    for path, node in list(walk(tracked.state)):
        if isinstance(node, dict):
            for key in list(node):
                new = renamed(key) if isinstance(key, str) else None
                if new is not None:
                    node[new] = node.pop(key)
                    changes.append(Change("set", path + (new,), key, new))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                new = renamed(item) if isinstance(item, str) else None
                if new is not None:
                    node[index] = new
                    changes.append(Change("set", path + (index,), item, new))
    return changes


def _map_keys(state: Any) -> Iterator[str]:
    for _, node in walk(state):
        if isinstance(node, dict):
            yield from (key for key in node if isinstance(key, str))
