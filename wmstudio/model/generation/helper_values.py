"""What the helpers write into an answer before any network does: the outcome head's status and code, the named
record's values (record and listing copy), the call's own ids and arguments, the ids a write mints, what an ok write
states on the episode's state, and the fields the world's rules fix under the chosen outcome.

None of this is diffusion-specific: the MDLM writes these values into its canvas's slots before denoising; a
left-to-right model is given them as pins, written where it opens their keys (model/serving/ar_pins.py). One function
works them out for both, so the pair ([wm-pair]) is compared on equal terms."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.model.canvas.canvas import OUTCOME_KEY
from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.model.generation.outcome_choice import (
    ERROR,
    choose_outcomes,
    copied_under,
    done_as_asked,
    outcome_groups,
    rule_fixed,
)
from wmstudio.model.heads.call_echoes import call_echoes, call_identifiers, names_a_record
from wmstudio.model.heads.outcome_head import ERROR_KEY, MESSAGE_KEY, Outcome
from wmstudio.model.heads.record_copy import RecordCopy
from wmstudio.model.heads.state_copy import state_copy
from wmstudio.world.episode.answers import write_values
from wmstudio.world.episode.made import new_ids
from wmstudio.world.episode.state import state_after
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path
from wmstudio.world.records import needles_of, normalised
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.tools.reading import read_only


@dataclass
class Helpers:
    """The helpers' values for one call: `outcomes` per sample (None: no head chose), the record `copy`, the call's
    `echoed` ids, what the call `done` as asked writes (and who: "call" or "episode"), and the rule-`fixed` top-level
    fields per outcome group (keyed like `groups`: (status, code), or None when no head chose)."""

    outcomes: list[Outcome] | None
    copy: RecordCopy | None
    echoed: dict[str, Any]
    done: dict[str, Any]
    done_by: dict[str, str]
    groups: dict[Any, list[int]]
    chosen: dict[Any, Outcome | None]
    fixed: dict[Any, dict[str, Any]]
    schema: dict[str, Any] | None
    refused: dict[str, Any] | None = None  # the neutral fields of a refusal (refusal_fields), None: not worked out
    pinned_error: bool = False  # the user pinned status "error"
    kept: dict[str, Any] | None = None  # what a refusal may echo of the call, its slots sized (refusal_echoes)

    def values_for(self, key: Any, skeleton: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
        """The values (by canvas path) the helpers write for outcome group `key`, and who wrote each ("state",
        "call", "episode", "outcome", "rule"). Off a skeleton only the outcome's own slots are written."""
        outcome = self.chosen.get(key)
        copied = self.copy.values if self.copy is not None and skeleton else {}
        echoed = _as_held(as_paths(self.echoed), copied) if skeleton else {}
        did = _as_held(as_paths(self.done), copied) if skeleton and done_as_asked(outcome) else {}  # done as asked
        did_by = as_paths(self.done_by)
        refusal = self.pinned_error or (outcome is not None and outcome.status == ERROR)
        neutral = leaf_paths(self.refused or {}) if skeleton and refusal else {}  # what a refused call did not produce
        parts = [(neutral, "outcome"), (copied_under(copied, outcome), "state"), (echoed, "call"),
                 (did, "call"), (outcome.values(self.schema) if outcome is not None else {}, "outcome")]
        if skeleton:  # over a copied record's value: a rule says what the call leaves there
            parts.append((as_paths(self.fixed.get(key, {})), "rule"))
        values, by = {}, {}
        for part, who in parts:
            values.update(part)
            by.update({path: did_by.get(path, who) if part is did else who for path in part})
        return values, by

    def as_anchors(self, key: Any) -> list[Anchor]:
        """The values of `values_for(key)` as anchors: how a left-to-right model is handed them."""
        return [Anchor(path, value) for path, value in self.values_for(key)[0].items()]


def _as_held(echoed: dict[str, Any], copied: dict[str, Any]) -> dict[str, Any]:
    """The call's values but where the copied record holds the same value in another form (`NADIA VARGA` looked up,
    `Nadia Varga` held): an API answers what it holds."""
    return {path: value for path, value in echoed.items() if not (
        path in copied and isinstance(value, str) and isinstance(copied[path], str) and value != copied[path]
        and normalised(value) == normalised(copied[path]))}


def as_paths(values: dict[str, Any]) -> dict[str, Any]:
    """Top-level `values` keyed as canvas paths."""
    return {format_path([key]): value for key, value in values.items()}


def _parameters(world: WorldSpec, call: Call) -> dict | None:
    """The parameter schema of the tool `call` names (None for a tool the world lacks)."""
    try:
        return world.tool(call.name).parameters
    except KeyError:
        return None


def writes(world: WorldSpec, call: Call) -> bool:
    """Whether the called tool may change the state (a tool the world lacks does not)."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    return tool is not None and not read_only(tool)


def helpers_for(backend: Any, world: WorldSpec, call: Call, pinned: Sequence[Anchor],
                history: Sequence[HistoryStep], settings: SamplerSettings, schema: dict[str, Any] | None,
                fit: Callable[[RecordCopy | None, Any], RecordCopy | None] | None = None) -> Helpers:
    """Work out the helpers' values for `call` under the settings' switches (record_copy, outcome_head,
    rule_fields); `fit` cuts a listing's copy to what the answer has room for (given the copy and the state)."""
    copying = settings.record_copy and not settings.free
    now = state_after(world, history) if copying else None  # the state the episode has reached, worked out once
    written = write_values(world, now, call, schema) if copying and writes(world, call) else {}
    outcomes = choose_outcomes(backend, world, call, pinned, history, settings, schema, written, now)
    refused = any(anchor.path == OUTCOME_KEY and anchor.value == ERROR for anchor in pinned)  # a pinned refusal
    copy = state_copy(world, call, history, schema, now) if copying and not refused else None  # its fields are its own
    if fit is not None:
        copy = fit(copy, now)
    echoed = call_identifiers(call, schema) if copying else {}
    done = call_echoes(call, schema, _parameters(world, call)) if copying and outcomes else {}
    done_by = dict.fromkeys(done, "call")
    if copying and outcomes and writes(world, call):  # the record it makes, or the one it acts on, once written
        taken = copy.values if copy is not None else ()
        minted = new_ids(world, now, call, schema, taken)
        done = {**minted, **written, **done}
        done_by = {**dict.fromkeys([*minted, *written], "episode"), **done_by}
    groups = outcome_groups(outcomes) if outcomes else {None: list(range(settings.samples))}
    chosen = {key: outcomes[members[0]] if key else None for key, members in groups.items()}
    fixed = {key: rule_fixed(world, call, history, schema, pinned, outcome,
                             {**echoed, **(done if done_as_asked(outcome) else {})}, settings.seed)
             for key, outcome in chosen.items()} if settings.rule_fields and not settings.free else {}
    neutral = refusal_fields(call, schema, pinned) if copying else None
    kept = refusal_echoes(call, schema, pinned) if copying else None
    return Helpers(outcomes, copy, echoed, done, done_by, groups, chosen, fixed, schema, refused=neutral,
                   pinned_error=refused, kept=kept)


NEUTRAL = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": []}


def refusal_echoes(call: Call, schema: dict[str, Any] | None, pinned: Sequence[Anchor]) -> dict[str, Any]:
    """{key: the call's value} of the top-level text fields a refusal may echo: those the call names a record by
    under the same key (an id, a path, a code; see refusal_fields), not pinned, where the schema takes the value.
    A refusal's canvas sizes their slots to hold them; whether a world echoes them is the model's to write."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    held = {anchor.path for anchor in pinned} | {OUTCOME_KEY, ERROR_KEY, MESSAGE_KEY}
    return {key: value for key, value in arguments.items()
            if isinstance(properties, dict) and isinstance(properties.get(key), dict)
            and properties[key].get("type") == "string" and not properties[key].get("enum")
            and _names_a_record(key, value) and key not in held and format_path([key]) not in held}


def _names_a_record(key: str, value: Any) -> bool:
    """Whether a call's argument names a record (an id by its key, or a value with a digit, `/`, `@`, `-`, `_`)."""
    return names_a_record(key) or (isinstance(value, str) and value in needles_of(value, strict=True))


def refusal_fields(call: Call, schema: dict[str, Any] | None, pinned: Sequence[Anchor]) -> dict[str, Any]:
    """{key: neutral value} of the top-level fields a refused call did not produce: every field with a plain type
    ("", 0, false, []; an object, each of its fields so), not pinned and not the outcome's own, but for those the
    call names by an argument of the same key that names a record (an id, a path, a code: a value with a digit,
    `/`, `@`, `-` or `_`). Every world the model trained on answers a refusal so (the ids it was asked about echoed,
    the rest empty); the denoiser alone wrote values from the state there (`charge_amount_cents: 20600` for a refund
    the world refused), and a lookup by a name echoed the name into the record it did not find."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    echoed = {key for key, value in arguments.items() if _names_a_record(key, value)}
    held = {anchor.path for anchor in pinned} | {OUTCOME_KEY, ERROR_KEY, MESSAGE_KEY}
    neutral = {}
    for key, node in (properties or {}).items() if isinstance(properties, dict) else ():
        if key in echoed or format_path([key]) in held or key in held:
            continue
        value = _neutral(node)
        if value is not None:
            neutral[key] = value
    return neutral


def _neutral(node: Any) -> Any:
    """A field's neutral value ("", 0, false, [], an object of those), None where it has none (an enum without an
    empty member: the model chooses; a type it cannot tell)."""
    if not isinstance(node, dict):
        return None
    kind, enum = node.get("type"), node.get("enum")
    if kind == "object" and isinstance(node.get("properties"), dict):
        inner = {key: _neutral(child) for key, child in node["properties"].items()}
        return {key: value for key, value in inner.items() if value is not None} or None
    if kind not in NEUTRAL or (isinstance(enum, list) and NEUTRAL[kind] not in enum):
        return None
    return list(NEUTRAL[kind]) if kind == "array" else NEUTRAL[kind]


def leaf_paths(values: dict[str, Any], prefix: tuple = ()) -> dict[str, Any]:
    """Nested `values` as canvas paths of their leaves (an empty list is a leaf)."""
    found = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            found.update(leaf_paths(value, (*prefix, key)))
        else:
            found[format_path([*prefix, key])] = value
    return found
