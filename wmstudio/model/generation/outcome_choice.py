"""The outcome each sample answers with, chosen before denoising: the outcome head's choice (narrowed by pinned
anchors and the world's rules, a code the world states, the message written with it), the top-level fields the
rules fix under it, and the groups of samples that share one outcome (each group denoises its own canvas)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import torch

from wmstudio.model.canvas.canvas import OUTCOME_KEY
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.heads.call_echoes import call_identifiers
from wmstudio.model.heads.outcome_head import MESSAGE_KEY, Outcome, with_stated_codes, within_pins, within_rules
from wmstudio.model.serving.backends import Backend
from wmstudio.world.checks.error_codes import outage_code
from wmstudio.world.checks.fixed_fields import fixed_fields
from wmstudio.world.checks.refused_requests import refused_request, sign_in_refusal
from wmstudio.world.checks.unfound import held_in_another_form, unfound_code
from wmstudio.world.episode.state import state_after
from wmstudio.world.heads.code_messages import composed_message
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

ERROR = "error"  # the outcome head's status of a refused call


def rule_fixed(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: dict[str, Any] | None,
               pinned: Sequence[Anchor], outcome: Outcome | None, sent: dict[str, Any], seed: int = 0
               ) -> dict[str, Any]:
    """The top-level fields the world's rules fix under `outcome` (world/checks/fixed_fields.py), given the user's
    top-level pins and the values `sent` from the call; `seed` draws a token's text."""
    properties = list(((schema or {}).get("properties") or {}) if isinstance(schema, dict) else {})
    if not properties:
        return {}
    decided = {**sent, **{anchor.path: anchor.value for anchor in pinned if anchor.path in properties},
               **(outcome.values(schema) if outcome is not None else {})}
    return fixed_fields(world, call, decided, history, properties, seed)


def done_as_asked(outcome: Outcome | None) -> bool:
    """Whether a sample's outcome does what the call asks (an ok one): its other named arguments are written."""
    return outcome is not None and outcome.status != ERROR


def first_values(fixed: dict[Any, dict[str, Any]], chosen: dict[Any, Outcome | None], error: bool
                  ) -> dict[str, Any]:
    """The fixed fields of the first outcome group that is (or is not) an error: what its canvas's slots hold."""
    for key, outcome in chosen.items():
        if (outcome is not None and outcome.status == ERROR) == error:
            return fixed.get(key, {})
    return {}


def copied_under(copied: dict[str, Any], outcome: Outcome | None) -> dict[str, Any]:
    """The named record's values written before denoising (record_copy.record_values), none when the outcome head
    refuses the call (an error's fields are its own: its status, code and message)."""
    return {} if outcome is not None and outcome.status == ERROR else copied


def choose_outcomes(backend: Backend, world: WorldSpec, call: Call, pinned: Sequence[Anchor],
                    history: Sequence[HistoryStep], settings: SamplerSettings,
                    schema: dict[str, Any] | None, written: dict[str, Any] | None = None,
                    state: Any = None) -> list[Outcome] | None:
    """The outcome head's choice for each sample of a skeleton with a status: its likeliest outcome when greedy; at
    a temperature, one drawn per sample (seeded) from its distribution sharpened or flattened by the temperature, so
    K samples show the outcomes the head finds likely. A pinned status narrows the choice, never switches it off
    (`within_pins`: with status "error" pinned, the code whose cause holds). `schema` is the response schema
    generation lays out; `written` what an ok write's answer states on the episode's state (world/episode/answers.py:
    a running total above what a rule allows refuses the ok); `state` the one the history left, when worked out
    already. None when the head is switched off, the
    model has none, the user pinned the error code (their steering is whole), the schema has no outcome status
    (is_outcome), or the head never saw the tool."""
    head = getattr(backend, "outcome_head", None)
    if head is None or not settings.outcome_head or settings.free:
        return None
    if not isinstance(schema, dict) or not is_outcome(schema):
        return None
    ranked = within_pins(head.distribution(world, call, history, schema, settings.grounding), pinned, world, call,
                         history, schema)
    if settings.rule_outcomes:
        known = call_identifiers(call, schema) if settings.record_copy else {}
        ranked = within_rules(ranked, world, call, history, schema, known, written)
    ranked = unfound_first(ranked, world, call, history, pinned, state)
    ranked = with_stated_codes(ranked, world, call, history, schema)
    if not ranked:
        return None
    ranked = refused_first(ranked, world, call, history, pinned)
    messages = getattr(backend, "outcome_messages", None)
    if not any(anchor.path == MESSAGE_KEY for anchor in pinned) \
            and MESSAGE_KEY in ((schema.get("properties") or {})):  # written to the outcome
        ranked = [replace(outcome, message=outcome.message or _message(messages, world, call, history, schema,
                                                                       outcome, settings)) for outcome in ranked]
    if settings.temperature == 0 or len(ranked) == 1:
        return [ranked[0]] * settings.samples
    weights = torch.tensor([outcome.probability for outcome in ranked], dtype=torch.float64)
    weights = (weights.log() / settings.temperature).softmax(0)
    drawn = torch.multinomial(weights, settings.samples, replacement=True,
                              generator=torch.Generator().manual_seed(settings.seed))
    return [ranked[i] for i in drawn.tolist()]


def is_outcome(schema: dict[str, Any]) -> bool:
    """Whether a response's top-level `status` is an outcome: it offers ok or error, or the answer also has an
    `error` field; a record's own status (a line's "suspended", in a union's branch) is no outcome."""
    properties = schema.get("properties") or {}
    status = properties.get(OUTCOME_KEY)
    if not isinstance(status, dict):
        return False
    options = status.get("enum")
    return bool({"ok", "error"} & set(options)) if isinstance(options, list) else "error" in properties


def refused_first(ranked: list[Outcome], world: WorldSpec, call: Call, history: Sequence[HistoryStep],
                  pinned: Sequence[Anchor]) -> list[Outcome]:
    """`ranked`, or the one error a request the world turns away before reading its state answers
    (world/checks/refused_requests.py: arguments that break the tool's schema, a page token no answer gave), with
    the world's code for it; a sign-in refusal the head ranks first still comes first, and a pinned ok is the
    user's steering."""
    if any(anchor.path == OUTCOME_KEY and anchor.value != ERROR for anchor in pinned) or \
            (ranked[0].status == ERROR and sign_in_refusal(ranked[0].error)):
        return ranked
    refusal = refused_request(world, call, history)
    return ranked if refusal is None else [Outcome(ERROR, refusal.code, 1.0, refusal.message)]


def unfound_first(ranked: list[Outcome], world: WorldSpec, call: Call, history: Sequence[HistoryStep],
                  pinned: Sequence[Anchor], state: Any = None) -> list[Outcome]:
    """`ranked` with a lookup's outcome as the world's records decide it (world/checks/unfound.py), where the head
    answers without a cause the world states (a tool it never saw: its refusal has no code, or the outage's): a
    lookup by values the world holds nowhere answers first the not-found error its tool states; one whose value a
    record holds in another case or format (an email typed in capitals) is no refusal. A pinned outcome and a
    world steered to fail are the user's."""
    if not ranked or any(anchor.path == OUTCOME_KEY for anchor in pinned) or \
            (ranked[0].status == ERROR and ranked[0].error not in (None, outage_code(world))):
        return ranked
    state = state_after(world, history) if state is None else state
    code = unfound_code(world, call, history, state)
    if code is not None:
        return [Outcome(ERROR, code, 1.0, None), *ranked]
    if ranked[0].status == ERROR and not world.directives and held_in_another_form(world, call, history, state):
        kept = [outcome for outcome in ranked if outcome.status == "ok"]
        return [*(kept or [Outcome("ok", None, 1.0)])[:1], *ranked]
    return ranked


def _message(messages: Any, world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: dict[str, Any],
             outcome: Outcome, settings: SamplerSettings) -> str | None:
    """The message written with `outcome`: the learned template's (model/heads/outcome_messages.py), else for an error
    one composed from the world's own words for its code and the call's ids (world/heads/code_messages.py), else
    None (the denoiser writes it)."""
    message = messages.message(world, call, history, schema, outcome, settings.grounding) \
        if messages is not None else None
    if message is None and outcome.status == "error" and outcome.error:
        message = composed_message(world, call, outcome.error)
    return message


def outcome_groups(outcomes: list[Outcome]) -> dict[tuple[str, str], list[int]]:
    """Sample indices by the (status, error code) they drew, in order of first appearance."""
    groups: dict[tuple[str, str], list[int]] = {}
    for k, outcome in enumerate(outcomes):
        groups.setdefault((outcome.status, outcome.error), []).append(k)
    return groups
