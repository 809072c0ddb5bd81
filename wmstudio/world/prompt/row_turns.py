"""The earlier steps and the call of a world-model request or row, in every layout we and others write them.

A state is the agent's OpenAI/AppWorld message list (JSON or JSON text, the Patronus layout) or our own
`History:` text (`Turn i action: {...}` / `Turn i response: ...` lines); an action is the assistant tool-call
message list, AppWorld's `[{"name", "parameters"}]` text form, or our call object. A state that ends with the
very call the action asks about (how ms-swift hands a GRPO plugin the agent's reply) is read as the history before
that call. Problems name the place (`input.state[3]`, `messages[1].content Action`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem, join_path
from wmstudio.world.history import HistoryStep
from wmstudio.world.input_limits import InputRefused, loads_limited
from wmstudio.world.json_types import describe_value
from wmstudio.world.prompt.call_local import OMITTED_KEY
from wmstudio.world.prompt.render import NO_HISTORY
from wmstudio.world.spec import Call
from wmstudio.world.trajectories import ACTION_MARK, STATE_PREFIX, TOOL_RESPONSE_TAGS, steps_from_messages

HISTORY_HEAD = "History"
_TURN = re.compile(r"^Turn (\d+) (action|response): ", re.MULTILINE)


@dataclass
class Turns:
    """What a request asks: the call to answer, the steps before it, the task its messages gave (None: none), and
    whether its state ended with the call itself (dropped from the history)."""

    call: Call
    history: list[HistoryStep] = field(default_factory=list)
    task: str | None = None
    pending_dropped: bool = False


@dataclass
class Row:
    """A chat row or request read: its system text, the turns (None when the action is no tool call, e.g. a text
    game's command), the response (an assistant turn after the user turn), and where the user turn is."""

    system: str
    turns: Turns | None
    response: Any = None
    user_index: int = -1


def read_row(messages: Any, where: str = "messages") -> Row | None:
    """The last `State: ...\\n\\nAction: ...` user turn of chat `messages` read into a Row; None when no user turn
    starts with `State: `."""
    if not isinstance(messages, list):
        raise InvalidInput(Problem(where, "must be a list of messages"))
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"
             and isinstance(m.get("content"), str) and m["content"].startswith(STATE_PREFIX)]
    if not users:
        return None
    index = users[-1]
    content, place = messages[index]["content"], f"{at(where, index)}.content"
    cut = content.rfind(ACTION_MARK)  # the action is JSON on one line: the last mark is the separator
    if cut < 0:
        raise InvalidInput(Problem(place, 'has no "\\n\\nAction: " part after the state: write the user turn as '
                                          '"State: <history>\\n\\nAction: <the call>"'))
    state_text, action_text = content[len(STATE_PREFIX):cut], content[cut + len(ACTION_MARK):].strip()
    system = "\n\n".join(m["content"] for m in messages[:index] if isinstance(m, dict) and m.get("role") == "system"
                         and isinstance(m.get("content"), str))
    turns = read_turns(state_text, action_text, f"{place} State", f"{place} Action")
    after = messages[index + 1:]
    response = after[-1].get("content") if after and isinstance(after[-1], dict) \
        and after[-1].get("role") == "assistant" else None
    return Row(system, turns, response, index)


def read_turns(state: Any, action: Any, state_where: str = "state", action_where: str = "action") -> Turns | None:
    """The call and the history a state and an action give, each as JSON, JSON text or our text; None when the
    action is plain text rather than a tool call (a text game's command, answered in free mode)."""
    call = read_action(action, action_where)
    if call is None:
        return None
    if isinstance(state, str) and state.lstrip().startswith(HISTORY_HEAD):
        return Turns(call, history_from_text(state, state_where))
    value = _json_or_text(state, state_where)
    if value is None or value == "" or value == []:
        return Turns(call)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value, state_where = value["messages"], f"{state_where}.messages"
    if not isinstance(value, list):
        raise InvalidInput(Problem(state_where, f"is {describe_value(value)}: give the agent's messages so far (a "
                                                "list, or its JSON text) or our `History:` text"))
    messages, dropped = _without_pending(value, call)
    return Turns(call, steps_from_messages(messages, state_where), _task_of(messages), dropped)


def read_action(action: Any, where: str = "action") -> Call | None:
    """The call of an action: `[assistant message with tool_calls]`, AppWorld's `[{"name", "parameters"}]`, an
    assistant message, an OpenAI tool call or our `{"name", "arguments"}`, as JSON or JSON text; None for text
    that is no JSON (a command in words)."""
    value = _json_or_text(action, where)
    if isinstance(value, str) or value is None:
        return None
    if isinstance(value, list):
        if not value:
            raise InvalidInput(Problem(where, "is an empty list: give the tool call to answer"))
        value, where = value[0], f"{where}[0]"
    if isinstance(value, dict) and value.get("role") == "assistant":
        call = message_call(value, where)
        if call is None:
            raise InvalidInput(Problem(where, "holds no tool call: give `tool_calls` (or AppWorld's "
                                              '[{"name": ..., "parameters": {...}}] as its content)'))
        return call
    if isinstance(value, dict) and "arguments" not in value and isinstance(value.get("parameters"), dict):
        value = {**value, "arguments": value["parameters"]}
    return Call.from_json(value, where)


def message_call(message: dict[str, Any], where: str = "") -> Call | None:
    """The first call an assistant message makes (`tool_calls`, `function_call` or AppWorld's text form), or None;
    InvalidInput when it makes one that cannot be read (named under `where`)."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return Call.from_json(calls[0], join_path(where, "tool_calls") + "[0]")
    if isinstance(message.get("function_call"), dict):
        return Call.from_json(message["function_call"], join_path(where, "function_call"))
    content = message.get("content")
    if isinstance(content, str) and content.lstrip().startswith("["):
        try:
            entries = loads_limited(content)
        except (json.JSONDecodeError, InputRefused):
            return None
        if isinstance(entries, list) and entries and isinstance(entries[0], dict) and "name" in entries[0]:
            first = entries[0]
            if "arguments" not in first and isinstance(first.get("parameters"), dict):
                first = {**first, "arguments": first["parameters"]}
            return Call.from_json(first, join_path(where, "content") + "[0]")
    return None


def history_from_text(text: str, where: str = "state") -> list[HistoryStep]:
    """Our prompt's history text: `History: <none>` or `History:` then `Turn i action: {...}` and
    `Turn i response: ...` lines (a response may run over several lines)."""
    body = text.strip()
    head, _, rest = body.partition("\n")
    if head.strip().rstrip(":").startswith(HISTORY_HEAD) and head.strip().endswith(NO_HISTORY) and not rest.strip():
        return []
    marks = list(_TURN.finditer(body))
    steps: list[HistoryStep] = []
    problems: list[Problem] = []
    for k, mark in enumerate(marks):
        if mark.group(2) != "action":
            continue
        number = int(mark.group(1))
        place = f"{where} turn {number}"
        end = marks[k + 1].start() if k + 1 < len(marks) else len(body)
        answer = marks[k + 1] if k + 1 < len(marks) else None
        if answer is None or answer.group(2) != "response" or int(answer.group(1)) != number:
            problems.append(Problem(place, f"`Turn {number} action:` has no `Turn {number} response:` line after it"))
            continue
        try:
            call = Call.from_json(loads_limited(body[mark.end():end].strip()), f"{place} action")
        except (json.JSONDecodeError, InputRefused) as err:
            problems.append(Problem(f"{place} action", f"is not a JSON call ({err}): write "
                                                        '{"name": ..., "arguments": {...}}'))
            continue
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        stop = marks[k + 2].start() if k + 2 < len(marks) else len(body)
        steps.append(HistoryStep(call, body[answer.end():stop].rstrip("\n")))
    if problems:
        raise InvalidInput(problems)
    if not steps and rest.strip():
        raise InvalidInput(Problem(where, "holds no `Turn 1 action: {...}` line: write our history as "
                                          "`History:` then `Turn i action:` / `Turn i response:` lines"))
    return steps


def without_markers(value: Any) -> Any:
    """A state shown call-local, without the `"… N more"` entries and `"…"` keys that count what was left out."""
    if isinstance(value, list):
        return [without_markers(v) for v in value if not (isinstance(v, str) and v.startswith(OMITTED_KEY)
                                                          and v.endswith(" more"))]
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != OMITTED_KEY}
    return value


def at(base: str, index: int) -> str:
    return f"{base}[{index}]"


def _json_or_text(value: Any, where: str) -> Any:
    """A value given as JSON text parsed (within the input limits); other text as it is; JSON values as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{\"":
        return text
    try:
        return loads_limited(text)
    except InputRefused as err:
        raise InvalidInput(Problem(where, str(err))) from None
    except json.JSONDecodeError as err:
        if text[0] == "[" or text[0] == "{":
            raise InvalidInput(Problem(where, f"is not JSON ({err.msg} at column {err.colno}): give the messages "
                                              "(state) or the tool call (action) as JSON")) from None
        return text


def _without_pending(messages: list[Any], call: Call) -> tuple[list[Any], bool]:
    """The messages without a last assistant message that makes `call` itself and is not answered."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return messages, False
    try:
        pending = message_call(last)
    except InvalidInput:
        return messages, False
    if pending is not None and pending.name == call.name and pending.arguments == call.arguments:
        return messages[:-1], True
    return messages, False


def _task_of(messages: list[Any]) -> str | None:
    """The first user message before any call that is not a tool response: the agent's task."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            return None
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and content.strip() \
                and not content.strip().startswith(TOOL_RESPONSE_TAGS[0]):
            return content.strip()
    return None
