"""WorldSpec: the five parts a world model conditions on, loaded from and saved to a JSON world file.

Loading validates everything and reports each problem with its JSON path; saving is canonical, so
load -> save -> load round-trips exactly."""

from __future__ import annotations

import json
import secrets
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.input_limits import (
    InputRefused,
    find_lone_surrogate,
    loads_limited,
    read_limited,
    surrogate_message,
)
from wmstudio.world.json_types import describe_value
from wmstudio.world.rules.cel import Rule, cel_syntax_problem
from wmstudio.world.rules.references import reference_findings
from wmstudio.world.tools import Tool, parse_tools

MAX_WORLD_BYTES = 5_000_000
HIDDEN_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")  # controls, format marks (zero-width, bidi), unassigned
WORLD_FIELDS = ("name", "description", "simulator", "initial_state", "task", "tools", "rules", "directives")


@dataclass
class Call:
    """An agent's tool call in the OpenAI tool-call shape: `{"name": ..., "arguments": {...}}`."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: Any, source: str = "call") -> "Call":
        """Validate a parsed call; InvalidInput names the bad field and the expected shape."""
        if isinstance(data, dict) and "function" in data and isinstance(data["function"], dict):
            data = data["function"]  # accept an OpenAI tool_call entry too
        if not isinstance(data, dict):
            raise InvalidInput(Problem(source, 'expected an object {"name": ..., "arguments": {...}}'))
        problems = []
        if not isinstance(data.get("name"), str) or not data.get("name"):
            problems.append(Problem(f"{source}.name", "missing or not a string: give the tool's name"))
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
            try:
                arguments = loads_limited(arguments)
            except json.JSONDecodeError as err:
                problems.append(Problem(f"{source}.arguments", f"not valid JSON ({err.msg}): give an object"))
            except InputRefused as err:
                problems.append(Problem(f"{source}.arguments", str(err)))
        if not isinstance(arguments, dict) and not problems:
            problems.append(Problem(f"{source}.arguments", "must be an object of argument names to values"))
        if problems:
            raise InvalidInput(problems)
        return cls(name=data["name"], arguments=arguments)


@dataclass
class WorldSpec:
    """A world: initial state e0, task, tools T, rules R and steering directives D (docs/architecture.md)."""

    name: str
    task: str = ""
    initial_state: Any = field(default_factory=dict)
    tools: list[Tool] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    directives: list[str] = field(default_factory=list)
    description: str = ""
    simulator: str | None = None  # name of the built-in simulator that gives ground truth, if any

    def tool(self, name: str) -> Tool:
        """The tool called `name` (or whose original name it is); KeyError lists the known names."""
        for tool in self.tools:
            if name in (tool.name, tool.original_name):
                return tool
        known = ", ".join(t.name for t in self.tools) or "none"
        raise KeyError(f"no tool named {name!r} in world {self.name!r} (tools: {known})")

    def without_response_schema(self, tool_name: str) -> WorldSpec:
        """This world with tool `tool_name`'s response schema taken out: how a tool imported without one renders
        (what the model's sketch of a schema is trained and evaluated on)."""
        return replace(self, tools=[replace(t, response=None) if t.name == tool_name else t for t in self.tools])

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        if self.simulator:
            data["simulator"] = self.simulator
        data["initial_state"] = self.initial_state
        data["task"] = self.task
        data["tools"] = [t.to_json() for t in self.tools]
        data["rules"] = [r.to_json() for r in self.rules]
        data["directives"] = list(self.directives)
        return data

    def dumps(self) -> str:
        """Canonical text of the world file (2-space indent, trailing newline)."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def parse_world(data: Any, source: str | None = None) -> WorldSpec:
    """Build a WorldSpec from parsed JSON; InvalidInput lists every problem with its JSON path."""
    if not isinstance(data, dict):
        raise InvalidInput(Problem("", "a world file must be a JSON object with at least `name`"), source)
    if (found := find_lone_surrogate(data)) is not None:  # it would fail later, when saved or put in a prompt
        raise InvalidInput(Problem(found[0], surrogate_message(found[1])), source)
    problems: list[Problem] = []
    for key in data:
        if key not in WORLD_FIELDS:
            problems.append(Problem(key, f"unknown field; allowed fields are {', '.join(WORLD_FIELDS)}"))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem("name", "missing or empty: give the world a name"))
    elif (why := world_name_problem(name)) is not None:
        problems.append(Problem("name", why))
    else:
        name = normal_world_name(name)
    for key in ("task", "description"):
        if key in data and not isinstance(data[key], str):
            problems.append(Problem(key, f"must be text, got {describe_value(data[key])}"))
    if data.get("simulator") is not None and not isinstance(data["simulator"], str):
        problems.append(Problem("simulator", "must be the name of a built-in simulator (text)"))

    tools: list[Tool] = []
    raw_tools = data.get("tools", [])
    if not isinstance(raw_tools, list):
        problems.append(Problem("tools", f"must be a list of tools, got {describe_value(raw_tools)}"))
    elif raw_tools:
        try:
            tools = parse_tools(raw_tools, "auto", source="tools").tools
        except InvalidInput as err:
            problems.extend(err.problems)
    rules = _parse_rules(data.get("rules", []), problems)
    directives = data.get("directives", [])
    if not isinstance(directives, list) or not all(isinstance(d, str) for d in directives):
        problems.append(Problem("directives", "must be a list of strings (one steering directive each)"))
        directives = []
    if not problems:  # field names in the rules' checks, against the schemas (a typo is caught here)
        problems.extend(reference_findings(tools, rules, data.get("initial_state", {}))[0])
    if problems:
        raise InvalidInput(problems, source)
    return WorldSpec(
        name=name,
        task=data.get("task", ""),
        initial_state=data.get("initial_state", {}),
        tools=tools,
        rules=rules,
        directives=list(directives),
        description=data.get("description", ""),
        simulator=data.get("simulator"),
    )


def normal_world_name(name: str) -> str:
    """A world's name as it is saved: Unicode NFKC (full-width `ｒｅｔａｉｌ` is `retail`), spaces trimmed."""
    return unicodedata.normalize("NFKC", name).strip()


def world_name_problem(name: str) -> str | None:
    """Why `name` cannot name a world, or None: characters one cannot see (zero-width, direction marks, controls)
    would make two names that look the same."""
    hidden = [char for char in unicodedata.normalize("NFKC", name)
              if unicodedata.category(char) in HIDDEN_CATEGORIES]
    if hidden:
        shown = ", ".join(f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')})" for char in dict.fromkeys(hidden))
        return (f"holds characters one cannot see ({shown}): two worlds would look alike; type the name again "
                "without them")
    return None


def _parse_rules(raw: Any, problems: list[Problem]) -> list[Rule]:
    if not isinstance(raw, list):
        problems.append(Problem("rules", f"must be a list of {{text, check}} objects, got {describe_value(raw)}"))
        return []
    rules = []
    for i, item in enumerate(raw):
        path = f"rules[{i}]"
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            problems.append(Problem(path, 'expected {"text": ..., "check": <optional CEL>} or a string'))
            continue
        extra = set(item) - {"text", "check"}
        if extra:
            problems.append(Problem(path, f"unknown field(s) {', '.join(sorted(extra))}: only text and check"))
        text, check = item.get("text"), item.get("check")
        if not isinstance(text, str) or not text.strip():
            problems.append(Problem(f"{path}.text", "missing or empty: say the rule in words"))
            continue
        if check is not None:
            if not isinstance(check, str):
                problems.append(Problem(f"{path}.check", "must be a CEL expression as text"))
                continue
            if (problem := cel_syntax_problem(check, f"{path}.check")) is not None:
                problems.append(problem)
                continue
        rules.append(Rule(text=text, check=check or None))
    return rules


def read_json_file(path: str | Path, max_bytes: int = MAX_WORLD_BYTES) -> Any:
    """Read a JSON file with clear messages for missing, huge (devices and pipes too), non-UTF-8, malformed and
    over-limit files (input_limits: nesting, number length, lone surrogates)."""
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file")
    if p.is_dir():
        raise InvalidInput(f"{p}: is a folder, not a JSON file")
    return parse_json_text(read_limited(p, max_bytes), str(p))


def parse_json_text(raw: bytes | str, source: str) -> Any:
    """Parse JSON text, turning decode errors into 'source:line:col: what' messages and limits into 'source: what'."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise InvalidInput(
                f"{source}: not UTF-8 text (bad byte at offset {err.start}): save the file as UTF-8"
            ) from None
    try:
        return loads_limited(raw)
    except json.JSONDecodeError as err:
        raise InvalidInput(
            f"{source}:{err.lineno}:{err.colno}: invalid JSON ({err.msg}): fix the syntax there"
        ) from None
    except InputRefused as err:
        raise InvalidInput(f"{source}: {err}") from None


def load_world(path: str | Path) -> WorldSpec:
    """Load and validate a world file; InvalidInput lists every problem."""
    return parse_world(read_json_file(path), source=str(path))


def save_world(world: WorldSpec, path: str | Path) -> Path:
    """Write the canonical world file atomically (a crash never leaves half a file): through a temporary file of
    its own, so writers of the same path at once each replace it whole (one shared `.tmp` lost a writer's file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(8)}.tmp")
    try:
        with tmp.open("x", encoding="utf-8") as handle:
            handle.write(world.dumps())
        tmp.replace(p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p
