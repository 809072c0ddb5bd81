"""What an import found besides tools: problems (fatal, with the path that names them) and warnings.

Every importer reports into one Findings so the user sees all problems of a file at once and every
lossy conversion as one readable line; a conversion many tools share is folded into one line with a count."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from wmstudio.problems import Problem, join_path

_LINE_BASE = re.compile(r"(^|\s)line \d+$")
NAMES_SHOWN = 6  # tool names listed in a folded warning before "… N more"


def at(base: str, key: str | int) -> str:
    """Extend a path: `tools[2]` + `parameters` -> `tools[2].parameters`; `line 4` + `name` -> `line 4: name`."""
    if _LINE_BASE.search(base):
        return f"{base}: {key}" if isinstance(key, str) else f"{base}: [{key}]"
    return join_path(base, key)


def tool_label(path: str, name: object) -> str:
    """How warnings name a tool: `tools[3] (math.factorial)`; just the path without a name, just the name at the top."""
    if not (isinstance(name, str) and name):
        return path
    return f"{path} ({name})" if path else name


@dataclass
class Findings:
    """Problems and warnings collected while importing one source."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    shared: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # message -> [(its line, tool name)]

    def problem(self, path: str, message: str) -> None:
        """Record something that stops the import; `message` says what is wrong and what to do."""
        self.problems.append(Problem(path, message))

    def fold_problems(self) -> None:
        """Write a problem that several places share once, where it first stood: `144 places ([0], [1], …): ...`."""
        paths: dict[str, list[str]] = {}
        for problem in self.problems:
            paths.setdefault(problem.message, []).append(problem.path)
        folded: list[Problem] = []
        for problem in self.problems:
            where = paths[problem.message]
            if len(where) == 1:
                folded.append(problem)
            elif where[0] == problem.path and not any(p.message == problem.message for p in folded):
                shown = ", ".join(where[:3]) + (", …" if len(where) > 3 else "")
                folded.append(Problem(f"{len(where)} places ({shown})", problem.message))
        self.problems = folded

    def warn(self, label: str, message: str, tool: str | None = None) -> None:
        """Record a lossy conversion, e.g. `tools[3] (f): parameters.properties.x: type 'tuple' mapped to array`.

        With `tool` (the tool's name) the line may later be folded with the same message of other tools."""
        line = f"{label}: {message}" if label else message
        if line not in self.warnings:
            self.warnings.append(line)
        if tool:
            self.shared.setdefault(message, []).append((line, tool))

    def fold_warnings(self) -> None:
        """Write a message that several tools share once, where it first stood:
        `14 tools: <message> (a, b, … 8 more)`."""
        replace: dict[str, str | None] = {}
        for message, seen in self.shared.items():
            names = list(dict.fromkeys(name for _, name in seen))
            if len(names) < 2:
                continue
            shown = ", ".join(names[:NAMES_SHOWN]) + (f", … {len(names) - NAMES_SHOWN} more"
                                                       if len(names) > NAMES_SHOWN else "")
            lines = list(dict.fromkeys(line for line, _ in seen))
            replace[lines[0]] = f"{len(names)} tools: {message} ({shown})"
            replace.update({line: None for line in lines[1:]})
        self.warnings = [replace.get(w, w) for w in self.warnings if replace.get(w, w) is not None]
        self.shared = {}
