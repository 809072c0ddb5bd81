"""Folders a command writes into (a dataset export, a Space build): a marker file there lists what the command wrote,
each file with the SHA-256 of what it wrote, so writing again replaces those files, and only while they still hold
what was written: a file the user edited since, one a planted record names, anything under `.git` or reached
through a link is never overwritten or deleted. What is in the way is named before anything is touched."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from wmstudio.problems import InvalidInput, Problem

MARKER = ".wmstudio-written.json"
SHOWN = 5  # paths named in a message; the rest are counted


def check_out_folder(out: Path, field: str = "out") -> None:
    """InvalidInput when `out` cannot be a folder to write into: a symbolic link, a file, or under a file."""
    out = Path(out)
    if out.is_symlink():
        raise InvalidInput(Problem(field, f"{out} is a symbolic link: give the folder it points to, or a new folder"))
    if out.exists() and not out.is_dir():
        raise InvalidInput(Problem(field, f"{out} is a file, not a folder: give a folder (it is created when missing)"))
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InvalidInput(Problem(field, f"{parent} is a file, not a folder: give a path inside a folder"))
            return


def written_before(out: Path, command: str) -> set[str]:
    """The paths (relative, POSIX) `command` recorded in `out`'s marker that still hold what it wrote there (same
    SHA-256); never one under `.git`, outside the folder or through a link. A record without hashes (written by an
    older wmstudio) vouches for nothing."""
    try:
        data = json.loads((Path(out) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict) or data.get("written_by") != command or not isinstance(data.get("files"), dict):
        return set()
    return {name for name, digest in data["files"].items()
            if isinstance(name, str) and isinstance(digest, str) and _inside(name) and not _linked(out, name)
            and file_digest(Path(out) / name) in (digest, None)}


def file_digest(path: Path) -> str | None:
    """SHA-256 (hex) of a file's content; None when there is no such file."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return digest.hexdigest()


def text_digest(text: str) -> str:
    """SHA-256 (hex) of `text` as written in UTF-8: what `file_digest` reads back from the file."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digests_of(out: Path, names: Iterable[str]) -> dict[str, str]:
    """{name: SHA-256} for each of `names` that is a file in `out` now (what to record after writing them)."""
    found = {name: file_digest(Path(out) / name) for name in names}
    return {name: digest for name, digest in found.items() if digest is not None}


def in_the_way(out: Path, planned: Iterable[str], ours: set[str]) -> list[str]:
    """The paths under `out` that writing `planned` would overwrite or replace but that are not `ours`: an existing
    file not listed, a folder or link where a file goes, a file or link where a folder goes."""
    out = Path(out)
    blocked: dict[str, None] = {}
    for name in planned:
        parts = PurePosixPath(name).parts
        for depth in range(1, len(parts)):  # the folders on the way
            folder = "/".join(parts[:depth])
            path = out / folder
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                blocked[folder] = None
        path = out / name
        if path.is_symlink() or path.is_dir() or (path.exists() and name not in ours):
            blocked[name] = None
    return list(blocked)


def refuse_in_the_way(out: Path, blocked: list[str], command: str, fix: str) -> None:
    """InvalidInput naming what is in the way (a few paths, then a count) and `fix`; nothing when none is."""
    if not blocked:
        return
    shown = ", ".join(blocked[:SHOWN]) + (f" and {len(blocked) - SHOWN} more" if len(blocked) > SHOWN else "")
    raise InvalidInput(Problem("out", f"{out} already holds {shown}, which `{command}` did not write (its record "
                                      f"is {MARKER}): {fix}"))


def record_written(out: Path, command: str, files: Mapping[str, str]) -> None:
    """Write the marker listing `files` ({path: SHA-256 of what was, or is about to be, written}) as written by
    `command` (atomically)."""
    target = Path(out) / MARKER
    partial = target.with_name(f"{MARKER}.{os.getpid()}.tmp")
    partial.write_text(json.dumps({"written_by": command, "files": dict(sorted(files.items()))}, indent=1) + "\n",
                       encoding="utf-8")
    partial.replace(target)


def remove_written(out: Path, names: Iterable[str]) -> None:
    """Delete the files `names` an earlier run wrote (files only, never a link's target), then the folders this
    leaves empty; anything else in those folders stays."""
    out = Path(out)
    folders: set[Path] = set()
    for name in names:
        if not _inside(name):
            continue
        path = out / name
        on_the_way = [p for p in path.parents if p != out and out in p.parents]
        if any(p.is_symlink() for p in on_the_way):
            continue  # through a link: it would delete outside the folder
        if path.is_file() and not path.is_symlink():
            path.unlink()
        folders.update(on_the_way)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass


def _inside(name: str) -> bool:
    """Whether a recorded path stays inside the folder and out of `.git` (a marker is a file anyone could edit)."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name \
        and not any(part.lower() == ".git" for part in path.parts)


def _linked(out: Path, name: str) -> bool:
    """Whether `name` under `out`, or a folder on the way to it, is a symbolic link."""
    path = Path(out) / name
    return any(p.is_symlink() for p in [path, *path.parents] if p != Path(out) and Path(out) in p.parents)
