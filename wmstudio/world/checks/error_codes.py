"""Which error codes a state allows for a call: a code whose cause the world's rules state (sims/preconditions.py
writes them so) is allowed when that rule holds for the call, the state and the history; a code no rule states
(an outage) is allowed anywhere. Repair picks a code from these; benchmarks count the codes a state contradicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmstudio.world.checks.report import check_variables, steering_texts
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.cel import Rule, evaluate_check, rule_codes, rule_tools
from wmstudio.world.spec import Call, WorldSpec

OUTAGE_CODE = "SERVICE_UNAVAILABLE"  # a failure with no cause in the state, when the world names none of its own



def code_rules(world: WorldSpec) -> dict[str, Rule]:
    """Each error code the world's rules state a cause for, with that rule (the first, for a code named twice)."""
    found: dict[str, Rule] = {}
    for rule in world.rules:
        for code in rule_codes(rule):
            found.setdefault(code, rule)
    return found


def contradicted(world: WorldSpec, call: Call, response: Any, history: Sequence[HistoryStep] = ()) -> str | None:
    """The response's error code when a rule states its cause and the cause does not hold here, else None."""
    code = response.get("error") if isinstance(response, dict) else None
    rule = code_rules(world).get(code) if isinstance(code, str) and code else None
    if rule is None:
        return None
    return None if evaluate_check(rule.check or "true", check_variables(world, call, response, history))[0] else code


def allowed_codes(world: WorldSpec, call: Call, response: dict[str, Any],
                  history: Sequence[HistoryStep] = ()) -> list[str]:
    """The stated codes whose cause holds for this call (rules about other tools left out), in the rules' order:
    each tried as `response`'s error (a cause may read the response, e.g. the path an error echoes)."""
    allowed = []
    for code, rule in code_rules(world).items():
        tools = rule_tools(rule)
        if tools is not None and call.name not in tools:
            continue
        trial = {**response, "error": code}
        if evaluate_check(rule.check or "true", check_variables(world, call, trial, history))[0]:
            allowed.append(code)
    return allowed


def outage_code(world: WorldSpec) -> str:
    """A code with no cause in the state for this world: the one an `inject_error` directive names, else OUTAGE_CODE;
    "" when the world's rules state a cause for both."""
    stated = code_rules(world)
    injected = [text.split(":", 1)[1].strip() for text in steering_texts(world.directives)
                if text.startswith("inject_error:")]
    return next((code for code in [*injected, OUTAGE_CODE] if code not in stated), "")


def failure_message(code: str) -> str:
    """The plain message of a failure with `code` (what the simulators say for an injected error)."""
    return f"The request failed with {code}."

