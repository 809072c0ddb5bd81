"""CEL over paths as the filesystem world resolves them: the pieces its error rules are made of (sims/filesystem.py).

A check cannot normalise a path, so a call's path counts when it is plain (absolute, or relative to the working
directory, with no "..", "." or "//"), else the path the response echoes. Earlier steps change which paths exist:
an rm or mv takes a path away (`gone`), a mkdir or mv makes one (`made`). Bodies name the path `p` (a move: source
`s`, destination `d`); a one-item list's `.exists()` binds it, as CEL has no `let`."""

from __future__ import annotations

WRITABLE = r"^(/home/[^/]+|/tmp)(/|$)"
PLAIN = r'"^(/|(/[^/]+)+)$"'
PATTERN_SAFE = r'"^[A-Za-z0-9_/-]*$"'  # a folder name that reads as itself inside a regular expression


def gone(p: str) -> str:
    """CEL: an earlier rm or mv took path `p` (or a folder above it) away."""
    return (f'history.exists(h, h.response.status != "error" && (h.call.name == "rm" && ({p} == h.response.path || '
            f'{p}.startsWith(h.response.path + "/")) || h.call.name == "mv" && ({p} == h.response.source || '
            f'{p}.startsWith(h.response.source + "/"))))')


def made(p: str, folders: bool = True) -> str:
    """CEL: an earlier mv put something at path `p` (or above it), or (`folders`) a mkdir made it."""
    moved = f'h.call.name == "mv" && ({p} == h.response.destination || {p}.startsWith(h.response.destination + "/"))'
    created = (f'h.call.name == "mkdir" && (h.response.path == {p} || has(h.call.arguments.parents) && '
               f'h.call.arguments.parents == true && h.response.path.startsWith({p} + "/"))')
    return f'history.exists(h, h.response.status != "error" && ({created + " || " if folders else ""}{moved}))'


def missing(p: str) -> str:
    """CEL: path `p` may be missing now (not in the state, or an earlier step took it away)."""
    return f"!({p} in state.files || {p} in state.dirs) || {gone(p)}"


def present(p: str) -> str:
    """CEL: path `p` may be there now (in the state, or an earlier step made it)."""
    return f"{p} in state.files || {p} in state.dirs || {made(p)}"


def parent_there(p: str) -> str:
    """CEL: the folder holding path `p` is in the state (its name pattern-safe) and no earlier step took it away."""
    return (f'state.dirs.exists(e, e.matches({PATTERN_SAFE}) && {p}.matches("^" + (e == "/" ? "" : e) + "/[^/]+$") '
            f'&& !({gone("e")}))')


def flag(name: str) -> str:
    """CEL: the call sets boolean argument `name` to true."""
    return f"(has(call.arguments.{name}) && call.arguments.{name} == true)"


def absolute(argument: str) -> str:
    """CEL for an argument made absolute against the working directory (not normalised: see PLAIN)."""
    return f'({argument}.startsWith("/") ? {argument} : state.cwd + "/" + {argument})'


def called(field: str) -> str:
    """CEL for the path the call names in `field` (none: the working directory), resolved when plain, else the path
    the response echoes (what the simulator resolved)."""
    given = absolute(f"call.arguments.{field}")
    return f"(!has(call.arguments.{field}) ? state.cwd : {given}.matches({PLAIN}) ? {given} : response.{field})"


def on_path(body: str) -> str:
    """CEL: `body` over `p`, the path the call names."""
    return f"[{called('path')}].exists(p, {body})"


def on_move(body: str) -> str:
    """CEL: `body` over `s`, the source a move names, and `d`, its destination (absolute, maybe not plain)."""
    return f"[{called('source')}].exists(s, [{absolute('call.arguments.destination')}].exists(d, {body}))"
