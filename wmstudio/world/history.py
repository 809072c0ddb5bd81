"""Earlier steps of an episode, `{"call": {"name", "arguments"}, "response": <text or JSON>}`, validated once.

Prompts render them and checks hand them to CEL rules, so both read the same shape from one parser."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.json_types import json_or
from wmstudio.world.spec import Call


@dataclass
class HistoryStep:
    """One earlier turn: the agent's call and the tool's response (the text as returned, or a JSON value)."""

    call: Call
    response: Any

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call.to_json(), "response": self.response}

    def response_value(self) -> Any:
        """The response as a JSON value when it is (or parses as) JSON, else the text itself."""
        return response_value(self.response)


def compact_json(value: Any) -> str:
    """One-line JSON with the value's own key order and no spaces: what prompts show a small model."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def response_value(response: Any) -> Any:
    """Parse a response given as text when it is JSON; text that is not JSON stays text."""
    return json_or(response, response)


def response_text(response: Any) -> str:
    """Text of a response for a prompt: text as given, a JSON value as compact JSON."""
    return response if isinstance(response, str) else compact_json(response)


def parse_history(raw: Any, source: str = "history") -> list[HistoryStep]:
    """Validate earlier steps (dicts or HistoryStep); InvalidInput names each bad one (`history[3].call.name: ...`).

    Extra keys in a step (model, seed, anchors, check report) are ignored, so exported steps load as they are."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise InvalidInput(Problem(source, 'must be a list of steps {"call": {...}, "response": ...}'))
    steps: list[HistoryStep] = []
    problems: list[Problem] = []
    for i, item in enumerate(raw):
        path = f"{source}[{i}]"
        if isinstance(item, HistoryStep):
            steps.append(item)
            continue
        if not isinstance(item, dict):
            problems.append(Problem(path, 'expected a step object {"call": {...}, "response": ...}'))
            continue
        missing = [key for key in ("call", "response") if key not in item]
        if missing:
            problems.append(Problem(path, f"missing {' and '.join(missing)}: a step needs both call and response"))
            continue
        try:
            call = item["call"] if isinstance(item["call"], Call) else Call.from_json(item["call"], f"{path}.call")
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        try:
            json.dumps(item["response"])
        except (TypeError, ValueError):
            problems.append(Problem(f"{path}.response", "must be text or a JSON value"))
            continue
        steps.append(HistoryStep(call=call, response=item["response"]))
    if problems:
        raise InvalidInput(problems)
    return steps
