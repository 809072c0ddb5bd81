"""The world a served request is answered in: what the request itself states, and the served world (or the one
it names) only for what it leaves out, so a task's own database travels in the request as in the paper's design.

The request's state, task, rules and directives replace the world's; a tool the request gives with its schema
replaces the world's, one it gives only by signature or name takes the world's schema when the world has it; the
called tool, known nowhere else, is made from the call (open schema). `sources` says where each part came from,
and which parts of the request were not read (a simulator's oracle parts are never the environment)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.sections import StatedEnvironment
from wmstudio.world.rules.cel import Rule
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool

REQUEST, CALL, NOTHING = "request", "the call", "none"
REQUEST_WORLD = "request"  # the name of a world made from a request alone


@dataclass
class RequestWorld:
    """The world to answer in, the history to answer after, and where each part came from."""

    world: WorldSpec
    history: list[HistoryStep] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict)


def request_world(base: WorldSpec | None, stated: StatedEnvironment | None, call: Call,
                  history: list[HistoryStep] | None = None, task: str | None = None) -> RequestWorld:
    """Merge what the request states (`stated`: its sections; `task`: the task its messages give) over `base`.
    The caller has held the request's state and history to the request limits (studio/request_budget.py)."""
    stated = stated or StatedEnvironment()
    from_world = f"world {base.name}" if base is not None else NOTHING
    sources: dict[str, Any] = {"world": base.name if base is not None else None}

    def part(name: str, mine: Any, theirs: Any, empty: Any) -> Any:
        if mine is not None:
            sources[name] = REQUEST
            return mine
        sources[name] = from_world if base is not None and theirs not in (None, "", [], {}) else NOTHING
        return theirs if base is not None else empty

    state = part("state", stated.state, base.initial_state if base else None, {})
    the_task = part("task", stated.task or task, base.task if base else None, "")
    rules = part("rules", _rules(stated.rules, base), base.rules if base else None, [])
    directives = part("directives", stated.directives, base.directives if base else None, [])
    tools, tool_sources = _tools(base, stated, call, from_world)
    sources["tools"] = tool_sources
    steps = list(history or [])
    if stated.history is not None and not steps:
        steps = stated.history
    ignored = [f"{part} (a simulator's, labelled oracle: never read as the environment)" for part in stated.oracle]
    ignored += [f"{part} (not given to this world model)" for part in stated.unread]
    if ignored:
        sources["ignored"] = ignored
    shell = base if base is not None else WorldSpec(name=REQUEST_WORLD, description="The world a request stated.")
    world = replace(shell, initial_state=state, task=the_task, rules=rules, directives=directives, tools=tools)
    return RequestWorld(world, steps, sources)


def _rules(texts: list[str] | None, base: WorldSpec | None) -> list[Rule] | None:
    """The request's rules (texts); a rule whose text the world has keeps the world's check."""
    if texts is None:
        return None
    checks = {rule.text: rule.check for rule in base.rules} if base is not None else {}
    return [Rule(text, checks.get(text)) for text in texts]


def _tools(base: WorldSpec | None, stated: StatedEnvironment, call: Call,
           from_world: str) -> tuple[list[Tool], dict[str, str]]:
    """The request's tools first (a signature-only one takes the world's schema), then the world's others, then
    the called tool from the call when nothing else gives it."""
    tools: list[Tool] = []
    sources: dict[str, str] = {}

    def theirs(name: str) -> Tool | None:
        try:
            return base.tool(name) if base is not None else None
        except KeyError:
            return None

    for tool in stated.tools:
        known = theirs(tool.name) if tool.name in stated.signatures else None
        tools.append(known or tool)
        sources[tool.name] = from_world if known is not None else REQUEST
    for name, description in stated.named.items():
        if name not in sources:
            known = theirs(name)
            tools.append(known or Tool(name=name, description=description))
            sources[name] = from_world if known is not None else REQUEST
    for tool in base.tools if base is not None else []:
        if tool.name not in sources:
            tools.append(tool)
            sources[tool.name] = from_world
    if not any(call.name in (tool.name, tool.original_name) for tool in tools):
        tools.append(Tool(name=call.name, description="(known only from the call made to it)",
                          parameters={"type": "object"}))
        sources[call.name] = CALL
    return tools, sources
