"""Copying a folder's listing: a shell-like read (`ls`) of a path answers the entries the state holds under it, as
a file system keeps them (world/episode/paths.py): a list of folder paths and a map of file paths to their contents.
Each entry's name, kind (`file` / `dir`, as the schema's enum words them) and a file's size in bytes are written
before denoising, in name order, cut to the page the tool's description states ("at most 8"), with the count and
the truncated flag saying what the page left out; a folder's own size is the one earlier answers gave folders, else
the block a Unix folder takes (4096 bytes, as `ls -l` shows it). A search (`find`: a folder and a glob for the
name) answers the paths under the folder, at any depth, whose name the glob matches, in path order. The state is
the one the episode left: a file removed or moved since is gone, a made folder is there."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Any

from wmstudio.model.canvas.layout import ExactItems, Holds
from wmstudio.model.heads.copy_head import key_words
from wmstudio.model.heads.listing_copy import page_values
from wmstudio.model.heads.record_copy import RecordCopy
from wmstudio.world.episode.lookup import SHELL_READS
from wmstudio.world.episode.paths import absolute, working_folder
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only
from wmstudio.world.tools.schema import listed_property

PAGE = re.compile(r"\bat most (\d+)\b", re.IGNORECASE)  # "List a folder's entries in name order (at most 8)."
FOLDER_WORDS = frozenset({"dir", "directory", "folder"})
NAME_KEYS = ("name", "filename", "file_name", "basename")
SIZE_KEYS = ("size", "bytes", "size_bytes")
FOLDER_BYTES = 4096  # a Unix folder's size as `ls -l` shows it
GLOB_CHARS = re.compile(r"[*?\[]")
GLOB_WORDS = frozenset({"glob", "pattern", "wildcard"})


def folder_listing(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
                   state: Any) -> RecordCopy | None:
    """The copy of a folder's entries a reading call answers with; None when the call names no folder the state
    holds, the state keeps no paths, or the response lists no entries by name."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    if tool is None or not isinstance(schema, dict) or not (read_only(tool) or call.name.lower() in SHELL_READS) \
            or not isinstance(call.arguments, dict) or not isinstance(state, dict):
        return None
    folders, files = _path_collections(state)
    glob = _glob_argument(tool, call)
    given = next((value.strip() for name, value in call.arguments.items() if isinstance(value, str)
                  and name != glob), "")
    folder = working_folder(state) if given in ("", ".", "./") else absolute(state, given)
    if folder is None or folder not in folders:
        return None
    if glob is not None:
        return _search(tool, call, schema, folder, folders, files, call.arguments[glob])
    listed = listed_property(schema)
    if listed is None:
        return None
    key, fields = listed
    name_field = next((name for name in fields if name in NAME_KEYS), None)
    if name_field is None:
        return None
    children = sorted({path for path in [*folders, *files] if path != folder and _parent(path) == folder},
                      key=lambda path: path.rsplit("/", 1)[-1])
    shown = _page(tool, children)
    kinds = _kind_words(schema, key)
    folder_size = _folder_size(history, key, kinds[0])
    items = [_entry(path, path in folders, files, fields, name_field, kinds, folder_size) for path in shown]
    shape: dict[str, Any] = dict.fromkeys(schema.get("properties") or {})
    shape[key] = ExactItems([{name: Holds(item[name]) if name in item else None for name in fields}
                             for item in items])
    values = {format_path([key, index, name]): value for index, item in enumerate(items)
              for name, value in item.items()}
    values.update(page_values(schema, key, len(children), len(shown), call, 0))
    values.update(_truncated(schema, len(shown) < len(children)))
    return RecordCopy(shape, values, [], len(items))


def _glob_argument(tool: Any, call: Call) -> str | None:
    """The argument holding a glob for names: its value has a wildcard, or its parameter says it is a glob."""
    described = ((tool.parameters or {}).get("properties") or {}) if isinstance(tool.parameters, dict) else {}
    for name, value in call.arguments.items():
        words = set(key_words(str((described.get(name) or {}).get("description", "")))) | set(key_words(name))
        if isinstance(value, str) and (GLOB_CHARS.search(value) or words & GLOB_WORDS):
            return name
    return None


def _search(tool: Any, call: Call, schema: dict[str, Any], folder: str, folders: set[str], files: dict[str, Any],
            glob: str) -> RecordCopy | None:
    """A search's answer: the paths under `folder` (any depth) whose last part `glob` matches, in path order, in the
    response's first top-level array of strings, cut to the page its description states."""
    properties = schema.get("properties") or {}
    key = next((name for name, sub in properties.items() if isinstance(sub, dict) and sub.get("type") == "array"
                and isinstance(sub.get("items"), dict) and sub["items"].get("type") == "string"), None)
    if key is None:
        return None
    prefix = "/" if folder == "/" else folder + "/"
    found = sorted(path for path in [*folders, *files] if path.startswith(prefix) and path != folder
                   and fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], glob))
    shown = _page(tool, found)
    shape: dict[str, Any] = dict.fromkeys(properties)
    shape[key] = ExactItems([Holds(path) for path in shown])
    values = {format_path([key, index]): path for index, path in enumerate(shown)}
    values.update(page_values(schema, key, len(found), len(shown), call, 0))
    values.update(_truncated(schema, len(shown) < len(found)))
    return RecordCopy(shape, values, [], len(shown))


def _page(tool: Any, paths: list[str]) -> list[str]:
    """The first of `paths` the page the tool's description states holds ("at most 8"), else all of them."""
    page = PAGE.search(tool.description or "")
    return paths[:int(page.group(1))] if page else paths


def _truncated(schema: dict[str, Any], cut: bool) -> dict[str, Any]:
    """The answer's truncated / partial flag, where it has one."""
    return {format_path([name]): cut for name, sub in (schema.get("properties") or {}).items()
            if isinstance(sub, dict) and sub.get("type") == "boolean"
            and set(key_words(name)) & {"truncated", "partial"}}


def _path_collections(state: dict[str, Any]) -> tuple[set[str], dict[str, Any]]:
    """The state's folder paths (a list of absolute paths) and files (a map keyed by absolute paths)."""
    folders: set[str] = set()
    files: dict[str, Any] = {}
    for value in state.values():
        if isinstance(value, list) and value and all(isinstance(item, str) and item.startswith("/") for item in value):
            folders.update(item.rstrip("/") or "/" for item in value)
        elif isinstance(value, dict) and value and all(isinstance(k, str) and k.startswith("/") for k in value):
            files.update(value)
    return folders, files


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _kind_words(schema: dict[str, Any], key: str) -> tuple[str | None, str | None]:
    """(the word for a folder, the word for a file) in the entries' kind enum (`dir`, `file`), where it has one."""
    items = ((schema.get("properties") or {}).get(key) or {}).get("items") or {}
    for sub in (items.get("properties") or {}).values():
        enum = [value for value in (sub.get("enum") or []) if isinstance(value, str)] if isinstance(sub, dict) else []
        folder = next((value for value in enum if value.lower() in FOLDER_WORDS), None)
        file = next((value for value in enum if value.lower() == "file"), None)
        if folder and file:
            return folder, file
    return None, None


def _folder_size(history: Sequence[HistoryStep], key: str, folder_word: str | None) -> int:
    """The size earlier answers gave a folder entry (the newest), else FOLDER_BYTES."""
    for step in reversed(history):
        answer = step.response_value()
        entries = answer.get(key) if isinstance(answer, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            size = next((entry.get(name) for name in SIZE_KEYS if isinstance(entry, dict)
                         and isinstance(entry.get(name), int)), None)
            if size is not None and folder_word is not None and folder_word in entry.values():
                return size
    return FOLDER_BYTES


def _entry(path: str, is_folder: bool, files: dict[str, Any], fields: Sequence[str], name_field: str,
           kinds: tuple[str | None, str | None], folder_size: int) -> dict[str, Any]:
    """One entry's fields: its name, its kind, its size in bytes (a file's from its contents)."""
    entry: dict[str, Any] = {name_field: path.rsplit("/", 1)[-1]}
    kind = kinds[0] if is_folder else kinds[1]
    kind_field = next((name for name in fields if name in ("type", "kind")), None)
    if kind and kind_field:
        entry[kind_field] = kind
    size_field = next((name for name in fields if name in SIZE_KEYS), None)
    content = files.get(path)
    if size_field and not is_folder and isinstance(content, str):
        entry[size_field] = len(content.encode())
    elif size_field and is_folder:
        entry[size_field] = folder_size
    return entry


def or_folder(copy: RecordCopy | None, world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
              state: Any) -> RecordCopy | None:
    """`copy` (a named record's or a listing's), or where it lays nothing out, the folder's listing."""
    if copy is not None and copy.shape is not None:
        return copy
    return folder_listing(world, call, history, schema, state) or copy
