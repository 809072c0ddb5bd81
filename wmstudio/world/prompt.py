"""The world-model prompt: a world, the earlier turns and the agent's call rendered as text (DESIGN.md §4).

One renderer for training rows, the samplers and the UI, so a model always sees the format it was trained on.

Format (no public copy of the Patronus corpus was found, so this follows the description in DESIGN.md §4):

    ## ENVIRONMENT STATE        initial state e0: compact JSON, or the text as given
    ## TASK CONTEXT             the task; in the `sections` format also `State:` (earlier turns) and `Action:`
    ## TOOL SCHEMAS             one compact JSON object per line: name, description, parameters[, response]
    ## DOMAIN RULES             "- <rule text>" per rule (the CEL checks are for the checker, not the model)
    ## COMPUTED QUERY STATE     only when a deterministic part of the answer is known (`computed_state`)
    ## STEERING DIRECTIVES      "- <directive>" per directive
    PREDICTION TARGET: ...      one line naming the tool whose JSON response is to be predicted

Sections are separated by one blank line; an empty list reads `None.`. With `grounding=False` the grounding
notes (DOMAIN RULES, COMPUTED QUERY STATE, STEERING DIRECTIVES) are left out, as in ~20% of the paper's rows.
The turn text is `State:` followed by one block per earlier turn (`Turn 1 action: {...}` / `Turn 1 response: ...`),
or `State: start of the episode (no earlier actions)`, then a blank line and `Action: <call as compact JSON>`.
In a chat row (`{"messages": [system, user, assistant]}`) the system turn holds the sections (TASK CONTEXT with
the task only) and the target line, the user turn the turn text, the assistant turn the tool's response.

`max_chars` bounds the prompt (system + user text for a chat row). When the prompt without history is already
over it, the tools other than the called one shrink to `{"name", "description"}` lines first (the called tool
keeps its full schema). Then the earliest turns are dropped whole and
replaced by one marker line `[... 1,234 characters of earlier history omitted ...]`, where the number counts
the characters of the turn text that were cut (turn separators included); the task, the newest turns, the tool
schemas and the call are kept. When even the newest turn does not fit, only the end of the turn text is kept.
The non-history parts are never cut: when they alone exceed `max_chars` the prompt is still rendered whole
(with the history replaced by the marker), so the result can then be longer than `max_chars`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep, compact_json, response_text
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool

SECTION_HEADERS = (
    "## ENVIRONMENT STATE",
    "## TASK CONTEXT",
    "## TOOL SCHEMAS",
    "## DOMAIN RULES",
    "## COMPUTED QUERY STATE",
    "## STEERING DIRECTIVES",
)
TARGET_PREFIX = "PREDICTION TARGET:"
NO_HISTORY = "start of the episode (no earlier actions)"
NO_TASK = "No task description given."
PROMPT_MAX_CHARS = 3000  # the budget world-model prompts are rendered with, in training and in generation


def render_prompt(
    world: WorldSpec,
    call: Call,
    history: Sequence[HistoryStep] = (),
    max_chars: int | None = None,
    grounding: bool = True,
    computed_state: Any = None,
) -> str:
    """The plain `sections` prompt for predicting the response to `call` after `history`.

    InvalidInput names a bad `max_chars`."""
    the_call, steps = call, list(history)
    _check_budget(max_chars)
    head = _sections_before_task(world)
    task = world.task.strip() or NO_TASK

    def compose(history_text: str | None, focus: bool) -> str:
        context = f"{SECTION_HEADERS[1]}\n{task}\n\n{render_turns(history_text, the_call)}"
        return "\n\n".join([*head, context, *_sections_after_task(world, the_call, grounding, computed_state, focus)])

    focus = max_chars is not None and len(compose("", False)) > max_chars
    return compose(_fit_history(steps, max_chars, lambda: len(compose("", focus))), focus)


def render_chat(
    world: WorldSpec,
    call: Call,
    history: Sequence[HistoryStep] = (),
    max_chars: int | None = None,
    response: Any = None,
    grounding: bool = True,
    computed_state: Any = None,
) -> dict[str, list[dict[str, str]]]:
    """One chat row `{"messages": [system, user(, assistant)]}`: the sections as system, `State/Action` as user.

    `response` (text, or a JSON value written as compact JSON) becomes the assistant turn when given;
    `max_chars` bounds the system + user text."""
    the_call, steps = call, list(history)
    _check_budget(max_chars)
    context = f"{SECTION_HEADERS[1]}\n{world.task.strip() or NO_TASK}"

    def compose(focus: bool) -> str:
        after = _sections_after_task(world, the_call, grounding, computed_state, focus)
        return "\n\n".join([*_sections_before_task(world), context, *after])

    system = compose(False)
    if max_chars is not None and len(system) + len(render_turns("", the_call)) > max_chars:
        system = compose(True)
    history_text = _fit_history(steps, max_chars, lambda: len(system) + len(render_turns("", the_call)))
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": render_turns(history_text, the_call)},
    ]
    if response is not None:
        messages.append({"role": "assistant", "content": response_text(response)})
    return {"messages": messages}


def render_turns(history_text: str | None, call: Call) -> str:
    """The turn text `State: <earlier turns>\\n\\nAction: <call>`; None or no history reads as the episode start."""
    state = f"State:\n{history_text}" if history_text is not None else f"State: {NO_HISTORY}"
    return f"{state}\n\nAction: {compact_json(call.to_json())}"


def turn_blocks(steps: Sequence[HistoryStep]) -> list[str]:
    """One text block per earlier turn: `Turn i action: {...}` and `Turn i response: ...` lines."""
    return [
        f"Turn {i} action: {compact_json(step.call.to_json())}\nTurn {i} response: {response_text(step.response)}"
        for i, step in enumerate(steps, start=1)
    ]


def omitted_marker(count: int) -> str:
    """The line that stands for `count` characters cut from the middle of a long history."""
    return f"[... {count:,} characters of earlier history omitted ...]"


def middle_truncate(blocks: list[str], budget: int) -> str:
    """Join turn blocks with newlines within `budget` characters: drop the earliest whole turns for one marker line.

    When not even the newest turn fits, keep the end of the text; when nothing fits, only the marker."""
    full = "\n".join(blocks)
    if len(full) <= budget:
        return full
    kept_len = len(full)  # length of "\n".join(blocks[start:]), updated as the earliest turns are dropped
    for start in range(1, len(blocks)):
        kept_len -= len(blocks[start - 1]) + 1
        marker = omitted_marker(len(full) - kept_len)
        if len(marker) + 1 + kept_len <= budget:
            return f"{marker}\n{full[len(full) - kept_len:]}"
    room = budget - len(omitted_marker(len(full))) - 1
    if room <= 0:
        return omitted_marker(len(full))
    return f"{omitted_marker(len(full) - room)}\n{full[-room:]}"


def tool_schema_line(tool: Tool) -> str:
    """A tool as one compact JSON line: name, description, parameters and the response schema when known."""
    entry: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if tool.response is not None:
        entry["response"] = tool.response
    return compact_json(entry)


def target_line(world: WorldSpec, call: Call) -> str:
    """The `PREDICTION TARGET:` line: which tool's response to predict, and that only JSON is wanted."""
    tool = _find_tool(world, call.name)
    if tool is None:
        return (
            f"{TARGET_PREFIX} the JSON response of the environment to the Action, which calls `{call.name}`, "
            "a tool not among the TOOL SCHEMAS; write only that JSON."
        )
    shape = " (it must match the tool's response schema)" if tool.response is not None else ""
    return f"{TARGET_PREFIX} the JSON response of tool `{tool.name}` to the Action{shape}; write only that JSON."


def _sections_before_task(world: WorldSpec) -> list[str]:
    state = world.initial_state
    return [f"{SECTION_HEADERS[0]}\n{state if isinstance(state, str) else compact_json(state)}"]


def tool_summary_line(tool: Tool) -> str:
    """A tool as one short JSON line (name and description): how other tools read when the prompt must shrink."""
    return compact_json({"name": tool.name, "description": tool.description})


def _sections_after_task(world: WorldSpec, call: Call, grounding: bool, computed_state: Any,
                         focus: bool = False) -> list[str]:
    called = _find_tool(world, call.name)
    lines = (tool_schema_line(t) if not focus or t is called else tool_summary_line(t) for t in world.tools)
    tools = "\n".join(lines) or "None."
    sections = [f"{SECTION_HEADERS[2]}\n{tools}"]
    if grounding:
        sections.append(f"{SECTION_HEADERS[3]}\n{_bullets(rule.text for rule in world.rules)}")
        if computed_state is not None:
            text = computed_state if isinstance(computed_state, str) else compact_json(computed_state)
            sections.append(f"{SECTION_HEADERS[4]}\n{text}")
        sections.append(f"{SECTION_HEADERS[5]}\n{_bullets(world.directives)}")
    sections.append(target_line(world, call))
    return sections


def _bullets(lines: Any) -> str:
    text = "\n".join(f"- {' '.join(line.split())}" for line in lines)
    return text or "None."


def _fit_history(steps: list[HistoryStep], max_chars: int | None, overhead: Any) -> str | None:
    """History text within what `max_chars` leaves after the rest (`overhead()`, computed only when needed)."""
    if not steps:
        return None
    blocks = turn_blocks(steps)
    if max_chars is None:
        return "\n".join(blocks)
    return middle_truncate(blocks, max_chars - overhead())


def _find_tool(world: WorldSpec, name: str) -> Tool | None:
    try:
        return world.tool(name)
    except KeyError:
        return None


def _check_budget(max_chars: int | None) -> None:
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1):
        raise InvalidInput(Problem("max_chars", f"must be a positive whole number of characters, got {max_chars!r}"))
