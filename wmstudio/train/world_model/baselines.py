"""The cheap answers a reviewer would try before believing a world model: a figure means something only beside these.

Each writes a whole response for a held-out row from what the prompt's five parts hold and from the training rows,
with no model. `BASELINES` is the one list of them: an entry's name keys its figures, its label heads its column
(the model card, `wmstudio model eval`, the README's table) and its description says what it does, so a new
baseline is one entry here and its test."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wmstudio.model.canvas.layout import ExactItems
from wmstudio.model.heads.call_echoes import argument_defaults
from wmstudio.model.heads.listing_copy import as_history_left
from wmstudio.model.heads.state_copy import state_copy
from wmstudio.train.world_model.field_kinds import parse
from wmstudio.world.checks.fixed_fields import fixed_fields
from wmstudio.world.checks.invention import read_only
from wmstudio.world.checks.refused_requests import Refusal, refused_request, sign_in_refusal
from wmstudio.world.checks.report import argument_problems
from wmstudio.world.checks.unfound import held_in_another_form, unfound_code
from wmstudio.world.episode.answers import write_values
from wmstudio.world.episode.made import new_ids
from wmstudio.world.episode.state import state_after
from wmstudio.world.heads.code_messages import composed_message
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import set_path
from wmstudio.world.prompt.retrieval import find_listing
from wmstudio.world.records import named_record, named_record_at, needles_of
from wmstudio.world.sims.base import neutral_value
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.directives import parse_directive
from wmstudio.world.tools.unions import answer_branch, object_branches

ERROR_DIRECTIVES = ("inject_error", "rate_limit", "auth_failure")
OK = ("ok", "")


@dataclass
class TrainingAnswers:
    """What the baselines know of the training rows: outcomes per tool (and per status reason), and each tool's
    calls with their responses."""

    outcomes: dict[str, Counter] = field(default_factory=dict)
    by_reason: dict[tuple[str, str], Counter] = field(default_factory=dict)
    responses: dict[str, list[tuple[dict[str, Any], str]]] = field(default_factory=dict)

    def add(self, world: WorldSpec, call: Call, state: Any, response_text: str) -> None:
        value = parse(response_text)
        outcome = _outcome(value)
        if outcome is not None:
            self.outcomes.setdefault(call.name, Counter())[outcome] += 1
            self.by_reason.setdefault((call.name, status_reason(world, call, state)), Counter())[outcome] += 1
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        self.responses.setdefault(call.name, []).append((arguments, response_text))

    def majority(self, tool: str) -> tuple[str, str]:
        counts = self.outcomes.get(tool)
        return counts.most_common(1)[0][0] if counts else OK

    def for_reason(self, tool: str, reason: str) -> tuple[str, str] | None:
        counts = self.by_reason.get((tool, reason))
        return counts.most_common(1)[0][0] if counts else None


def status_reason(world: WorldSpec, call: Call, state: Any, history: Sequence[HistoryStep] = ()) -> str:
    """Why the three-line rule answers error: `invalid_argument`, `unknown_id`, a directive's kind, or `none`. An id
    an earlier call or answer of `history` holds is known, as one the state holds."""
    for text in world.directives:
        directive = parse_directive(text)
        if directive is not None and directive.kind in ERROR_DIRECTIVES:
            return directive.kind
    try:
        tool = world.tool(call.name)
    except KeyError:
        return "invalid_argument"
    if argument_problems(tool, call):
        return "invalid_argument"
    shown = _leaves([state, *([step.call.arguments, step.response_value()] for step in history)])
    if any(isinstance(value, str) and value not in shown for value in needles_of(call.arguments, strict=True)):
        return "unknown_id"
    return "none"


def baseline_response(name: str, world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
                      history: Sequence[HistoryStep] = ()) -> str:
    """The response of baseline `name` (a name in BASELINES) for `call` over `state` and `history` (what the prompt
    shows)."""
    return BY_NAME[name].answer(world, call, state, answers, tuple(history))


Answer = Callable[[WorldSpec, Call, Any, TrainingAnswers, Sequence[HistoryStep]], str]


def _nearest(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
             history: Sequence[HistoryStep] = ()) -> str:
    return nearest_response(call, answers) or _dump(_neutral(_schema(world, call), "ok", ""))


def _neutral_answer(status: str) -> Answer:
    return lambda world, call, state, answers, history=(): _dump(_neutral(_schema(world, call), status, ""))


def _echo(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
          history: Sequence[HistoryStep] = ()) -> str:
    status, error = answers.majority(call.name)
    return _dump(_echoed(world, call, state, status, error))


def _rule_status(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
                 history: Sequence[HistoryStep] = ()) -> str:
    return _dump(_echoed(world, call, state, *_ruled_outcome(world, call, state, answers, history)))


def _ruled_outcome(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
                   history: Sequence[HistoryStep] = ()) -> tuple[str, str]:
    """(status, error code) of the three-line rule; an injected code wins."""
    reason = status_reason(world, call, state, history)
    status, error = OK if reason == "none" else (answers.for_reason(call.name, reason) or ("error", ""))
    injected = next((d.value for d in map(parse_directive, world.directives)
                     if d is not None and d.kind == "inject_error" and d.value), None)
    return ("error", str(injected)) if injected else (status, error)


def _echo_plus(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
               history: Sequence[HistoryStep] = (), outcome: tuple[str, str] | None = None) -> str:
    """Everything the model's prompt gives, with no model: a read-only call the history already answered, with no
    write since, answers the same; else the status rule reading the history too, the call's arguments echoed (on an
    error too), the record the call names as the newest earlier answer naming it shows it, and a listing's records
    as the prompt's computed query state finds them, in the collection as the history left it (the listing copy's
    own lookup)."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    for index in range(len(history) - 1, -1, -1):
        step = history[index]
        wrote = next((s for s in history[index + 1:] if not _reads(world, s.call.name)), None)
        if wrote is None and tool is not None and read_only(tool) and step.call.name == call.name \
                and step.call.arguments == call.arguments and isinstance(step.response_value(), dict):
            return _dump(step.response_value())
    status, error = outcome or _ruled_outcome(world, call, state, answers, history)
    value = _echoed(world, call, state, status, error)
    if not isinstance(value, dict):
        return _dump(value)
    if status == "error":  # a refusal still names what it was asked about, as the simulators' answers do
        _echo_into(value, call.arguments)
        return _dump(value)
    named = {n for n in needles_of(call.arguments, strict=True) if isinstance(n, str)}
    newest = next((step.response_value() for step in reversed(history) if isinstance(step.response_value(), dict)
                   and named & {v for v in step.response_value().values() if isinstance(v, str)}), None)
    _echo_into(value, newest or {})
    _echo_into(value, call.arguments)
    listed = find_listing(tool, call, state, history, as_history_left(world, tool, history)) if tool else None
    schema = _schema(world, call, state, history) or {}
    for key, prop in (schema.get("properties") or {}).items():
        if listed and listed.page is not None and isinstance(prop, dict) and prop.get("type") == "array":
            item = neutral_value(prop.get("items")) if isinstance(prop.get("items"), dict) else None
            value[key] = [_laid_out(item, record) for record in listed.page]
    return _dump(value)


def _echo_plus_plus(world: WorldSpec, call: Call, state: Any, answers: TrainingAnswers,
                    history: Sequence[HistoryStep] = ()) -> str:
    """echo+ given every hand-built helper the model uses, with no model: the record the call names copied whole
    from the state the episode left (model/heads/record_copy.py: its items and entries laid out, its values written), a
    listing's page (model/heads/listing_copy.py, its count, flags and token), the fields the world's rules fix under the
    ruled outcome, the arguments' defaults, a new record's minted id and the status and text a write leaves on the
    record it acts on (world/episode/)."""
    text = _echo_plus(world, call, state, answers, history)
    value = parse(text)
    if isinstance(value, dict) and value.get("status") == "error" and not value.get("error") \
            and not world.directives and held_in_another_form(world, call, history, state_after(
                replace(world, initial_state=state), history)):  # a lookup value in another case: no refusal
        text = _echo_plus(world, call, state, answers, history, ("ok", ""))
        value = parse(text)
    schema = _schema(world, call, state, history)
    refusal = refused_request(world, call, history)
    if refusal is not None and isinstance(value, dict) and \
            not (value.get("status") == "error" and sign_in_refusal(value.get("error"))):
        return _dump(_refused(world, call, state, refusal))
    unfound = unfound_code(world, call, history, state_after(replace(world, initial_state=state), history)) \
        if isinstance(value, dict) and (value.get("status") != "error" or not value.get("error")) else None
    if unfound is not None:  # a lookup of nothing the world holds: its tool's not-found code
        return _dump(_refused(world, call, state, Refusal(unfound, None, "")))
    whole = isinstance(schema, dict) and schema.get("type") in ("string", "array")  # the answer is the copy itself
    if not isinstance(schema, dict) or not whole and (not isinstance(value, dict) or value.get("status") == "error"):
        return text
    seen = replace(world, initial_state=state)
    now = state_after(seen, history)
    copy = state_copy(seen, call, history, schema, now)
    if whole:  # a text answer, or an answer that is itself an array of records
        if copy is None or not copy.values:
            return text
        return json.dumps(copy.values[""]) if "" in copy.values else _dump(_assembled([], copy.values))
    if copy is not None:
        listed = [key for key, shape in (copy.shape or {}).items() if isinstance(shape, ExactItems)] \
            if isinstance(copy.shape, dict) else []
        for key in listed:
            value[key] = []  # the page holds exactly the records found
        value = _assembled(value, copy.values)
    tool = next((t for t in world.tools if t.name == call.name), None)
    extra = {**argument_defaults(call, schema, tool.parameters if tool is not None else None)}
    if tool is not None and not read_only(tool):
        taken = copy.values if copy is not None else ()
        extra.update({**new_ids(world, now, call, schema, taken), **write_values(world, now, call, schema)})
    properties = list(schema.get("properties") or {})
    decided = {k: v for k, v in value.items() if k in ("status", "error")}
    extra.update(fixed_fields(world, call, {**extra, **decided}, history, properties, 0))
    value.update({k: v for k, v in extra.items() if k in (schema.get("properties") or {})})
    return _dump(value)


def _refused(world: WorldSpec, call: Call, state: Any, refusal: Refusal) -> Any:
    """The error a request the world turns away answers (the model's refusal helper, with no model): the world's
    code, the problem or the world's own words for the code, the arguments echoed as echo+ echoes a refusal's."""
    value = _echoed(world, call, state, "error", refusal.code)
    if isinstance(value, dict):
        _echo_into(value, call.arguments)
        if "message" in value:
            value["message"] = refusal.message or composed_message(world, call, refusal.code)
    return value


def _assembled(document: Any, values: dict[str, Any]) -> Any:
    """`document` with each {path: value} set in it."""
    for path, copied in values.items():
        try:
            document = set_path(document, path, copied)
        except (TypeError, ValueError):
            continue
    return document


def _laid_out(item: Any, record: dict[str, Any]) -> Any:
    """A listing's entry: the item schema's fields filled from `record` by key (`order_id` from `id` too)."""
    if not isinstance(item, dict) or not item:
        return record
    filled = dict(item)
    for key in filled:
        if key in record:
            filled[key] = record[key]
        elif key.endswith("_id") and "id" in record:
            filled[key] = record["id"]
        elif key.split("_", 1)[-1] in record:  # order_status from status
            filled[key] = record[key.split("_", 1)[-1]]
    return filled


def _reads(world: WorldSpec, name: str) -> bool:
    tool = next((t for t in world.tools if t.name == name), None)
    return tool is not None and read_only(tool)


def _echoed(world: WorldSpec, call: Call, state: Any, status: str, error: str) -> Any:
    """The schema's fields with `status`: on anything but an error, each call argument into the same-named field and
    the record a call id names into the fields still empty."""
    schema = _schema(world, call)
    if object_branches(schema):  # a union: the named record's branch, a refusal's the error branch
        schema = answer_branch(schema, named_record(state, call) if status != "error" else None)
    value = _neutral(schema, status, error)
    if status not in ("error",):  # a refused call leaves its fields neutral, as an API's error does
        record = named_record(state, call)
        if not (schema or {}).get("properties"):  # no schema to lay out: the record and the arguments as they are
            value = {**(record if isinstance(record, dict) else {}), **call.arguments}
        _echo_into(value, call.arguments)
        if record is not None:
            _echo_into(value, record, overwrite=False)
    return value


@dataclass(frozen=True)
class Baseline:
    """One cheap answer: `name` keys its figures, `label` heads its column, `description` says what it does."""

    name: str
    label: str
    description: str
    answer: Answer


BASELINES: tuple[Baseline, ...] = (  # in the order their columns are shown
    Baseline("echo", "echo", "the call's arguments into same-named fields, the state record a call id names, the "
                             "tool's majority outcome in training", _echo),
    Baseline("rule_status", "status rule", "echo with the status of three rules: a bad argument, an id neither the "
                                           "state nor the history holds or an error directive means error (the code: the tool's commonest for that "
                                           "reason in training)", _rule_status),
    Baseline("echo_plus", "echo+", "everything the model's prompt gives, with no model: a read-only call the "
                                   "history answered repeats that answer; else the status rule with the history's "
                                   "ids known, echo, the named record as the newest earlier answer shows it, a "
                                   "listing's records from the state", _echo_plus),
    Baseline("echo_plus_plus", "echo++", "echo+ given every hand-built helper the model uses: the named record "
                                         "copied whole from the state the episode left, a listing's page with its "
                                         "count and flags, the fields the rules fix, defaults and a new record's id",
             _echo_plus_plus),
    Baseline("nearest_train", "nearest training answer", "the training response of the same tool sharing the most "
                                                         "arguments", _nearest),
    Baseline("neutral_error", "always error", "every field empty (0, \"\", false, []) with status error",
             _neutral_answer("error")),
    Baseline("neutral_ok", "always ok", "every field empty with status ok", _neutral_answer("ok")),
)
BY_NAME: dict[str, Baseline] = {baseline.name: baseline for baseline in BASELINES}
BASELINE_NAMES: tuple[str, ...] = tuple(BY_NAME)


def nearest_response(call: Call, answers: TrainingAnswers) -> str | None:
    """The training response of the same tool whose arguments share the most (name, value) pairs with `call`'s."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    best, shared = None, -1
    for known, response in answers.responses.get(call.name, []):
        common = sum(1 for key, value in arguments.items() if key in known and known[key] == value)
        if common > shared:
            best, shared = response, common
    return best


def with_status(text: str, status: str, error: str) -> str:
    """A baseline's response with its status set (how a baseline honours a pinned `status="error"`)."""
    value = parse(text)
    if not isinstance(value, dict):
        return text
    if "status" in value:
        value["status"] = status
    if "error" in value and isinstance(value["error"], str) and not value["error"]:
        value["error"] = error
    return _dump(value)


def _neutral(schema: Any, status: str, error: str) -> Any:
    value = neutral_value(schema) if isinstance(schema, dict) else {}
    if isinstance(value, dict):
        if "status" in value or not value:
            value["status"] = status
        if "error" in value:
            value["error"] = error
    return value


def _echo_into(value: Any, source: Any, overwrite: bool = True) -> None:
    """Copy `source`'s scalar fields into same-named fields of `value` (any depth) where the types agree."""
    if not isinstance(value, dict) or not isinstance(source, dict):
        return
    scalars = {key: v for key, v in source.items() if not isinstance(v, (dict, list))}
    stack = [value]
    while stack:
        node = stack.pop()
        for key, current in node.items():
            if isinstance(current, dict):
                stack.append(current)
            elif key in ("status", "error"):
                continue
            elif key in scalars and _same_type(current, scalars[key]) and (overwrite or current in ("", 0, False)):
                node[key] = scalars[key]


def _leaves(value: Any) -> set:
    found, stack = set(), [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.update(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            found.add(node)
    return found


def _outcome(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, dict) or not isinstance(value.get("status"), str):
        return None
    error = value.get("error")
    return value["status"], error if isinstance(error, str) else ""


def _schema(world: WorldSpec, call: Call, state: Any = None, history: Sequence[HistoryStep] = ()) -> Any:
    """The tool's response schema; of a union, given the state, the branch of the record the call names."""
    try:
        schema = world.tool(call.name).response
    except KeyError:
        return None
    if state is None or not object_branches(schema):
        return schema
    found = named_record_at(state_after(replace(world, initial_state=state), history), call)
    return answer_branch(schema, found[1] if found is not None else None)


def _same_type(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return isinstance(b, int) or not isinstance(a, int)
    return type(a) is type(b)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
