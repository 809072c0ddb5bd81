"""A lookup of something the world does not hold: a read of one record by a value (an id, a name, an email, a
phone) that no record of the state, nor any earlier answer, holds in any case or format. A real API answers its
not-found error; the code is the one the tool's own words state for it (`Errors: UNKNOWN_TENANT unknown id`,
`NO_SUCH_KEG`), never a code of another tool's records. A listing is no lookup: nothing matching is an empty page.
A value held in another case or format (an email typed in capitals) names the record that holds it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from wmstudio.world.checks.explained_codes import CODE_WORD
from wmstudio.world.checks.refused_requests import CLAUSE
from wmstudio.world.episode.state import state_after
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import found_by_field, json_leaves, normalised, pages_or_signs, plain_name
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool
from wmstudio.world.tools.reading import read_only
from wmstudio.world.tools.schema import listed_items

FOUND_WORDS = frozenset({"unknown", "found", "such", "exist", "exists", "nonexistent"})  # UNKNOWN_TENANT, NOT_FOUND
OTHER_WORDS = frozenset({"token", "page", "cursor", "session", "argument", "parameter", "tool", "operation"})


def not_found_code(tool: Tool) -> str | None:
    """The code the tool's description (or its error field's enum) states for a record it does not hold."""
    properties = (tool.response or {}).get("properties") if isinstance(tool.response, dict) else None
    error = (properties or {}).get("error") if isinstance(properties, dict) else None
    enum = " ; ".join(v for v in error.get("enum") or [] if isinstance(v, str)) if isinstance(error, dict) else ""
    for text in (tool.description or "", enum):
        for clause in CLAUSE.split(text):
            for code in CODE_WORD.findall(clause):
                words = set(re.findall(r"[a-z]+", clause.replace(code, " ").lower())) | set(code.lower().split("_"))
                if words & FOUND_WORDS and not words & OTHER_WORDS:
                    return code
    return None


def looked_up(world: WorldSpec, call: Call) -> Tool | None:
    """The tool when `call` reads one record (read-only, no listing, no text answer), else None."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    if tool is None or not read_only(tool) or not isinstance(tool.response, dict) \
            or tool.response.get("type") == "string" or listed_items(tool.response) is not None:
        return None
    return tool


def names_nothing(world: WorldSpec, call: Call, history: Sequence[HistoryStep], state: Any) -> bool:
    """Whether every value the call looks a record up by (its text arguments but page and sign-in ones and those
    its parameters limit to a few choices) is held nowhere in `state` or the history's answers, in any case or
    format; False for a call sending no such value."""
    if not isinstance(call.arguments, dict):
        return False
    tool = next((t for t in world.tools if t.name == call.name), None)
    properties = ((tool.parameters or {}).get("properties") or {}) if tool is not None else {}
    sent = [(key, value) for key, value in call.arguments.items() if isinstance(value, str) and value.strip()
            and not pages_or_signs(key) and not (properties.get(key) or {}).get("enum")]
    if not sent:
        return False
    leaves = [leaf for leaf in json_leaves([state, [step.response_value() for step in history]], keys=True)
              if isinstance(leaf, (str, int)) and not isinstance(leaf, bool)]
    exact, loose = {str(leaf) for leaf in leaves}, {normalised(leaf) for leaf in leaves}
    return not any(value in exact if _exact(key, value) else normalised(value) in loose for key, value in sent)


def _exact(key: str, value: str) -> bool:
    """Whether a value is looked up as given: an id (`order_id`, or letters and digits run together, `as_nbEe7`),
    not a name, an email or a phone, which a lookup matches in any case or format."""
    return plain_name(key).endswith("id") or (not re.search(r"\s", value) and re.search(r"\d", value) is not None
                                              and re.search(r"[A-Za-z]", value) is not None and "@" not in value)


def missing_code(world: WorldSpec, call: Call, history: Sequence[HistoryStep]) -> str | None:
    """The not-found code the called tool states, where the call names nothing the world holds (a refusal already
    chosen, its code still open: a lookup with its owned records, a listing asked for one record), else None."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    code = not_found_code(tool) if tool is not None and read_only(tool) else None
    return code if code is not None and names_nothing(world, call, history, state_after(world, history)) else None


def held_in_another_form(world: WorldSpec, call: Call, history: Sequence[HistoryStep], state: Any) -> bool:
    """Whether a lookup's value is held only in another case or format (`ROSA@X.EXAMPLE` for `rosa@x.example`):
    the one record holding it under the argument's key (records.found_by_field) is the one it names."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    if tool is None or not read_only(tool) or not isinstance(call.arguments, dict):
        return False
    exact = {str(leaf) for leaf in json_leaves(state)}
    sent = [value for key, value in call.arguments.items() if isinstance(value, str) and not pages_or_signs(key)]
    return any(value not in exact for value in sent) and found_by_field(state, call.arguments) is not None


def unfound_code(world: WorldSpec, call: Call, history: Sequence[HistoryStep], state: Any) -> str | None:
    """The not-found code a lookup of nothing the world holds answers, or None (not such a lookup, or its tool
    states no code for it)."""
    tool = looked_up(world, call)
    if tool is None:
        return None
    code = not_found_code(tool)
    return code if code is not None and names_nothing(world, call, history, state) else None
