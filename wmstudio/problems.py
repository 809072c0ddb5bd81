"""Problems found in user input, each tied to the JSON path or place where it was found.

Every loader reports all problems at once so the user fixes a file in one pass, not one error per run."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where (a JSON path, file:line or tool name) and what to do."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidInput(ValueError):
    """Raised with every problem found; `str()` lists them one per line, ready for a CLI or the UI."""

    def __init__(self, problems: list[Problem] | Problem | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        lines = [str(p) for p in self.problems] or ["invalid input"]
        if len(lines) == 1:
            return head + lines[0]
        return head + f"{len(lines)} problems\n" + "\n".join(f"  - {line}" for line in lines)


def join_path(base: str, key: str | int) -> str:
    """Extend a dotted JSON path: `tools[2]` + `parameters` -> `tools[2].parameters`."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def join_key(base: str, key: str) -> str:
    """`join_path` for a key someone wrote: one that is empty or holds `.`, `[`, `]` or `"` is written
    `base["key"]` (as JSON text), so the path still names that one key."""
    if key and not any(char in key for char in '.[]"'):
        return join_path(base, key)
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"
