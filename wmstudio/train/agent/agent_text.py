"""What the agent policy reads and writes: an episode as words, with every value it may copy as a slot token.

The copy mechanism. A pointer-generator (See et al. 2017) mixes attention over the context into the next-token
distribution so an id can be copied whole. Here each value the episode shows (an id, an amount, a path, a quoted
label, a session token a tool answered with) gets its own slot token (`<v3>`), numbered by first appearance, so the
ordinary softmax over the vocabulary already chooses between copying a shown value and writing a word: an id is
copied verbatim by construction and never mangled, and the policy stays a plain causal LM that TRL scores with its
own head. Actions are one line each: `call refund_order order_id = <v2> amount_cents = <v1>` or `answer done`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from wmstudio.train.agent.scenarios import COULD_NOT, Scenario, Trajectory
from wmstudio.world.spec import Call

BOS, EOA, EOR, PAD, UNK = "<bos>", "<eoa>", "<eor>", "<pad>", "<unk>"  # EOA ends an action: the policy's EOS
MAX_SLOTS = 48
OVERFLOW_SLOT = "<v?>"  # a value shown after every slot is taken: visible, but not copyable
SLOTS = tuple(f"<v{i}>" for i in range(MAX_SLOTS))
SPECIAL = (PAD, UNK, BOS, EOA, EOR, OVERFLOW_SLOT, *SLOTS)
CALL, ANSWER, DONE, COULD_NOT_WORD = "call", "answer", "done", "could_not"
WORD_FIELDS = ("status", "error")  # response fields shown as words (the outcome the answer turns on)
MAX_RESULT_FIELDS = 12
EMPTY = '""'
_PUNCTUATION = ".,;:!?"
_QUOTED = re.compile(r'"([^"]*)"')
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$")


@dataclass
class SlotTable:
    """The values an episode has shown, each with its slot token (the same value keeps its slot)."""

    values: list[Any] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def slot(self, value: Any) -> str:
        """The token of `value`, giving it the next slot on first sight (the overflow token once all are taken)."""
        key = _value_key(value)
        if key not in self._index:
            if len(self.values) >= MAX_SLOTS:
                return OVERFLOW_SLOT
            self._index[key] = len(self.values)
            self.values.append(value)
        return SLOTS[self._index[key]]

    def known(self, value: Any) -> str | None:
        """The slot token of a value already shown, else None."""
        index = self._index.get(_value_key(value))
        return None if index is None else SLOTS[index]

    def value(self, token: str) -> Any:
        """The value behind a slot token; KeyError for an unused slot or a word."""
        if token not in SLOTS or SLOTS.index(token) >= len(self.values):
            raise KeyError(token)
        return self.values[SLOTS.index(token)]


def prompt_words(scenario: Scenario, slots: SlotTable) -> list[str]:
    """The episode's opening: the world's tools, the credentials the state gives the agent (if any), the task."""
    words = [BOS, "tools", *[tool.name for tool in scenario.world.tools], ";"]
    login = scenario.world.initial_state.get("login") if isinstance(scenario.world.initial_state, dict) else None
    if isinstance(login, dict):
        words.append("login")
        for name, value in login.items():
            words += [name, "=", slots.slot(value)]
        words.append(";")
    return words + ["task", *task_words(scenario.task, slots), ";"]


def task_words(task: str, slots: SlotTable) -> list[str]:
    """The task as words, each value in it (quoted text, ids, numbers, paths, `name=value`) a slot."""
    words: list[str] = []
    pieces = _QUOTED.split(task)  # odd pieces were inside quotes
    for position, piece in enumerate(pieces):
        if position % 2 == 1:
            words.append(slots.slot(piece))
            continue
        for raw in piece.split():
            words += _plain_words(raw, slots)
    return words


def result_words(response: str, slots: SlotTable) -> list[str]:
    """A tool's answer as words: `result status = ok error = "" order_id = <v2> ...` (outcome first, top level only,
    nested lists and objects shown by their size), closed by the end-of-result token."""
    try:
        parsed = json.loads(response)
    except (json.JSONDecodeError, TypeError):
        return ["result", "unreadable", EOR]
    if not isinstance(parsed, dict):
        return ["result", "unreadable", EOR]
    keys = [k for k in WORD_FIELDS if k in parsed] + [k for k in parsed if k not in WORD_FIELDS]
    words = ["result"]
    for key in keys[:MAX_RESULT_FIELDS]:
        value = parsed[key]
        if key in WORD_FIELDS and isinstance(value, str):
            shown = value or EMPTY
        elif isinstance(value, bool) or value is None:
            shown = json.dumps(value)
        elif isinstance(value, (list, dict)):
            shown = f"[{len(value)}]" if isinstance(value, list) else "{…}"
        elif value == "":
            shown = EMPTY
        else:
            shown = slots.slot(value)
        words += [str(key), "=", shown]
    return words + [EOR]


def action_words(action: Call | str, slots: SlotTable) -> list[str] | None:
    """The words of an expert's action (a call or a final answer), ending with EOA; None when an argument cannot be
    written (a value never shown that is not a single word)."""
    if isinstance(action, str):
        return [ANSWER, COULD_NOT_WORD if action.startswith(COULD_NOT) else DONE, EOA]
    words = [CALL, action.name]
    for name, value in action.arguments.items():
        written = _value_words(value, slots)
        if written is None:
            return None
        words += [name, "=", *written]
    return words + [EOA]


def parse_action(words: list[str], slots: SlotTable, task: str) -> Call | str | None:
    """The action a policy wrote: a Call (slots resolved to the values shown), a final answer, or None when the
    words are not an action (the format reward's failure)."""
    words = [w for w in words if w not in (EOA, PAD)]
    if len(words) == 2 and words[0] == ANSWER and words[1] in (DONE, COULD_NOT_WORD):
        return f"Done: {task}" if words[1] == DONE else f"{COULD_NOT}: {task}"
    if len(words) < 2 or words[0] != CALL or not _is_name(words[1]):
        return None
    arguments: dict[str, Any] = {}
    position = 2
    while position < len(words):  # name = value, repeated
        name = words[position]
        if not _is_name(name) or name in arguments or words[position + 1:position + 2] != ["="]:
            return None
        value, used = _value_at(words, position + 2, slots)
        if value is _INVALID:
            return None
        arguments[name] = value
        position += 2 + used
    return Call(words[1], arguments)


_INVALID = object()


def _value_at(words: list[str], position: int, slots: SlotTable) -> tuple[Any, int]:
    """The value starting at `position` and how many words it took (`_INVALID`, 0 when there is none)."""
    if position >= len(words):
        return _INVALID, 0
    word = words[position]
    if word == "[":
        items, cursor = [], position + 1
        while cursor < len(words) and words[cursor] != "]":
            item, used = _value_at(words, cursor, slots)
            if item is _INVALID or isinstance(item, list):
                return _INVALID, 0
            items.append(item)
            cursor += used
        if cursor >= len(words):
            return _INVALID, 0
        return items, cursor - position + 1
    return _scalar(word, slots), 1


def _scalar(word: str, slots: SlotTable) -> Any:
    if word in SLOTS:
        try:
            return slots.value(word)
        except KeyError:
            return _INVALID
    if word in SPECIAL or word in ("=", "]", CALL, ANSWER):
        return _INVALID
    if word in ("true", "false"):
        return word == "true"
    if word == EMPTY:
        return ""
    return int(word) if word.isdigit() and not word.startswith("0") else word


def _value_words(value: Any, slots: SlotTable) -> list[str] | None:
    if isinstance(value, list):
        items = [_value_words(item, slots) for item in value]
        if any(item is None or len(item) != 1 for item in items):
            return None
        return ["[", *[item[0] for item in items], "]"]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    known = slots.known(value)
    if known is not None:
        return [known]
    if value == "":
        return [EMPTY]
    if isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_-]*", value):
        return [value]
    return None


def _plain_words(raw: str, slots: SlotTable) -> list[str]:
    """One whitespace-separated piece of a task: a value slot (with its trailing punctuation as words) or a word."""
    trailing = []
    while raw and raw[-1] in _PUNCTUATION:
        trailing.insert(0, raw[-1])
        raw = raw[:-1]
    if not raw:
        return trailing
    assignment = _ASSIGNMENT.match(raw)
    if assignment:
        name, text = assignment.groups()
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        shown = json.dumps(value) if isinstance(value, bool) or value is None else slots.slot(value)
        return [name, "=", shown, *trailing]
    if _looks_like_value(raw):
        return [slots.slot(int(raw) if raw.isdigit() and not raw.startswith("0") else raw), *trailing]
    return [raw.lower(), *trailing]


def _looks_like_value(word: str) -> bool:
    """Ids, numbers, paths, file names, emails: anything with a digit, a slash, a dot, an @ or an underscore, or a
    capitalised code."""
    return (any(c.isdigit() for c in word) or any(c in word for c in "/@_.")
            or (len(word) >= 4 and word.isupper()))


def _is_name(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", word) is not None and word not in SPECIAL


def _value_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def episode_words(scenario: Scenario, trajectory: Trajectory) -> tuple[list[str], SlotTable]:
    """The whole episode so far as the policy reads it: the opening, then each action and its result."""
    slots = SlotTable()
    words = prompt_words(scenario, slots)
    for step in trajectory.steps:
        written = action_words(step.call, slots)
        words += written if written is not None else [CALL, step.call.name, EOA]
        words += result_words(step.response, slots)
    return words, slots
