"""What a world-model system prompt states, read back section by section: our layout (world/prompt/render.py) or the
Patronus paper's (world/prompt/patronus.py), so the environment a request carries is what the model conditions on.

Read: the environment state (`State:` / `Database records:`, other lines of the section as a text state), the
task (`## TASK CONTEXT`, or `Active task:`), the tools (our JSON lines with their schemas; the paper's signature
lines with their `Returns:` shapes; other tools by name), the rules' texts and the steering directives. Parts a
simulator wrote (labelled `oracle`) are kept apart: they are never read as the environment. A system prompt without
these headings states nothing."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep
from wmstudio.world.input_limits import InputRefused, loads_limited
from wmstudio.world.prompt.render import NO_TASK, ORACLE_QUERY_LABEL, ORACLE_STATE_LABEL, SECTION_HEADERS, TARGET_PREFIX
from wmstudio.world.prompt.row_turns import HISTORY_HEAD, history_from_text, without_markers
from wmstudio.world.tools import Tool, parse_tools

ENVIRONMENT, TASK, TOOLS, RULES, QUERY, DIRECTIVES = SECTION_HEADERS
STATE_LABELS = ("State:", "Database records:")
SKIPPED_LINES = re.compile(r"^(Active tool call:|Validation:|- (tool_name|arguments|validation_status|"
                           r"validation_error):|The environment is .* tool-response prediction\.$)")
PATRONUS_CONTEXT = "Predict only the JSON tool response"
PATRONUS_INVALID = "- For invalid calls"
SIGNATURE = re.compile(r"^- ([A-Za-z0-9_.-]+)\((.*)\)$")
SUMMARY = re.compile(r"^- ([A-Za-z0-9_.-]+): (.*)$")
NONE_LISTED = "None."
LITERAL_WORD = re.compile(r"(true|false|null)( \| |, |}|$)")  # a JSON literal in an enum, not a type word
TYPE_WORDS = {"string": "string", "int": "integer", "integer": "integer", "number": "number", "boolean": "boolean",
              "object": "object", "null": "null", "array": "array"}


@dataclass
class StatedEnvironment:
    """The parts a system prompt states; None (or empty) where it states nothing."""

    state: Any = None
    task: str | None = None
    tools: list[Tool] = field(default_factory=list)  # given with their schemas (ours) or signatures (the paper's)
    signatures: set[str] = field(default_factory=set)  # names of the tools above known only by a signature line
    named: dict[str, str] = field(default_factory=dict)  # tools named without a schema: name -> description
    rules: list[str] | None = None
    directives: list[str] | None = None
    history: list[HistoryStep] | None = None  # a sections prompt's `History:` (the chat layout has it in State)
    oracle: list[str] = field(default_factory=list)  # parts a simulator wrote, by label: never the environment
    unread: list[str] = field(default_factory=list)  # parts stated that the world model is not given


def read_sections(text: Any, where: str = "system_prompt") -> StatedEnvironment | None:
    """The environment a system prompt states, or None when it has none of the section headings."""
    if not isinstance(text, str):
        return None
    sections = _split(text)
    if not sections:
        return None
    stated = StatedEnvironment()
    for header, lines in sections.items():
        body = "\n".join(lines).strip()
        if header == ENVIRONMENT:
            _environment(lines, stated, where)
        elif header == TASK:
            _task(body, stated, where)
        elif header == TOOLS:
            _tools(lines, stated, where)
        elif header == RULES:
            stated.rules = _bullets(body)
        elif header == QUERY and body:
            (stated.oracle if body.startswith(ORACLE_QUERY_LABEL) else stated.unread).append("the computed query state")
        elif header == DIRECTIVES:
            stated.directives = _bullets(body)
    return stated


def shape_schema(shape: str) -> dict[str, Any] | None:
    """A JSON Schema from the paper's return shape (`{"key": string, "n": int, "s": "ok" | "error", "xs": array
    of object}`); None when the text is not one."""
    try:
        schema, end = _shape(shape.strip(), 0)
    except (ValueError, IndexError, json.JSONDecodeError):
        return None
    return schema if end == len(shape.strip()) else None


def _split(text: str) -> dict[str, list[str]]:
    """Section heading -> its lines, for the known headings (text before the first and the target line dropped)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in SECTION_HEADERS:
            current = sections.setdefault(stripped, [])
        elif stripped.startswith("## ") or stripped.startswith(TARGET_PREFIX):
            current = None
        elif current is not None:
            current.append(line)
    return sections


def _environment(lines: list[str], stated: StatedEnvironment, where: str) -> None:
    """State (ours: the rest of the section after `State:`; the paper's: the `Database records:` line), the
    paper's `Active task:`, and any other lines as a text state (hindsight notes)."""
    notes: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(ORACLE_STATE_LABEL):
            stated.oracle.append("the simulator's state")
        elif stripped.startswith("State:"):
            rest = "\n".join([stripped[len("State:"):], *lines[index + 1:]])
            stated.state = _state_value(rest, where)
            break
        elif stripped.startswith("Database records:"):
            stated.state = _state_value(stripped[len("Database records:"):], where)
        elif stripped.startswith("Active task:"):
            stated.task = stripped[len("Active task:"):].strip() or None
        elif stripped and not SKIPPED_LINES.match(stripped):
            notes.append(stripped)
    if stated.state is None and notes:
        stated.state = "\n".join(notes)


def _state_value(text: str, where: str) -> Any:
    """A stated state: its JSON (without the counts of records left out), or the text when it is no JSON."""
    text = text.strip()
    if not text:
        return None
    try:
        return without_markers(loads_limited(text))
    except InputRefused as err:
        raise InvalidInput(Problem(where, f"the ENVIRONMENT STATE {err}")) from None
    except json.JSONDecodeError:
        return text


def _task(body: str, stated: StatedEnvironment, where: str) -> None:
    """The task (ours), the paper's fixed instruction (not a task), and a sections prompt's `History:` lines."""
    task = body
    match = re.search(rf"^{HISTORY_HEAD}[ :(]", body, re.MULTILINE)
    if match:
        task = body[:match.start()].strip()
        stated.history = history_from_text(body[match.start():], f"{where} History")
    if task and task != NO_TASK and not task.startswith(PATRONUS_CONTEXT):
        stated.task = task


def _tools(lines: list[str], stated: StatedEnvironment, where: str) -> None:
    """Our JSON tool lines, `Other tools: a, b`, `- name: description`; the paper's `- name(params)` and
    `- Returns: shape` lines."""
    last_signature: Tool | None = None
    for line in (raw.strip() for raw in lines):
        if line.startswith("{"):
            tool = _json_tool(line, where)
            if tool is not None:
                stated.tools.append(tool)
            else:
                stated.unread.append("a TOOL SCHEMAS line that is not a tool")
        elif line.startswith("Other tools:"):
            for name in (n.strip() for n in line[len("Other tools:"):].split(",")):
                if name:
                    stated.named.setdefault(name, "")
        elif line.startswith("- Returns:") and last_signature is not None:
            last_signature.response = shape_schema(line[len("- Returns:"):])
        elif (signature := SIGNATURE.match(line)) is not None:
            names = [] if signature.group(2).strip() == "no parameters" else \
                [n.strip() for n in signature.group(2).split(",") if n.strip()]
            last_signature = Tool(name=signature.group(1),
                                  parameters={"type": "object", "properties": {name: {} for name in names}})
            stated.tools.append(last_signature)
            stated.signatures.add(last_signature.name)
        elif line.startswith(PATRONUS_INVALID):
            continue
        elif (summary := SUMMARY.match(line)) is not None:
            stated.named.setdefault(summary.group(1), summary.group(2).strip())
    for tool in stated.tools:
        stated.named.pop(tool.name, None)


def _json_tool(line: str, where: str) -> Tool | None:
    try:
        value = loads_limited(line)
        return parse_tools([value], "auto", source=f"{where} TOOL SCHEMAS").tools[0]
    except InputRefused as err:
        raise InvalidInput(Problem(f"{where} TOOL SCHEMAS", str(err))) from None
    except (json.JSONDecodeError, InvalidInput, IndexError):
        return None


def _bullets(body: str) -> list[str]:
    if body == NONE_LISTED:
        return []
    return [line.strip()[2:].strip() for line in body.splitlines() if line.strip().startswith("- ")]


def _shape(text: str, pos: int) -> tuple[dict[str, Any], int]:
    """One shape from `pos`: an object of keys and types, or a type."""
    if text.startswith("{", pos):
        properties: dict[str, Any] = {}
        pos += 1
        while not text.startswith("}", pos):
            key, pos = json.JSONDecoder().raw_decode(text, pos)
            if not isinstance(key, str) or not text.startswith(": ", pos):
                raise ValueError("not a shape")
            properties[key], pos = _type(text, pos + 2)
            if text.startswith(", ", pos):
                pos += 2
        return {"type": "object", "properties": properties, "required": list(properties)}, pos + 1
    return _type(text, pos)


def _type(text: str, pos: int) -> tuple[dict[str, Any], int]:
    """`array of T`, an enum of JSON literals (`"a" | "b"`), `{...}`, or a type word (`int`, `string|null`)."""
    if text.startswith("array of ", pos):
        items, pos = _type(text, pos + len("array of "))
        return {"type": "array", "items": items}, pos
    if text.startswith("{", pos):
        return _shape(text, pos)
    if text[pos] in "\"-0123456789" or LITERAL_WORD.match(text, pos):
        values = []
        while True:
            value, pos = json.JSONDecoder().raw_decode(text, pos)
            values.append(value)
            if not text.startswith(" | ", pos):
                break
            pos += 3
        kinds = {type(v) for v in values}
        schema: dict[str, Any] = {"enum": values}
        if kinds == {str}:
            schema = {"type": "string", **schema}
        return schema, pos
    match = re.compile(r"[A-Za-z|]+").match(text, pos)
    if match is None:
        raise ValueError("not a type")
    words = [TYPE_WORDS.get(word) for word in match.group().split("|")]
    if not words or any(word is None for word in words):
        return {}, match.end()  # `any`, or a word of another notation: no constraint
    return ({"type": words[0]} if len(words) == 1 else {"type": words}), match.end()
