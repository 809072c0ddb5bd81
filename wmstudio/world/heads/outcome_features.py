"""What a call's outcome turns on, named: the facts an outcome head learns status and error code from.

Most refusals turn on a lookup (`ORDER_NOT_FOUND`, `ENOENT`), a field of the record the call names (an order already
delivered, a card that declines), a date's age (a refund window, an expired session), a comparison of the call's
numbers with the record's (more than is left to refund), the call's own arguments (a missing or ill-typed one), or
an earlier turn on the same id. A small denoiser does not learn those by attention in minutes; named features make
them a linear choice. Retrieval, comparison, and the world's own rules read on the state as shown (whether one
refuses an ok answer): nothing here knows any world's outcome."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from jsonschema.exceptions import SchemaError

from wmstudio.world.checks.decided import rule_verdicts
from wmstudio.world.episode.state import state_after
from wmstudio.world.grounding import NONE, ORACLE, Grounding
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.call_local import is_collection
from wmstudio.world.prompt.render import current_state
from wmstudio.world.records import needles_of, record_with_id
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.linear_patterns import validator_for

DIRECTIVE = "directive:"  # features of the steering directives, which mean the same for every tool
AGE_DAYS = (0, 1, 3, 7, 14, 30, 60, 90, 365)  # a date's age is told as "at most N days" for each N
MAX_VALUE_CHARS = 24  # longer call values and record fields (texts, contents) are not named
MAX_RECORD_FIELDS = 24  # fields of one record read, in order
HISTORY_TURNS = 6  # the newest turns read for earlier answers on the same id
CURSOR = re.compile(r"cursor|page_?token|next_?token|continuation", re.I)  # an argument naming a page, not a record
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")


def outcome_features(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                     grounding: Grounding = NONE) -> list[str]:
    """The named facts of one call: argument checks, each argument's value (short ones) and where its id-like
    values sit in the state, the state's flags, earlier answers on the same ids, directive words. The state is
    what the prompt shows: the initial one, or with grounding `oracle` the simulator's after `history`."""
    state = current_state(world, history) if grounding == ORACLE else None
    state = world.initial_state if state is None else state
    scalars = top_scalars(state)
    today = next((when for when in map(as_date, scalars.values()) if when is not None), None)
    found = ["bias", f"turns:{min(len(history), 4)}", *_argument_checks(world, call)]
    numbers = [(path, value) for path, value in leaves(call.arguments) if _is_number(value)]
    for path, value in leaves(call.arguments):
        if _is_number(value):
            found.append(f"arg:{path}:{_sign(value)}")
            found += [f"arg:{path}{'>' if value > other else '<='}{name}" for name, other in scalars.items()
                      if _is_number(other)]
        elif isinstance(value, bool) or value is None:
            found.append(f"arg:{path}={value}")
        elif isinstance(value, str):
            found += _string_features(path, value.strip(), state, scalars, today, numbers, history)
    found += [f"state:{name}={value}" for name, value in scalars.items() if _flag(value)]
    found += _rule_facts(replace(world, initial_state=state), call, history, tracked=grounding != ORACLE)
    found += [f"{DIRECTIVE}{word}" for text in world.directives for word in sorted(set(_words(text)))]
    return found


def _rule_facts(world: WorldSpec, call: Call, history: Sequence[HistoryStep], tracked: bool = True) -> list[str]:
    """`rule:refuses_ok` when a rule of the world refuses an ok answer to the call (its arguments echoed under their
    own names) on the state as shown: a record in the wrong phase, a quantity above what is left. The history read
    holds only the earlier turns about the record the call is about and those whose answer gave a value the state
    lacks (the login that gave its token, not every call that sent it): a generated world's rule stops judging the
    state once any write may have changed it, though most writes touch other records; so with `tracked` (the state
    shown is the initial one) the rules are read once more on the state the episode's answers have left
    (world/episode), without the record's turns: `rule:refuses_ok_as_answered`."""
    sent = {value for value in needles_of(call.arguments, strict=True) if isinstance(value, str)}
    primary = _primary_record(world.initial_state, call)
    named = {primary[0]} if primary is not None else set()
    given = {value for value in sent if next(_places(world.initial_state, value), None) is None}
    own = [step for step in history if named & needles_of(step.call.arguments, strict=True)]
    given_by = [step for step in history if given & needles_of(step.response_value(), strict=True)]
    try:
        properties = world.tool(call.name).response.get("properties") or {}
    except (KeyError, AttributeError):
        properties = {}
    echoed = {name: value for name, value in call.arguments.items() if name in properties and isinstance(value, str)}
    decided = {**echoed, "status": "ok"}
    found = ["rule:refuses_ok"] if _refused(world, call, decided, own, given_by) else []
    answered = state_after(world, history) if tracked else world.initial_state
    if answered is not world.initial_state and _refused(replace(world, initial_state=answered), call, decided, [],
                                                        given_by):
        found.append("rule:refuses_ok_as_answered")  # the state as the episode's answers have left it
    return found


def _refused(world: WorldSpec, call: Call, decided: dict[str, Any], own: Sequence[HistoryStep],
             given_by: Sequence[HistoryStep]) -> bool:
    """Whether a rule refuses `decided` read with the record's own earlier turns and the turns that gave the call's
    tokens, or, where those tokens' turns leave it undecided (a login counts as a write), refuses it without them
    (a rule about the session holds only with its login)."""
    both = [verdict for _, verdict in rule_verdicts(world, call, decided, [*own, *given_by])]
    if False in both:
        return True
    if not given_by or None not in both:  # the rules read without the tokens' turns would say the same
        return False
    alone = [verdict for _, verdict in rule_verdicts(world, call, decided, own)]
    return any(verdict is None and first is False for verdict, first in zip(both, alone))


def _primary_record(state: Any, call: Call) -> tuple[str, tuple, dict[str, Any]] | None:
    """(its id, its key path, the record) of the record the call is about: the first argument, in the call's order,
    that is a record's own id (`parcel_id` before `recipient_id`, which a parcel also holds)."""
    for _, value in leaves(call.arguments):
        if isinstance(value, str) and value in needles_of(value, strict=True):
            found = record_with_id(state, value)
            if found is not None:
                return value, found[0], found[1]
    return None


def _argument_checks(world: WorldSpec, call: Call) -> list[str]:
    """Unknown tool, missing required arguments, unknown ones, and each way the arguments break the parameters."""
    try:
        tool = world.tool(call.name)
    except KeyError:
        return ["unknown_tool"]
    parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
    known = parameters.get("properties") or {}
    found = [f"missing_arg:{name}" for name in parameters.get("required") or [] if name not in call.arguments]
    found += [f"extra_arg:{name}" for name in call.arguments if known and name not in known]
    try:
        checker = validator_for(parameters)(parameters)
        found += [f"invalid_arg:{'.'.join(map(str, error.path))}:{error.validator}"
                  for error in checker.iter_errors(call.arguments)]
    except (SchemaError, TypeError, ValueError):
        pass
    return found


def _string_features(path: str, value: str, state: Any, scalars: dict[str, Any], today: dt.datetime | None,
                     numbers: list[tuple[str, float]], history: Sequence[HistoryStep]) -> list[str]:
    """A string argument: its value when short and not an id, how it relates to the state's scalars, and for an
    id-like value whether the state holds it, where, the record it belongs to, and earlier answers about it."""
    when, cursor = as_date(value), CURSOR.search(path.rsplit(".", 1)[-1]) is not None
    id_like = value in needles_of(value, strict=True) and when is None and not cursor and not _is_name(value)
    found = [] if id_like else [f"arg:{path}:{'empty' if not value else 'text'}"]
    if not id_like and len(value) <= MAX_VALUE_CHARS and when is None and not cursor:
        found.append(f"arg:{path}={value.lower()}")
    for name, other in scalars.items():
        if isinstance(other, str) and other and value == other:
            found.append(f"arg:{path}==state:{name}")
        elif isinstance(other, str) and len(other) >= 3 and other in value:
            found.append(f"arg:{path}~state:{name}")
    if cursor:  # a page token or cursor: an earlier page's, not a record's
        return [*found, f"arg:{path}:cursor"]
    if when is not None:  # a date the call asks for: how far from the state's today, not whether a record holds it
        return found + _date_features(f"arg:{path}:date", when, today)
    if not id_like:  # a name or a filter's word: whether a record holds it (a name taken, a filter that matches)
        held = len(value) >= 3 and next(_places(state, value), None) is not None
        return [*found, f"arg:{path}:{'held' if held else 'unheld'}"]
    places = list(_places(state, value))
    found.append(f"arg:{path}:{'found' if places else 'missing'}")
    if not places and "/" in value.strip("/"):
        parent = value.rstrip("/").rsplit("/", 1)[0] or "/"
        found.append(f"arg:{path}:parent_{'found' if next(_places(state, parent), None) else 'missing'}")
    if places:
        where, record = places[0]
        found.append(f"arg:{path}:at:{re.sub(r'[0-9]+', '#', where)}")
        if isinstance(record, dict):
            found += record_features(f"arg:{path}:record", record, today, numbers)
    answered = False
    for step in list(history)[::-1][:HISTORY_TURNS]:
        answer = step.response_value()
        status = answer.get("status") if isinstance(answer, dict) else None
        if any(value == leaf for _, leaf in leaves(step.call.arguments)):
            found.append(f"history:{path}:{step.call.name}:{status}")
        elif not answered and status != "error" and any(value == leaf for _, leaf in leaves(answer)):
            answered = True  # an id an earlier answer gave (a new booking, a session token): the newest answer
            found.append(f"answered:{path}:{step.call.name}:{status}")
            record = next((node for node in _records_holding(answer, value)), None)
            if record is not None:
                found += record_features(f"arg:{path}:answered", record, today, numbers)
    return found


def _records_holding(value: Any, wanted: str) -> Iterator[dict[str, Any]]:
    """The objects inside `value` that hold `wanted` as one of their own fields, innermost last."""
    if isinstance(value, dict):
        if any(leaf == wanted for leaf in value.values()):
            yield value
        for child in value.values():
            yield from _records_holding(child, wanted)
    elif isinstance(value, list):
        for child in value:
            yield from _records_holding(child, wanted)


def record_features(prefix: str, record: dict[str, Any], today: dt.datetime | None,
                    numbers: Sequence[tuple[str, float]]) -> list[str]:
    """A record's short fields (flags, states, empties), its dates' ages against the state's date, its numbers'
    signs and equalities, and how each number of the call compares with them and with their differences."""
    fields = dict(list(record.items())[:MAX_RECORD_FIELDS])
    amounts = {name: value for name, value in fields.items() if _is_number(value)}
    found = []
    for name, value in fields.items():
        when = as_date(value)
        if when is not None and today is not None:
            days = (today - when).total_seconds() / 86400
            found.append(f"{prefix}.{name}:{'past' if days >= 0 else 'future'}")
            found += [f"{prefix}.{name}:age<={limit}" for limit in AGE_DAYS if days <= limit]
        elif _is_number(value):
            found.append(f"{prefix}.{name}:{_sign(value)}")
        elif value == "" or _flag(value):
            found.append(f"{prefix}.{name}={value}")
        elif isinstance(value, list):
            found.append(f"{prefix}.{name}:items{min(len(value), 3)}")
    found += [f"{prefix}.{a}=={b}" for a in amounts for b in amounts if a < b and amounts[a] == amounts[b]]
    for argument, number in numbers:
        for name, value in amounts.items():
            found.append(f"{prefix}:{argument}{'>' if number > value else '==' if number == value else '<'}{name}")
            found += [f"{prefix}:{argument}>{name}-{other}" for other, less in amounts.items()
                      if other != name and number > value - less]
    return found


def _date_features(prefix: str, when: dt.datetime, today: dt.datetime | None) -> list[str]:
    """A date argument against the state's today: past or future, and within how many days of it (`in<=14`)."""
    if today is None:
        return [prefix]
    days = (when - today).total_seconds() / 86400
    found = [f"{prefix}:{'future' if days > 0 else 'past'}"]
    return found + [f"{prefix}:in<={limit}" for limit in AGE_DAYS if abs(days) <= limit]


def _is_name(value: str) -> bool:
    """A name or a title (`Granite Bay 8`): words with a space between, not a path."""
    return " " in value and "/" not in value


def top_scalars(state: Any) -> dict[str, Any]:
    """The state's plain values at the top and one record down (`today`, `balance.available_cents`), not inside
    collections."""
    found: dict[str, Any] = {}
    if not isinstance(state, dict):
        return found
    for key, value in state.items():
        if isinstance(value, dict) and not is_collection(value):
            found.update({f"{key}.{inner}": leaf for inner, leaf in value.items() if not isinstance(leaf, (dict, list))})
        elif not isinstance(value, (dict, list)):
            found[str(key)] = value
    return found


def as_date(value: Any) -> dt.datetime | None:
    """An ISO date or date-time string as a naive UTC datetime, else None."""
    if not isinstance(value, str) or not DATE.match(value):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return None
    return when.astimezone(dt.timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(key path, plain value) of every leaf; list items share their list's path with `[]`."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for child in value:
            yield from leaves(child, f"{path}[]")
    else:
        yield path, value


def _places(node: Any, value: str, path: str = "") -> Iterator[tuple[str, Any]]:
    """(where, the record it belongs to or None) for each place `value` sits in `node`, depth first; collection
    entries are written `[]` (which entry does not matter, what kind of record does) and a map key's record is
    the entry it keys."""
    if isinstance(node, dict):
        collection = is_collection(node)
        for key, child in node.items():
            step = f"{path}[]" if collection else f"{path}.{key}" if path else str(key)
            if _matches(key, value):
                yield step, child if isinstance(child, dict) else None
            if isinstance(child, (dict, list)):
                yield from _places(child, value, step)
            elif _matches(child, value):
                yield step, node
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, (dict, list)):
                yield from _places(item, value, f"{path}[]")
            elif _matches(item, value):
                yield f"{path}[]", None


def _matches(text: Any, value: str) -> bool:
    """Equal (a number given as text too), or `value` is a relative path that `text` (an absolute one) ends with."""
    if _is_number(text):
        return str(text) == value
    if not isinstance(text, str):
        return False
    return text == value or ("/" in value and not value.startswith("/") and text.endswith("/" + value))


def _flag(value: Any) -> bool:
    """A value that reads as a state or a flag: a boolean, None, or a short word without digits."""
    if isinstance(value, bool) or value is None:
        return True
    return isinstance(value, str) and 0 < len(value) <= MAX_VALUE_CHARS and not any(c.isdigit() for c in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sign(value: float) -> str:
    return "zero" if value == 0 else "positive" if value > 0 else "negative"


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z_]+", text.lower())
