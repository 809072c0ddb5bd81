"""A small Unix file system: ls, cat, mkdir, mv, rm and find over real paths, with errno-style errors.

Paths resolve against the working directory like a shell's; only the user's home and /tmp are writable, and
moves never overwrite (as in the MCP filesystem server), so what a response claims can always be checked."""

from __future__ import annotations

import fnmatch
import posixpath
import random

from wmstudio.world.rules.cel import Rule
from wmstudio.world.sims import path_rules as paths
from wmstudio.world.sims.base import (
    ERROR,
    JSON,
    OK,
    PARTIAL,
    Reply,
    Simulator,
    array,
    boolean,
    fail,
    integer,
    make_tool,
    params,
    record,
    response_schema,
    string,
)
from wmstudio.world.sims.path_rules import WRITABLE
from wmstudio.world.sims.preconditions import argument_rules, precondition
from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import Steering
from wmstudio.world.tools import Tool

DEFAULT_LIMIT = 8
DIR_SIZE = 4096
MAX_READ_CHARS = 4096  # cat returns a text file whole, up to this many characters (this world's files are short)
USERS = ["alex", "sam", "jordan", "maria", "wei", "noor"]
PROJECTS = ["webshop", "ml-notes", "budget-tool", "blog", "scraper"]
ERRNO_TEXT = {
    "ENOENT": "No such file or directory", "ENOTDIR": "Not a directory", "EISDIR": "Is a directory",
    "EEXIST": "File exists", "EACCES": "Permission denied", "EINVAL": "Invalid argument",
    "EBUSY": "Device or resource busy",
}
TEXTS = {
    "notes.txt": ["Call the landlord about the heater.\nBuy printer paper.\n",
                  "Meeting moved to Thursday 10:00.\nBring the Q3 numbers.\n"],
    "todo.md": ["# TODO\n- [ ] renew passport\n- [x] pay rent\n", "# TODO\n- [ ] fix bike light\n- [ ] book dentist\n"],
    "budget.csv": ["month,amount\nJan,1240\nFeb,1185\nMar,1302\n", "category,spent\nfood,420\nrent,1100\n"],
    "README.md": ["# {project}\n\nRun `make test` before pushing.\n", "# {project}\n\nSee docs/ for setup.\n"],
    "main.py": ["def main():\n    print('hello from {project}')\n\n\nif __name__ == '__main__':\n    main()\n",
                "import sys\n\nprint(len(sys.argv))\n"],
    "config.yaml": ["debug: false\nport: 8080\n", "retries: 3\ntimeout_s: 30\n"],
    "app.log": ["2025-03-02 10:14:07 INFO started\n2025-03-02 10:15:42 WARN slow query (812 ms)\n",
                "2025-03-02 11:01:13 ERROR connection reset\n"],
    "photo.jpg.txt": ["(binary image placeholder)\n"],
}


class FilesystemSimulator(Simulator):
    """A shell-like file API for one user: list, read, create folders, move, delete and search."""

    name = "filesystem"
    description = "A Unix-like file system for one user, with errno errors and a read-only system area."
    task = (
        "You are a coding assistant with file access on the user's machine. Tidy up and inspect their files "
        "as asked; paths may be absolute or relative to the working directory."
    )

    def tools(self) -> list[Tool]:
        path = string("Absolute path")
        return [
            make_tool(
                "ls", f"List a folder's entries in name order (at most {DEFAULT_LIMIT}).",
                params({"path": string("Folder to list (default: the working directory)")}),
                response_schema({
                    "path": path,
                    "entries": array(record({"name": string(), "type": string(enum=["file", "dir"]),
                                             "size": integer("Bytes", 0)})),
                    "count": integer("Entries in the folder", 0), "truncated": boolean("Some entries left out"),
                }),
            ),
            make_tool(
                "cat", "Read a text file.",
                params({"path": string("File to read")}, ["path"]),
                response_schema({"path": path, "content": string(max_length=MAX_READ_CHARS), "size": integer("Bytes", 0)}),
            ),
            make_tool(
                "mkdir", "Create a folder; with parents, create missing parent folders too.",
                params({"path": string("Folder to create"), "parents": boolean("Create missing parents; no error if it exists")},
                       ["path"]),
                response_schema({"path": path, "created": boolean()}),
            ),
            make_tool(
                "mv", "Move or rename a file or folder; into a folder when the destination is one. Never overwrites.",
                params({"source": string("What to move"), "destination": string("New path, or a folder to move into")},
                       ["source", "destination"]),
                response_schema({"source": path, "destination": string("Absolute path it now has"),
                                 "moved": boolean()}),
            ),
            make_tool(
                "rm", "Delete a file; with recursive, a folder and everything in it.",
                params({"path": string("What to delete"), "recursive": boolean("Delete folders and their contents")},
                       ["path"]),
                response_schema({"path": path, "removed": integer("Files and folders deleted", 0)},
                                statuses=(OK, PARTIAL, ERROR)),
            ),
            make_tool(
                "find", f"Find files and folders under a folder whose name matches a glob (at most {DEFAULT_LIMIT} shown).",
                params({"path": string("Folder to search"), "name": string("Glob for the name, e.g. *.md")},
                       ["path", "name"]),
                response_schema({
                    "path": path, "matches": array(string(), "Absolute paths in order"),
                    "count": integer("Matches in all", 0), "truncated": boolean("Some matches left out"),
                }),
            ),
        ]

    def rules(self) -> list[Rule]:
        return [
            Rule("cat reports the exact size of the text it returns",
                 'call.name != "cat" || response.size == size(response.content)'),
            Rule("ls and find count every match, also those a truncated answer leaves out",
                 'call.name == "ls" ? (response.truncated ? size(response.entries) < response.count : '
                 'size(response.entries) == response.count) : call.name != "find" || (response.truncated ? '
                 'size(response.matches) < response.count : size(response.matches) == response.count)'),
            Rule("find only returns paths inside the folder it searched",
                 'call.name != "find" || response.matches.all(m, m.startsWith(response.path == "/" ? "/" : '
                 'response.path + "/"))'),
            Rule("A failed mkdir, mv or rm changes nothing",
                 '!(call.name in ["mkdir", "mv", "rm"]) || response.status != "error" || (call.name == "mkdir" ? '
                 '!response.created : call.name == "mv" ? !response.moved : response.removed == 0)'),
            Rule("Only the home folder and /tmp can change; nothing elsewhere is created, moved or removed",
                 f'call.name == "mkdir" ? !response.created || response.path.matches("{WRITABLE}") : '
                 f'call.name == "rm" ? response.removed == 0 || response.path.matches("{WRITABLE}") : '
                 f'call.name != "mv" || !response.moved || (response.source.matches("{WRITABLE}") && '
                 f'response.destination.matches("{WRITABLE}"))'),
            Rule("Paths in responses are absolute",
                 'call.name == "mv" ? [response.source, response.destination].all(p, p == "" || p.startsWith("/")) '
                 ': response.path == "" || response.path.startsWith("/")'),
            *self.error_rules(),
        ]

    def error_rules(self) -> list[Rule]:
        """Each errno's cause (sims/preconditions.py), read on the path the call names (sims/path_rules.py). A move
        into a folder is checked no further than the folder (a check cannot take a path's last name)."""
        plain, writable = f"d.matches({paths.PLAIN})", f'"{WRITABLE}"'
        target_lost = f'(!(d in state.dirs) || {paths.gone("d")}) && !{paths.parent_there("d")}'
        no_parent = f'call.name != "mkdir" || !{paths.flag("parents")} && !{paths.parent_there("p")}'
        file_above = f'state.files.exists(f, p.startsWith(f + "/")) || {paths.made("p", folders=False)}'
        onto_itself = (f'd == s || d.startsWith(s + "/") || (d.matches({paths.PATTERN_SAFE}) ? s.matches("^" + '
                       '(d == "/" ? "" : d) + "/[^/]+$") : s.startsWith((d == "/" ? "" : d) + "/"))')
        moving = 'call.name == "mv" ? '
        return [
            precondition("ENOENT", "ENOENT: path or parent missing", ["ls", "cat", "rm", "find", "mkdir", "mv"],
                         moving + paths.on_move(f"{paths.missing('s')} || !{plain} || {target_lost}") + " : "
                         + paths.on_path(f"({paths.missing('p')}) && ({no_parent})"), steered_by="empty_result"),
            precondition("EISDIR", "EISDIR: path is a folder", ["cat", "rm"],
                         f'(call.name == "cat" || !{paths.flag("recursive")}) && '
                         + paths.on_path(f"p in state.dirs || {paths.made('p')}")),
            precondition("ENOTDIR", "ENOTDIR: a file where a folder must be", ["ls", "find", "mkdir", "mv"],
                         moving + paths.on_move(f"!{plain} || {target_lost}") + ' : call.name == "mkdir" ? '
                         + paths.on_path(file_above) + " : "
                         + paths.on_path(f"p in state.files || {paths.made('p', folders=False)}")),
            precondition("EEXIST", "EEXIST: path exists", ["mkdir", "mv"],
                         moving + paths.on_move(f"!{plain} || {paths.present('d')}") + " : "
                         + paths.on_path(paths.present("p"))),
            precondition("EACCES", "EACCES: outside home and /tmp", ["mkdir", "rm", "mv"],
                         moving + paths.on_move(f"!s.matches({writable}) || !{plain} || !d.matches({writable})")
                         + " : " + paths.on_path(f"!p.matches({writable})")),
            precondition("EBUSY", "EBUSY: / or the working directory", ["rm", "mv"],
                         f'[call.name == "mv" ? {paths.called("source")} : {paths.called("path")}].exists(p, '
                         'p == "/" || state.cwd == p || state.cwd.startsWith(p + "/"))'),
            precondition("EINVAL", "EINVAL: move onto or into itself", ["mv"],
                         paths.on_move(f"!{plain} || {onto_itself}")),
            *argument_rules(self.tools()),
        ]

    def initial_state(self, rng: random.Random) -> JSON:
        user, project = rng.choice(USERS), rng.choice(PROJECTS)
        home = f"/home/{user}"
        dirs = ["/", "/etc", "/home", home, f"{home}/docs", f"{home}/downloads", f"{home}/projects",
                f"{home}/projects/{project}", "/tmp"]
        if rng.random() < 0.6:
            dirs.append(f"{home}/projects/{project}/src")
        files = {"/etc/hostname": f"{user}-laptop\n", "/etc/hosts": "127.0.0.1 localhost\n"}
        placements = {"notes.txt": home, "todo.md": f"{home}/docs", "budget.csv": f"{home}/docs",
                      "README.md": f"{home}/projects/{project}", "main.py": dirs[-1] if dirs[-1].endswith("src")
                      else f"{home}/projects/{project}", "config.yaml": f"{home}/projects/{project}",
                      "app.log": "/tmp", "photo.jpg.txt": f"{home}/downloads"}
        for name in rng.sample(sorted(placements), rng.randrange(5, len(placements) + 1)):
            text = rng.choice(TEXTS[name]).replace("{project}", project)
            files[f"{placements[name]}/{name}"] = text
        if rng.random() < 0.5:
            files[f"{home}/docs/notes.txt"] = rng.choice(TEXTS["notes.txt"])
        return {"user": user, "cwd": home, "dirs": sorted(dirs), "files": dict(sorted(files.items()))}

    # --- tools ---------------------------------------------------------------------------------------------

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        if tool not in ("ls", "find"):
            return None
        path = _resolve(state, args.get("path", "."))
        if path not in state["dirs"]:
            return {"path": path, "is_dir": False, "exists": _exists(state, path)}
        if tool == "ls":
            names = _children(state, path)
            return {"path": path, "is_dir": True, "children_count": len(names), "first_children":
                    [{"path": c, "name": posixpath.basename(c), "type": "dir" if c in state["dirs"] else "file",
                      "size": DIR_SIZE if c in state["dirs"] else len(state["files"][c])} for c in names[:DEFAULT_LIMIT]]}
        found = _found(state, path, args["name"])
        return {"path": path, "is_dir": True, "matches_count": len(found), "first_matches": found[:DEFAULT_LIMIT]}

    def do_ls(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        path = _resolve(state, args.get("path", "."))
        if (problem := _need_dir(state, path, "ls")) is not None:
            return problem
        names = [] if steer.empty_result else _children(state, path)
        limit = steer.page_size or DEFAULT_LIMIT
        entries = [{"name": posixpath.basename(child), "type": "dir" if child in state["dirs"] else "file",
                    "size": DIR_SIZE if child in state["dirs"] else len(state["files"][child])}
                   for child in names[:limit]]
        return Reply({"path": path, "entries": entries, "count": len(names), "truncated": len(names) > limit},
                     message=f"{len(names)} entries in {path}.")

    def do_cat(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        path = _resolve(state, args["path"])
        if path in state["dirs"] and not steer.empty_result:
            return _errno("EISDIR", "cat", path)
        if path not in state["files"] or steer.empty_result:
            return _errno("ENOENT", "cat", path)
        content = state["files"][path]
        return Reply({"path": path, "content": content, "size": len(content)},
                     message=f"{len(content)} bytes, {content.count(chr(10))} lines.")

    def do_mkdir(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        path, parents = _resolve(state, args["path"]), args.get("parents", False)
        if path in state["dirs"]:
            if parents:
                return Reply({"path": path, "created": False}, message=f"{path} already exists.")
            return _errno("EEXIST", "mkdir", path)
        if path in state["files"]:
            return _errno("EEXIST", "mkdir", path)
        missing, parent = [], posixpath.dirname(path)
        while parent not in state["dirs"]:
            if parent in state["files"]:
                return _errno("ENOTDIR", "mkdir", path)
            missing.append(parent)
            parent = posixpath.dirname(parent)
        if missing and not parents:
            return _errno("ENOENT", "mkdir", path)
        if not _writable(path):
            return _errno("EACCES", "mkdir", path)
        state["dirs"] = sorted(state["dirs"] + missing + [path])
        return Reply({"path": path, "created": True}, message=f"Created {path}.")

    def do_mv(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        source, target = _resolve(state, args["source"]), _resolve(state, args["destination"])
        if not _exists(state, source):
            return _errno("ENOENT", "mv", source, source=source)
        if _in_use(state, source):
            return _errno("EBUSY", "mv", source, source=source)
        if target in state["dirs"]:
            target = posixpath.join(target, posixpath.basename(source))
        if target == source or (source in state["dirs"] and target.startswith(source + "/")):
            return _errno("EINVAL", "mv", source, source=source)
        if _exists(state, target):
            return _errno("EEXIST", "mv", target, source=source)
        parent = posixpath.dirname(target)
        if parent not in state["dirs"]:
            return _errno("ENOTDIR" if parent in state["files"] else "ENOENT", "mv", target, source=source)
        if not (_writable(source) and _writable(target)):
            return _errno("EACCES", "mv", source, source=source)
        state["dirs"] = sorted(_moved(p, source, target) for p in state["dirs"])
        state["files"] = dict(sorted((_moved(p, source, target), text) for p, text in state["files"].items()))
        return Reply({"source": source, "destination": target, "moved": True}, message=f"Moved {source} to {target}.")

    def do_rm(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        path = _resolve(state, args["path"])
        if not _exists(state, path):
            return _errno("ENOENT", "rm", path)
        if path in state["dirs"] and not args.get("recursive", False):
            return _errno("EISDIR", "rm", path)
        if _in_use(state, path):
            return _errno("EBUSY", "rm", path)
        if not _writable(path):
            return _errno("EACCES", "rm", path)
        doomed_files = [p for p in state["files"] if p == path or p.startswith(path + "/")]
        doomed_dirs = [p for p in state["dirs"] if p == path or p.startswith(path + "/")]
        status, message = OK, f"Removed {path}."
        if steer.partial_success and path in state["dirs"] and len(doomed_files) >= 2:
            doomed_files, doomed_dirs = doomed_files[: len(doomed_files) // 2], []
            status, message = PARTIAL, f"Removed {len(doomed_files)} file(s); the rest of {path} could not be removed."
        for p in doomed_files:
            del state["files"][p]
        state["dirs"] = [p for p in state["dirs"] if p not in doomed_dirs]
        return Reply({"path": path, "removed": len(doomed_files) + len(doomed_dirs)}, message=message, status=status)

    def do_find(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        path = _resolve(state, args["path"])
        if (problem := _need_dir(state, path, "find")) is not None:
            return problem
        found = _found(state, path, args["name"])
        if steer.empty_result:
            found = []
        limit = steer.page_size or DEFAULT_LIMIT
        return Reply({"path": path, "matches": found[:limit], "count": len(found), "truncated": len(found) > limit},
                     message=f"{len(found)} match(es) for {args['name']!r} under {path}.")

    # --- scripted agent ------------------------------------------------------------------------------------

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        home, files, dirs = state["cwd"], sorted(state["files"]), state["dirs"]
        roll = rng.random()
        if roll < 0.2:
            return Call("ls", {"path": _maybe_relative(rng.choice(dirs), home, rng)} if rng.random() < 0.8 else {})
        if roll < 0.4 and files:
            return Call("cat", {"path": _maybe_relative(rng.choice(files), home, rng)})
        if roll < 0.55:
            base = rng.choice([d for d in dirs if d.startswith(home)] or [home])
            new = posixpath.join(base, rng.choice(["archive", "old", "backup", "2025", "tmp"]))
            args: JSON = {"path": _maybe_relative(new, home, rng)}
            if rng.random() < 0.4:
                args["parents"] = True
            return Call("mkdir", args)
        if roll < 0.7 and files:
            source = rng.choice([f for f in files if f.startswith(home)] or files)
            dest = rng.choice([d for d in dirs if d.startswith(home)] + [source + ".bak"])
            return Call("mv", {"source": _maybe_relative(source, home, rng), "destination": _maybe_relative(dest, home, rng)})
        if roll < 0.85:
            target = rng.choice(files + dirs)
            args = {"path": _maybe_relative(target, home, rng)}
            if target in dirs or rng.random() < 0.2:
                args["recursive"] = True
            return Call("rm", args)
        return Call("find", {"path": rng.choice([home, "/", f"{home}/docs"]),
                             "name": rng.choice(["*.md", "*.txt", "*.py", "notes*", "*", "*.csv", "*.log"])})

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        home = state["cwd"]
        ghost = f"{home}/{rng.choice(['report-final.docx', 'old', 'data/raw.csv', 'Notes.txt'])}"
        file = rng.choice(sorted(state["files"]))
        choice = rng.randrange(6)
        if choice == 0:
            return Call(rng.choice(["cat", "rm", "ls"]), {"path": ghost})
        if choice == 1:  # a folder where a file is expected, and the reverse
            return rng.choice([Call("cat", {"path": rng.choice(state["dirs"])}), Call("ls", {"path": file})])
        if choice == 2:  # outside the writable area
            return rng.choice([Call("rm", {"path": "/etc/hosts"}), Call("mkdir", {"path": "/etc/app"}),
                               Call("mv", {"source": "/etc/hostname", "destination": home})])
        if choice == 3:  # a folder without recursive, or the working directory itself
            return rng.choice([Call("rm", {"path": f"{home}/docs"}), Call("rm", {"path": home, "recursive": True})])
        if choice == 4:
            return Call("mkdir", {"path": f"{home}/a/b/c"})
        return Call("mv", {"source": ghost, "destination": "/tmp"})


def _resolve(state: JSON, path: str) -> str:
    joined = posixpath.normpath(posixpath.join(state["cwd"], path.strip() or "."))
    return "/" + joined.lstrip("/")


def _exists(state: JSON, path: str) -> bool:
    return path in state["files"] or path in state["dirs"]


def _in_use(state: JSON, path: str) -> bool:
    """The root, the working directory and its parents cannot be moved or removed."""
    return path == "/" or state["cwd"] == path or state["cwd"].startswith(path + "/")


def _writable(path: str) -> bool:
    parts = path.split("/")
    return (len(parts) >= 3 and parts[1] == "home") or parts[1] == "tmp"


def _children(state: JSON, path: str) -> list[str]:
    return sorted(p for p in [*state["dirs"], *state["files"]] if p != path and posixpath.dirname(p) == path)


def _moved(path: str, source: str, target: str) -> str:
    if path == source:
        return target
    return target + path[len(source):] if path.startswith(source + "/") else path


def _need_dir(state: JSON, path: str, command: str) -> Reply | None:
    if path in state["dirs"]:
        return None
    return _errno("ENOTDIR" if path in state["files"] else "ENOENT", command, path)


def _errno(code: str, command: str, path: str, **fields: str) -> Reply:
    fields = fields or {"path": path}
    return fail(code, f"{command}: {path}: {ERRNO_TEXT[code]}", **fields)


def _maybe_relative(path: str, home: str, rng: random.Random) -> str:
    if path.startswith(home + "/") and rng.random() < 0.4:
        return path[len(home) + 1:]
    return path


def _found(state: JSON, path: str, pattern: str) -> list[str]:
    """Paths under directory `path` whose name matches the glob `pattern`, sorted (what find reports)."""
    prefix = "/" if path == "/" else path + "/"
    return sorted(p for p in [*state["dirs"], *state["files"]]
                  if p.startswith(prefix) and p != path and fnmatch.fnmatchcase(posixpath.basename(p), pattern))
