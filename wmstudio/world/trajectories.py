"""Histories from the files people already have: our steps, OpenAI message lists, tau-bench records, chat rows.

Each shape becomes the same `list[HistoryStep]`: an assistant tool call is paired with the `tool` message
that answers it (by `tool_call_id`), a results file yields the record chosen with `index`, and a Patronus
world-model row yields the message list of its `State: ...` user turn. Messages name the file and place."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep, parse_history, response_text
from wmstudio.world.input_limits import (
    MAX_JSON_DEPTH,
    InputRefused,
    json_depth,
    json_lines_limited,
    loads_limited,
    read_limited,
)
from wmstudio.world.json_types import describe_value
from wmstudio.world.spec import Call
from wmstudio.world.tools.findings import Findings, at

MAX_HISTORY_BYTES = 64_000_000
STATE_PREFIX, ACTION_MARK = "State: ", "\n\nAction:"
TOOL_RESPONSE_TAGS = ("<tool_response>", "</tool_response>")
SHAPES = ('a list of steps [{"call": {...}, "response": ...}], an OpenAI message list, a tau-bench record '
          '{"traj": [...]} (or a list of them), or a chat row {"messages": [...]} whose user turn starts "State: "')


@dataclass
class _Slot:
    """A call waiting for its response while the messages are read in order."""

    call: Call
    where: str
    call_id: Any
    response: Any = None
    answered: bool = False


def read_history_file(path: str | Path, index: int | None = None) -> list[HistoryStep]:
    """Earlier steps from a JSON or JSON Lines file in any known shape; InvalidInput names the file and place."""
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file")
    if p.is_dir():
        raise InvalidInput(f"{p}: is a folder: give one history file (JSON or JSON Lines)")
    raw, lines = _parse(p, read_limited(p, MAX_HISTORY_BYTES, "for a history", "keep only the trajectory you need"))
    try:
        steps = history_from_data(raw, index, lines)
    except InvalidInput as err:
        found = Findings(problems=list(err.problems))
        found.fold_problems()  # 31 messages that are no call or response: one line, not 31
        raise InvalidInput(found.problems, source=str(p)) from None
    for number, step in enumerate(steps):  # a response given as JSON text is parsed later, by prompts and checks
        if isinstance(step.response, str) and (depth := json_depth(step.response)) > MAX_JSON_DEPTH:
            raise InvalidInput(Problem(f"step {number + 1} response", f"nested {depth:,} levels deep, over the "
                                                                      f"{MAX_JSON_DEPTH}-level limit: flatten it"),
                               source=str(p))
    return steps


def read_trajectories_file(path: str | Path) -> list[list[HistoryStep]]:
    """Every trajectory of a history file, each as steps (one for a single history); read and parsed once."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{p}: no such file")
    raw, lines = _parse(p, read_limited(p, MAX_HISTORY_BYTES, "for a history", "keep only the trajectory you need"))
    records = _records(raw)
    try:
        return [history_from_data(raw, index, lines) for index in range(len(records))] if records \
            else [history_from_data(raw, None, lines)]
    except InvalidInput as err:
        found = Findings(problems=list(err.problems))
        found.fold_problems()
        raise InvalidInput(found.problems, source=str(p)) from None


def history_from_data(raw: Any, index: int | None = None, lines: list[int] | None = None) -> list[HistoryStep]:
    """Earlier steps from parsed data in any known shape; `index` picks one record of several.

    `lines[i]` is the line number of record `i` when the data came from JSON Lines."""
    records = _records(raw)
    if records is None:
        if index is not None:
            raise InvalidInput(Problem("", f"--index {index}: the file holds one history, not a list of "
                                           "trajectories: leave out --index"))
        return _one(raw, "")
    if not records:
        raise InvalidInput(Problem("", "no trajectories in the file: it holds an empty list of records"))
    if index is None and len(records) > 1:
        raise InvalidInput(Problem("", f"the file holds {len(records)} trajectories: pick one with --index N "
                                       f"(0 to {len(records) - 1}), e.g. `wmstudio history import FILE --index 0`"))
    chosen = 0 if index is None else index
    if not 0 <= chosen < len(records):
        raise InvalidInput(Problem("", f"--index {chosen}: the file holds {len(records)} trajectories "
                                       f"(0 to {len(records) - 1})"))
    record, where = records[chosen]
    if lines is not None and isinstance(raw, list):
        where = f"line {lines[chosen]}"
    return _one(record, where)


def steps_from_messages(messages: Any, where: str) -> list[HistoryStep]:
    """Pair each assistant tool call with the message that answers it; a call left unanswered is a problem."""
    if not isinstance(messages, list):
        raise InvalidInput(Problem(where, f"must be a list of messages, got {describe_value(messages)}"))
    problems: list[Problem] = []
    slots: list[_Slot] = []
    for i, message in enumerate(messages):
        path = at(where, i)
        if not isinstance(message, dict):
            problems.append(Problem(path, 'expected a message {"role": ..., "content": ...}'))
            continue
        role = message.get("role")
        if role == "assistant":
            slots += _calls(message, path, problems)
        elif role in ("tool", "function"):
            _answer(slots, message, path, problems)
        elif role == "user" and _tool_response_text(message.get("content")) is not None:
            _answer(slots, {"content": _tool_response_text(message["content"])}, path, problems)
    for slot in slots:
        if not slot.answered:
            named = f" (id {slot.call_id!r})" if slot.call_id is not None else ""
            problems.append(Problem(slot.where, f"call `{slot.call.name}`{named} has no `tool` message answering "
                                                "it: add its response, or end the history before this call"))
    if problems:
        raise InvalidInput(problems)
    return [HistoryStep(slot.call, slot.response) for slot in slots]


def _parse(p: Path, raw: bytes) -> tuple[Any, list[int] | None]:
    """The file's bytes as JSON, or as JSON Lines (a list of records with their line numbers)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{p}: not UTF-8 text (bad byte at offset {err.start}): save the file as UTF-8") from None
    if not text.strip():
        raise InvalidInput(f"{p}: file is empty: it should hold a history ({SHAPES})")
    try:
        return loads_limited(text), None
    except InputRefused as err:
        raise InvalidInput(f"{p}: {err}") from None
    except json.JSONDecodeError as err:
        if err.msg != "Extra data":
            raise InvalidInput(f"{p}:{err.lineno}:{err.colno}: invalid JSON ({err.msg}): fix the syntax there") \
                from None
    return json_lines_limited(text, str(p))


def _records(raw: Any) -> list[tuple[Any, str]] | None:
    """The trajectory records of a results file (a list of records, tau2's `simulations`), or None for one history."""
    if isinstance(raw, dict) and isinstance(raw.get("simulations"), list):
        return [(record, at("simulations", i)) for i, record in enumerate(raw["simulations"])]
    if isinstance(raw, list) and raw and all(isinstance(r, dict) and _is_record(r) for r in raw):
        return [(record, at("", i)) for i, record in enumerate(raw)]
    return None


def _is_record(item: dict[str, Any]) -> bool:
    return "traj" in item or "messages" in item


def _one(raw: Any, where: str) -> list[HistoryStep]:
    """One history: a list of steps or of messages, a record holding messages, or a `State:` chat row."""
    if isinstance(raw, dict) and _is_record(raw):
        key = "traj" if "traj" in raw else "messages"
        where = at(where, key)
        messages = _maybe_json_text(raw[key], where)
    elif isinstance(raw, list) and any(isinstance(item, dict) and "role" in item for item in raw):
        messages, where = raw, where or "messages"
    elif isinstance(raw, list) and (not raw or any(isinstance(item, dict) and "call" in item for item in raw)):
        return parse_history(raw, where or "history")
    elif isinstance(raw, list):
        kinds = sorted({", ".join(sorted(item)[:4]) if isinstance(item, dict) else describe_value(item)
                        for item in raw})[:3]
        raise InvalidInput(Problem(where, f"not a history: its entries ({'; '.join(kinds)}) are neither steps with "
                                          f"`call` nor messages with `role`; give {SHAPES}"))
    else:
        keys = ", ".join(list(raw)[:6]) if isinstance(raw, dict) else describe_value(raw)
        raise InvalidInput(Problem(where, f"not a history ({keys}): give {SHAPES}"))
    state = _state_turn(messages, where)
    return steps_from_messages(*state) if state is not None else steps_from_messages(messages, where)


def _maybe_json_text(value: Any, where: str) -> Any:
    """Some datasets store the message list as JSON text (Patronus' `messages` column)."""
    if not isinstance(value, str):
        return value
    try:
        return loads_limited(value)
    except InputRefused as err:
        raise InvalidInput(Problem(where, str(err))) from None
    except json.JSONDecodeError as err:
        raise InvalidInput(Problem(where, f"is text that is not JSON ({err.msg} at column {err.colno}): "
                                          "give the messages as a list")) from None


def _state_turn(messages: Any, where: str) -> tuple[Any, str] | None:
    """(messages, path) of the `State: <json>` user turn of a Patronus world-model row, or None."""
    if not isinstance(messages, list):
        return None
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") == "user" and isinstance(content, str) and content.startswith(STATE_PREFIX):
            path = f"{at(where, i)}.content"
            end = content.find(ACTION_MARK)
            text = content[len(STATE_PREFIX): end if end >= 0 else len(content)]
            try:
                state = loads_limited(text)
            except InputRefused as err:
                raise InvalidInput(Problem(path, f"the state {err}")) from None
            except json.JSONDecodeError as err:
                raise InvalidInput(Problem(path, f"the text after `State: ` is not JSON ({err.msg} at column "
                                                 f"{err.colno + len(STATE_PREFIX)}): it should be the message list "
                                                 "the agent had seen")) from None
            if not isinstance(state, list):
                raise InvalidInput(Problem(path, f"the state is {describe_value(state)}, not a message list: only "
                                                 "tool-calling states (AppWorld) hold earlier steps"))
            return state, f"{path} State"
    return None


def _calls(message: dict[str, Any], path: str, problems: list[Problem]) -> list[_Slot]:
    """The tool calls of one assistant message: `tool_calls`, legacy `function_call`, or AppWorld's text form."""
    slots: list[_Slot] = []
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        problems.append(Problem(f"{path}.tool_calls", "must be a list of calls "
                                                      '[{"id": ..., "type": "function", "function": {...}}]'))
        return []
    entries = [(entry, f"{path}.tool_calls[{j}]") for j, entry in enumerate(tool_calls or [])]
    if isinstance(message.get("function_call"), dict):
        entries.append((message["function_call"], f"{path}.function_call"))
    if not entries:
        entries = [(entry, f"{path}.content[{j}]") for j, entry in enumerate(_text_calls(message.get("content")))]
    for entry, where in entries:
        try:
            call = Call.from_json(_with_arguments(entry), where)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        slots.append(_Slot(call, where, entry.get("id") if isinstance(entry, dict) else None))
    return slots


def _with_arguments(entry: Any) -> Any:
    """AppWorld writes a call's arguments as `parameters`; Call reads `arguments`."""
    if isinstance(entry, dict) and "arguments" not in entry and isinstance(entry.get("parameters"), dict):
        return {**entry, "arguments": entry["parameters"]}
    return entry


def _text_calls(content: Any) -> list[dict[str, Any]]:
    """AppWorld's calls written as text: `[{"name": ..., "parameters": {...}}]`; [] for any other content."""
    if not isinstance(content, str) or not content.lstrip().startswith("["):
        return []
    try:
        value = loads_limited(content)
    except (json.JSONDecodeError, InputRefused):
        return []
    if isinstance(value, list) and value and all(
            isinstance(v, dict) and "name" in v and ("parameters" in v or "arguments" in v) for v in value):
        return value
    return []


def _tool_response_text(content: Any) -> str | None:
    """The inside of `<tool_response>...</tool_response>` (how AppWorld agents get answers), or None."""
    if not isinstance(content, str):
        return None
    stripped = content.strip()
    start, end = TOOL_RESPONSE_TAGS
    if stripped.startswith(start) and stripped.endswith(end):
        return stripped[len(start): -len(end)].strip()
    return None


def _answer(slots: list[_Slot], message: dict[str, Any], path: str, problems: list[Problem]) -> None:
    """Give a response message to the call it answers: by `tool_call_id` (or tau2's `id`), else the oldest open call."""
    call_id = message.get("tool_call_id", message.get("id"))
    open_slots = [s for s in slots if not s.answered]
    if call_id is not None and any(s.call_id is not None for s in slots):
        slot = next((s for s in open_slots if s.call_id == call_id), None)
    else:
        slot = open_slots[0] if open_slots else None
    if slot is None:
        about = f"tool_call_id {call_id!r}" if call_id is not None else "a tool response"
        problems.append(Problem(path, f"{about} answers no earlier call: give the assistant message with that "
                                      "tool call before it, or remove this message"))
        return
    slot.response, slot.answered = _content(message.get("content")), True


def _content(content: Any) -> Any:
    """A response as the tool gave it: text as is, OpenAI content parts joined, nothing as ""."""
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(str(part.get("text", "")) for part in content)
    return content


def messages_from_steps(steps: list[HistoryStep], task: str | None = None) -> list[dict[str, Any]]:
    """The OpenAI message list an agent had seen after `steps` (the inverse of `steps_from_messages`): the task
    as the user's message when given, then per step an assistant tool call and the `tool` message answering it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}] if task else []
    for number, step in enumerate(steps, start=1):
        call_id = f"call_{number}"
        messages.append(tool_call_message(step.call, call_id))
        messages.append({"role": "tool", "tool_call_id": call_id, "name": step.call.name,
                         "content": response_text(step.response)})
    return messages


def tool_call_message(call: Call, call_id: str) -> dict[str, Any]:
    """One assistant message calling `call`, arguments as JSON text (the OpenAI wire form)."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}]}


def chat_row_step(messages: Any, where: str = "messages") -> tuple[list[HistoryStep], Call, Any]:
    """(earlier steps, the call, the response) of a Patronus world-model chat row: its user turn
    `State: <messages>\\n\\nAction: <[assistant tool call]>` and the assistant turn holding the response."""
    if not isinstance(messages, list) or not messages:
        raise InvalidInput(Problem(where, "must be a non-empty list of messages"))
    state = _state_turn(messages, where)
    if state is None:
        raise InvalidInput(Problem(where, 'no user turn starting "State: ": not a Patronus world-model row'))
    history = steps_from_messages(*state)
    user = next(m for m in messages if isinstance(m, dict) and str(m.get("content", "")).startswith(STATE_PREFIX))
    content = user["content"]
    action_at = content.find(ACTION_MARK)
    if action_at < 0:
        raise InvalidInput(Problem(f"{where} user turn", 'has no "\\n\\nAction: " part after the state'))
    action_text = content[action_at + len(ACTION_MARK):].strip()
    try:
        action = loads_limited(action_text)
    except InputRefused as err:
        raise InvalidInput(Problem(f"{where} Action", str(err))) from None
    except json.JSONDecodeError as err:
        raise InvalidInput(Problem(f"{where} Action", f"is not JSON ({err.msg} at column {err.colno}): it should "
                                                      "be the assistant tool-call message list")) from None
    problems: list[Problem] = []
    message = action[0] if isinstance(action, list) and action else action
    slots = _calls(message, f"{where} Action", problems) if isinstance(message, dict) else []
    if problems or not slots:
        raise InvalidInput(problems or [Problem(f"{where} Action", "holds no tool call: only tool-calling rows "
                                                                   "(AppWorld style) are steps")])
    last = messages[-1]
    response = _content(last.get("content")) if isinstance(last, dict) and last.get("role") == "assistant" else None
    return history, slots[0].call, response
