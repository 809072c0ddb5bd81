"""What an import found besides tools: problems (fatal, with the path that names them) and warnings.

Every importer reports into one Findings so the user sees all problems of a file at once and every
lossy conversion as one readable line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from wmstudio.problems import Problem, join_path

_LINE_BASE = re.compile(r"(^|\s)line \d+$")


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

    def problem(self, path: str, message: str) -> None:
        """Record something that stops the import; `message` says what is wrong and what to do."""
        self.problems.append(Problem(path, message))

    def warn(self, label: str, message: str) -> None:
        """Record a lossy conversion, e.g. `tools[3] (f): parameters.properties.x: type 'tuple' mapped to array`."""
        line = f"{label}: {message}" if label else message
        if line not in self.warnings:
            self.warnings.append(line)
