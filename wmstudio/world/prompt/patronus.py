"""The Patronus world-model prompt format, so checkpoints fine-tuned on that corpus read what they were trained on.

Its rows are `[system, user, assistant]`: the system turn has the paper's headings (ENVIRONMENT STATE with an
`Active tool call:` block of tool_name / arguments (sorted JSON) / validation_status / validation_error; TASK
CONTEXT; TOOL SCHEMAS as signature lines `- tool(param, ...)` plus a return shape; DOMAIN RULES; COMPUTED QUERY
STATE; STEERING DIRECTIVES; a PREDICTION TARGET line), and the user turn is `State: <the agent's message list as
JSON>\\n\\nAction: <[the assistant tool-call message] as JSON>` (json.dumps, default separators). What goes in
is chosen by `prompt.render` (call-local state, newest turns first), within the same budget."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wmstudio.world.checks.report import argument_problems
from wmstudio.world.grounding import NONE, Grounding
from wmstudio.world.history import HistoryStep, compact_json
from wmstudio.world.prompt.render import ORACLE_STATE_LABEL, SECTION_HEADERS, PromptBudget, RenderedPrompt, render
from wmstudio.world.rules.cel import rules_for_tool
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool
from wmstudio.world.trajectories import messages_from_steps, tool_call_message

PATRONUS_TARGET = "PREDICTION TARGET: The strict JSON tool response for the action in the user turn."
ACTION_CALL_ID = "call_action"
MAX_REFITS = 6  # tries at shrinking the inner budget until the Patronus rendering fits


def patronus_chat(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (), max_chars: int | None = None,
                  response: Any = None, grounding: Grounding = NONE, computed_state: Any = None) -> dict[str, list[dict]]:
    """One chat row in the paper's layout, as `render_chat` writes one in ours: `{"messages": [system, user(,
    assistant)]}` within `max_chars` (system + user) when given."""
    budget = PromptBudget(max_chars) if max_chars is not None else None
    return render_patronus(world, call, history, budget, grounding, computed_state).chat(response)


def render_patronus(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                    budget: PromptBudget | None = None, grounding: Grounding = NONE,
                    computed_state: Any = None) -> RenderedPrompt:
    """The Patronus-format prompt for `call` after `history`, within `budget` (system + user) when given.

    Its JSON is wordier than ours, so the content is first chosen with the whole budget and, while the result is
    over it, chosen again within a budget shrunk by the overshoot."""
    inner = budget
    for _ in range(MAX_REFITS):
        rendered = render(world, call, history, inner, grounding, computed_state, chat=True)
        patronus = _as_patronus(world, call, rendered)
        if budget is None:
            return patronus
        over = budget.measure(patronus.text) - budget.limit
        if over <= 0:
            return patronus
        inner = PromptBudget(max(1, inner.limit - over - 8), budget.measure)
    patronus.cut.append(f"nothing more could be cut: the prompt is over its budget of {budget.limit}")
    return patronus


def signature_line(tool: Tool) -> str:
    """`- name(param, ...)` as the paper's TOOL SCHEMAS show a tool; `no parameters` when it takes none."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    names = ", ".join(properties) if isinstance(properties, dict) and properties else "no parameters"
    return f"- {tool.name}({names})"


def return_shape(schema: Any) -> str:
    """A response schema as the paper's return shapes: `{"key": type, ...}` one level deep, arrays `array of ...`."""
    if not isinstance(schema, dict):
        return "object"
    kind = schema.get("type")
    if kind == "object" and isinstance(schema.get("properties"), dict):
        inner = ", ".join(f'"{key}": {_type_word(value)}' for key, value in schema["properties"].items())
        return "{" + inner + "}"
    return _type_word(schema)


def _type_word(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type_word(schema.get('items'))}"
    if kind == "integer":
        return "int"
    return kind if isinstance(kind, str) else "|".join(map(str, kind))


def _as_patronus(world: WorldSpec, call: Call, rendered: RenderedPrompt) -> RenderedPrompt:
    """Re-express what `render` chose (state, turns, rules, directives) in the Patronus layout."""
    shown = rendered.shown
    tool = next((t for t in world.tools if t.name == call.name), None)
    problems = [f"no tool named {call.name!r}"] if tool is None else argument_problems(tool, call)
    environment = [SECTION_HEADERS[0], f"The environment is {world.name} tool-response prediction."]
    if world.task.strip() and "the task" not in rendered.cut:
        environment.append(f"Active task: {' '.join(world.task.split())}")
    if shown.state is not None:
        oracle = ORACLE_STATE_LABEL in rendered.text
        environment.append(f"{ORACLE_STATE_LABEL if oracle else 'Database records:'} {compact_json(shown.state)}")
    environment += ["Active tool call:", f"- tool_name: {call.name}",
                    f"- arguments: {json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)}",
                    f"- validation_status: {'invalid' if problems else 'valid'}",
                    f"- validation_error: {'; '.join(problems) if problems else 'null'}"]
    context = [SECTION_HEADERS[1], f"Predict only the JSON tool response for this one {world.name} action. "
                                   "Do not solve the whole user task. Do not echo the action."]
    schemas = [SECTION_HEADERS[2]]
    if tool is not None:
        schemas.append(signature_line(tool))
        if tool.response is not None:
            schemas.append(f"- Returns: {return_shape(tool.response)}")
    schemas.append("- For invalid calls, return exactly one JSON object with an error key.")
    blocks = ["\n".join(environment), "\n".join(context), "\n".join(schemas)]
    rules = rules_for_tool(world.rules, call.name)
    if rules and "the domain rules" not in rendered.cut:
        blocks.append("\n".join([SECTION_HEADERS[3], *(f"- {' '.join(r.text.split())}" for r in rules)]))
    query = next((block for block in rendered.text.split("\n\n") if block.startswith(SECTION_HEADERS[4])), None)
    if query is not None:
        blocks.append(query)
    if shown.directives:
        blocks.append("\n".join([SECTION_HEADERS[5], *(f"- {d}" for d in shown.directives)]))
    blocks.append(PATRONUS_TARGET)
    system = "\n\n".join(blocks)
    steps = [step for _, step in shown.turns]
    task = world.task.strip() if "the task" not in rendered.cut else ""
    user = (f"State: {json.dumps(messages_from_steps(steps, task or None), ensure_ascii=False)}\n\n"
            f"Action: {json.dumps([tool_call_message(call, ACTION_CALL_ID)], ensure_ascii=False)}")
    return RenderedPrompt(text=f"{system}\n\n{user}", system=system, user=user, shown=shown, cut=list(rendered.cut))
