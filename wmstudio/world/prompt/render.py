"""The world-model prompt: a world, the earlier turns and the agent's call rendered as text (docs/architecture.md).

One renderer for training rows, generation, the chat export and the UI, so a model always sees what it was
trained on. The sections follow the public format; what goes in them is chosen for a small model that must read
it (call-local), within a budget counted in the model's own tokens:

    ## ENVIRONMENT STATE        the active tool call, whether its arguments fit the tool's parameters, and the
                                initial state, call-local: records sharing a value with the call or the turns shown,
                                the rest counted (`"… 212 more"`); with grounding `oracle` (world/grounding.py), the
                                simulator's state *now*, after the earlier turns, labelled as the oracle's
    ## TASK CONTEXT             the task, then the earlier turns (newest kept first; a line counts those cut)
    ## TOOL SCHEMAS             the called tool in full (name, description, parameters, response); the others by
                                name, with their descriptions when there is room
    ## DOMAIN RULES             "- <rule text>" per rule that may bear on the called tool (world/rules/cel.py
                                rules_for_tool; the CEL checks are for the checker, not the model)
    ## COMPUTED QUERY STATE     one the caller gives; else with grounding `oracle` the simulator's retrieval, so
                                labelled; else a listing's records found in the initial state (world/prompt/retrieval.py)
    ## STEERING DIRECTIVES      "- <directive>" per directive
    PREDICTION TARGET: ...      the tool whose JSON response is to be predicted

With grounding `none` (the default) nothing in the prompt comes from a simulator: the model tracks the state from
the initial state and the history as it saw it. In a chat row the system turn holds the sections (TASK CONTEXT
with the task only) and the user turn `State: <earlier turns>\\n\\nAction: <call>`, the paper's user turn.

Budget: the call, its validation, the target line and the called tool (descriptions inside its schema left
out; its response schema too while it would take over half the budget: the canvas lays out the response's keys,
and the state holds the values to copy) are always shown; then, while they fit: directives, the computed query
state (a page of records too big keeps its first ones), the state records the call names, the rules that may bear on the called tool, the newest turn, the records
that turn names, the called tool's response schema and descriptions, the other turns (newest first, up to 85% of
the budget), the task, the other tools' names, their descriptions. What did not fit is listed in `RenderedPrompt.cut`, which the CLI
prints on stderr and the studio in its report."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.checks.report import argument_problems
from wmstudio.world.grounding import NONE, ORACLE, Grounding
from wmstudio.world.history import HistoryStep, compact_json, response_text
from wmstudio.world.prompt.call_local import call_local, drop_last_record, with_references
from wmstudio.world.prompt.retrieval import listing_records
from wmstudio.world.records import needles_of
from wmstudio.world.rules.cel import rules_for_tool
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
TURNS_SHARE = 0.85  # earlier turns stop being added once the prompt reaches this share of its budget
CALLED_TOOL_SHARE = 0.5  # a called tool whose compact schema takes more waits for the state without its response
DESCRIPTIONS_CUT = "descriptions inside the called tool's schema"
RESPONSE_CUT = "the called tool's response schema (the canvas lays out its keys)"
PROMPT_MAX_CHARS = 3000  # the character budget of exported chat rows (a model's budget is in its own tokens)
ORACLE_STATE_LABEL = "State (oracle: the simulator's state now, after the earlier turns):"
ORACLE_QUERY_LABEL = "Oracle (the simulator's retrieval for this call):"
RETRIEVAL_LABEL = "Found in the initial state (the records the call's arguments match):"


@dataclass(frozen=True)
class PromptBudget:
    """How long a prompt may be: `limit` in the unit `measure` counts (characters by default, a model's tokens
    when a model renders it)."""

    limit: int
    measure: Callable[[str], int] = len

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise InvalidInput(Problem("max_chars", f"must be a positive whole number, got {self.limit!r}"))


@dataclass
class Shown:
    """What the prompt shows of each source, as values: what a copy mechanism can point into."""

    call: Call
    state: Any = None  # the call-local state shown (None: none)
    query: Any = None  # the computed query state shown
    turns: list[tuple[int, HistoryStep]] = field(default_factory=list)  # (turn number from 1, step), oldest first
    directives: list[str] = field(default_factory=list)


@dataclass
class RenderedPrompt:
    """A rendered prompt: the sections text a model reads, the same as a chat row, what it shows, what it cut."""

    text: str
    system: str
    user: str
    shown: Shown
    cut: list[str] = field(default_factory=list)

    def chat(self, response: Any = None) -> dict[str, list[dict[str, str]]]:
        """`{"messages": [system, user(, assistant)]}`; `response` (text or JSON) becomes the assistant turn."""
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]
        if response is not None:
            messages.append({"role": "assistant", "content": response_text(response)})
        return {"messages": messages}


@dataclass
class _Parts:
    """The pieces a prompt is composed of; the budget decides which optional ones are in."""

    call: Call
    validation: str
    target: str
    called: str
    state: str | None = None
    turns: list[str] = field(default_factory=list)  # rendered turn blocks, oldest first
    turns_cut: int = 0
    task: str | None = None
    other_tools: str | None = None
    rules: str | None = None
    query: str | None = None
    directives: str | None = None

    def sections(self, chat: bool) -> tuple[str, str]:
        """(sections text, user turn). Sections carry the turns unless `chat` (then the user turn does)."""
        environment = [SECTION_HEADERS[0], f"Active tool call: {compact_json(self.call.to_json())}", self.validation]
        if self.state is not None:
            environment.append(self.state)
        history = self._history()
        context = [SECTION_HEADERS[1], self.task if self.task is not None else NO_TASK]
        if not chat:
            context += ["", history]
        tools = [SECTION_HEADERS[2], self.called] + ([self.other_tools] if self.other_tools else [])
        blocks = ["\n".join(environment), "\n".join(context), "\n".join(tools)]
        for header, body in ((SECTION_HEADERS[3], self.rules), (SECTION_HEADERS[4], self.query),
                             (SECTION_HEADERS[5], self.directives)):
            if body is not None:
                blocks.append(f"{header}\n{body}")
        blocks.append(self.target)
        user = f"State: {history}\n\nAction: {compact_json(self.call.to_json())}"
        return "\n\n".join(blocks), user

    def _history(self) -> str:
        if not self.turns and not self.turns_cut:
            return f"History: {NO_HISTORY}"
        head = "History:" if not self.turns_cut else f"History ({self.turns_cut} earlier turn(s) not shown):"
        return "\n".join([head, *self.turns])


def render(
    world: WorldSpec,
    call: Call,
    history: Sequence[HistoryStep] = (),
    budget: PromptBudget | None = None,
    grounding: Grounding = NONE,
    computed_state: Any = None,
    chat: bool = False,
    retrieval: bool = True,
) -> RenderedPrompt:
    """Render the prompt for predicting the response to `call` after `history`, within `budget` (None: all of it).

    `grounding` `oracle` adds the world's simulator's replayed state and retrieval, labelled as the oracle's;
    `computed_state` is a query state the caller gives (shown as given); else, with `retrieval`, a listing's records
    found in the state shown (world/prompt/retrieval.py). `chat` budgets the chat row (system + user turn) instead of the
    sections text."""
    steps = list(history)
    tool = _find_tool(world, call.name)
    now = current_state(world, steps) if grounding == ORACLE else None
    if computed_state is None and grounding == ORACLE:
        retrieved = query_state(world, now if now is not None else world.initial_state, call)
        computed_state = None if retrieved is None else f"{ORACLE_QUERY_LABEL} {compact_json(retrieved)}"
    if computed_state is None and retrieval:
        found = listing_records(tool, call, world.initial_state, steps)
        computed_state = None if found is None else f"{RETRIEVAL_LABEL} {compact_json(found)}"
    parts = _Parts(call=call, validation=_validation(tool, call), target=target_line(world, call),
                   called=tool_schema_line(tool) if tool is not None else "(the called tool is not in this world)")
    shown = Shown(call=call)
    cut: list[str] = []

    def size() -> int:
        text, user = parts.sections(chat)
        return budget.measure(f"{text}\n\n{user}" if chat else text)

    def fits() -> bool:
        return budget is None or size() <= budget.limit

    if budget is not None:  # a prompt that fits whole is rendered whole
        whole = render(world, call, steps, None, grounding, computed_state, chat, retrieval)
        measured = f"{whole.text}\n\n{whole.user}" if chat else whole.text
        if budget.measure(measured) <= budget.limit:
            return whole

    bare = False  # a called tool too big for the state to fit beside it is shown without its response schema first
    if tool is not None:  # compact first: call-local state and the newest turn matter more than descriptions
        parts.called = tool_schema_line(tool, compact=True)
        if budget is not None and tool.response is not None \
                and budget.measure(parts.called) > CALLED_TOOL_SHARE * budget.limit:
            parts.called, bare = tool_schema_line(tool, compact=True, response=False), True
    parts.directives = _bullets(world.directives)
    shown.directives = list(world.directives)
    if not fits():
        parts.directives, shown.directives = None, []
        cut.append("the steering directives")
    if computed_state is not None:
        parts.query = computed_state if isinstance(computed_state, str) else compact_json(computed_state)
        shown.query = _query_value(computed_state)
        if not fits():
            cut.append(_fit_query(computed_state, parts, shown, fits))
    blocks = turn_blocks(steps)

    def add_turns(limit: int | None, at_most: int) -> None:
        """Add earlier turns, newest first, while the prompt stays within `limit` (and `at_most` of them)."""
        for index in range(len(steps) - len(parts.turns) - 1, -1, -1):
            if len(parts.turns) >= at_most:
                break
            parts.turns.insert(0, blocks[index])
            if not fits() or (limit is not None and size() > limit):
                parts.turns.pop(0)
                break
            shown.turns.insert(0, (index + 1, steps[index]))
        parts.turns_cut = len(steps) - len(parts.turns)

    state_notes = _fit_state(world, call, now, parts, shown, fits)  # the records the call names, first
    parts.rules = _bullets(r.text for r in rules_for_tool(world.rules, call.name))  # then the rules it obeys
    if not fits():
        parts.rules = None
        cut.append("the domain rules")
    add_turns(None, 1)  # then the last turn: it is what the call most often follows up on
    if shown.turns and "state records the call names that did not fit" not in state_notes:
        widened = _widen_state(call, [step for _, step in shown.turns], now, world, parts, shown, fits)
        state_notes = state_notes if widened is None else widened
    cut.extend(state_notes)
    if tool is not None:  # the fullest form that fits now; the smallest stays even when none does
        forms = [(tool_schema_line(tool), []), (tool_schema_line(tool, compact=True), [DESCRIPTIONS_CUT])]
        if bare:
            forms.append((tool_schema_line(tool, compact=True, response=False), [DESCRIPTIONS_CUT, RESPONSE_CUT]))
        for text, notes in forms:
            parts.called = text
            if fits():
                break
        cut.extend(notes)
    add_turns(None if budget is None else int(TURNS_SHARE * budget.limit), len(steps))
    if parts.turns_cut:
        cut.append(f"{parts.turns_cut} earlier turn(s) of {len(steps)}")
    parts.task = world.task.strip() or NO_TASK
    if not fits():
        parts.task = None
        cut.append("the task")
    others = [t for t in world.tools if t is not tool]
    if others:
        parts.other_tools = "Other tools: " + ", ".join(t.name for t in others)
        if not fits():
            parts.other_tools = None
            cut.append("the other tools' names")
        else:
            names = parts.other_tools
            parts.other_tools = "\n".join(tool_summary_line(t) for t in others)
            if not fits():
                parts.other_tools = names
                cut.append("the other tools' descriptions")
    if not fits():  # only the parts that are always shown are left, and they alone are over the budget
        cut.append(f"nothing more: the call, its validation and the called tool alone take {size():,}, over the "
                   f"budget of {budget.limit:,}; give a larger budget")
    text, user = parts.sections(chat=False)
    system, _ = parts.sections(chat=True)
    return RenderedPrompt(text=text, system=system, user=user, shown=shown, cut=cut)


def render_prompt(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (), max_chars: int | None = None,
                  grounding: Grounding = NONE, computed_state: Any = None) -> str:
    """The plain sections prompt, within `max_chars` characters when given."""
    budget = PromptBudget(max_chars) if max_chars is not None else None
    return render(world, call, history, budget, grounding, computed_state).text


def render_chat(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (), max_chars: int | None = None,
                response: Any = None, grounding: Grounding = NONE, computed_state: Any = None) -> dict[str, list[dict]]:
    """One chat row `{"messages": [system, user(, assistant)]}` within `max_chars` (system + user) when given (the
    Patronus paper's own layout: world/prompt/patronus.py's `patronus_chat`)."""
    budget = PromptBudget(max_chars) if max_chars is not None else None
    return render(world, call, history, budget, grounding, computed_state, chat=True).chat(response)


def turn_blocks(steps: Sequence[HistoryStep]) -> list[str]:
    """One text block per earlier turn: `Turn i action: {...}` and `Turn i response: ...` lines."""
    return [
        f"Turn {i} action: {compact_json(step.call.to_json())}\nTurn {i} response: {response_text(step.response)}"
        for i, step in enumerate(steps, start=1)
    ]


def tool_schema_line(tool: Tool, compact: bool = False, response: bool = True) -> str:
    """A tool as one compact JSON line: name, description, parameters, the response schema (unless not `response`)
    and MCP annotations when known; `compact` drops every description inside the schemas (what a small budget
    keeps)."""
    parameters, answer = tool.parameters, tool.response if response else None
    if compact:
        parameters, answer = _without_descriptions(parameters), _without_descriptions(answer)
    entry: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": parameters}
    if answer is not None:
        entry["response"] = answer
    if tool.annotations:  # MCP hints (readOnlyHint, destructiveHint...) tell the model what a call may change
        entry["annotations"] = tool.annotations
    return compact_json(entry)


def tool_summary_line(tool: Tool) -> str:
    """Another tool as one short line: its name and description."""
    return f"- {tool.name}: {' '.join(tool.description.split()) or '(no description)'}"


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


def current_state(world: WorldSpec, history: Sequence[HistoryStep]) -> Any:
    """The state after `history`, replayed by the world's simulator from its initial state; None when there is
    no history, the world has no simulator, or its state has another shape (then e0 is what there is)."""
    from wmstudio.world.simulators import SIMULATORS

    simulator = SIMULATORS.get(world.simulator or "")
    if not history or simulator is None or not isinstance(world.initial_state, dict):
        return None
    state = world.initial_state
    try:
        for step in history:
            state, _ = simulator.step(state, step.call)
    except InvalidInput:
        return None
    return state


def query_state(world: WorldSpec, state: Any, call: Call) -> Any:
    """The world's simulator's retrieval for `call` over `state` (records a listing pages through), or None."""
    from wmstudio.world.simulators import SIMULATORS

    simulator = SIMULATORS.get(world.simulator or "")
    return simulator.query_state(state, call) if simulator is not None and isinstance(state, dict) else None


def _fit_state(world: WorldSpec, call: Call, now: Any, parts: _Parts, shown: Shown,
               fits: Callable[[], bool]) -> list[str]:
    """Show the state call-local (the records sharing a value with the call), cutting the records matched last
    until it fits; returns the notes on what was left out."""
    label = _state_label(now)
    state = now if now is not None else world.initial_state
    if state is None or state == "" or state == {}:
        return []
    if isinstance(state, str):
        parts.state, shown.state = f"{label} {state}", state
        if not fits():
            parts.state, shown.state = None, None
            return ["the environment state (text)"]
        return []
    needles = needles_of(call.arguments)
    for trial in dict.fromkeys((frozenset(with_references(state, needles)), frozenset(needles))):
        local, omitted = call_local(state, set(trial))  # with the records they refer to, when that fits
        parts.state, shown.state = f"{label} {compact_json(local)}", local
        if fits():
            return [f"{omitted} state record(s) not shown"] if omitted else []
    dropped = _fewest_drops(local, lambda trial: _try_state(parts, label, trial, fits))
    if dropped is None:
        parts.state, shown.state = None, None
        return ["the environment state"]
    for _ in range(dropped):  # the records matched last go first
        drop_last_record(local)
    parts.state, shown.state = f"{label} {compact_json(local)}", local
    return [f"{omitted + dropped} state record(s) not shown", "state records the call names that did not fit"]


def _widen_state(call: Call, shown_steps: list[HistoryStep], now: Any, world: WorldSpec, parts: _Parts,
                 shown: Shown, fits: Callable[[], bool]) -> list[str] | None:
    """Also show the records the shown turns name, when that still fits; the new notes, or None if unchanged."""
    state = now if now is not None else world.initial_state
    if not isinstance(state, (dict, list)) or shown.state is None:
        return None
    before = (parts.state, shown.state)
    needles = needles_of(call.arguments)
    for step in shown_steps:
        needles |= needles_of(step.to_json(), strict=True)
    for trial in dict.fromkeys((frozenset(with_references(state, needles)), frozenset(needles))):
        local, omitted = call_local(state, set(trial))
        parts.state, shown.state = f"{_state_label(now)} {compact_json(local)}", local
        if fits():
            return [f"{omitted} state record(s) not shown"] if omitted else []
    parts.state, shown.state = before
    return None


def _state_label(now: Any) -> str:
    return ORACLE_STATE_LABEL if now is not None else "State:"


def _fit_query(computed_state: Any, parts: _Parts, shown: Shown, fits: Callable[[], bool]) -> str:
    """Cut a computed query state that does not fit: a page of records keeps the most of its first records that
    fit (a listing's answer starts with them); anything else goes whole. Returns the note on what was left out."""
    label = next((label for label in (ORACLE_QUERY_LABEL, RETRIEVAL_LABEL)
                  if isinstance(computed_state, str) and computed_state.startswith(label)), None)
    value = _query_value(computed_state)
    page = value.get("page") if isinstance(value, dict) else None
    if label is not None and isinstance(page, list) and len(page) > 1:
        low, high = 0, len(page) - 1  # the most records that fit lie in [low, high]
        while low < high:
            middle = (low + high + 1) // 2
            cut = {**value, "page": page[:middle]}
            parts.query, shown.query = f"{label} {compact_json(cut)}", cut
            low, high = (middle, high) if fits() else (low, middle - 1)
        if low:
            kept = {**value, "page": page[:low]}
            parts.query, shown.query = f"{label} {compact_json(kept)}", kept
            return f"{len(page) - low} of the computed query state's {len(page)} records"
    parts.query, shown.query = None, None
    return "the computed query state"


def _query_value(computed_state: Any) -> Any:
    """The values a computed query state shows (what a copy head may point into): the JSON after its label."""
    for label in (ORACLE_QUERY_LABEL, RETRIEVAL_LABEL):
        if isinstance(computed_state, str) and computed_state.startswith(label):
            try:
                return json.loads(computed_state[len(label):])
            except json.JSONDecodeError:
                return computed_state
    return computed_state


def _try_state(parts: _Parts, label: str, state: Any, fits: Callable[[], bool]) -> bool:
    parts.state = f"{label} {compact_json(state)}"
    return fits()


def _fewest_drops(state: Any, fits_with: Callable[[Any], bool]) -> int | None:
    """The fewest records to cut (last matched first) for `fits_with(state)` to hold: a binary search, since
    each try renders and measures the whole prompt; None when even cutting every record is not enough."""
    def cut(count: int) -> Any:
        trial = copy.deepcopy(state)
        for _ in range(count):
            if not drop_last_record(trial):
                break
        return trial

    most, trial = 0, copy.deepcopy(state)
    while drop_last_record(trial):
        most += 1
    if not fits_with(trial):
        return None
    low, high = 0, most  # fits with `high` records cut
    while low < high:
        middle = (low + high) // 2
        if fits_with(cut(middle)):
            high = middle
        else:
            low = middle + 1
    return high


def _validation(tool: Tool | None, call: Call) -> str:
    if tool is None:
        return f"Validation: invalid (no tool named {call.name!r})"
    problems = argument_problems(tool, call)
    return "Validation: valid" if not problems else "Validation: invalid (" + "; ".join(problems) + ")"


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items()
                if not (k == "description" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def _bullets(lines: Any) -> str:
    text = "\n".join(f"- {' '.join(line.split())}" for line in lines)
    return text or "None."


def _find_tool(world: WorldSpec, name: str) -> Tool | None:
    try:
        return world.tool(name)
    except KeyError:
        return None

