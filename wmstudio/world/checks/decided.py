"""The rule a response breaks whatever its undecided fields hold: each rule of the called tool is evaluated over
the fields decided so far (the outcome's status and code), and CEL's `&&`, `||` and ternaries decide around a field
that is missing (`false && <missing>` is false) or stay undecided. Generation drops an outcome a rule refuses
this way before writing anything else (an order not pending cannot be cancelled ok)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmstudio.world.checks.report import check_variables
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.budget import SharedOverBudget, side_budget
from wmstudio.world.rules.cel import Rule, evaluate_value, rules_for_tool
from wmstudio.world.spec import Call, WorldSpec

TRIAL_SHARE = 0.25  # of a served request's CPU budget for checks, an account of its own within it, for trying outcomes
CODE = r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # an error code as rules name them: ORDER_NOT_FOUND


def refusing_rule(world: WorldSpec, call: Call, decided: dict[str, Any],
                  history: Sequence[HistoryStep] = ()) -> Rule | None:
    """The first rule about `call`'s tool that fails for a response holding only `decided`, whatever the rest holds;
    None when every rule holds or may hold. A rule asking whether the response has a field (`has(response.x)`) is
    left out: a field not decided yet is not a field the response lacks."""
    return next((rule for rule, verdict in rule_verdicts(world, call, decided, history) if verdict is False), None)


def rule_verdicts(world: WorldSpec, call: Call, decided: dict[str, Any],
                  history: Sequence[HistoryStep] = ()) -> list[tuple[Rule, bool | None]]:
    """Each rule about `call`'s tool with its verdict on a response holding only `decided`: False where it fails
    whatever the rest holds, True where it holds, None where it is undecided (or asks whether a field exists, or
    the trial's budget ran out)."""
    variables = check_variables(world, call, decided, history)
    verdicts: list[tuple[Rule, bool | None]] = []
    try:
        with side_budget(TRIAL_SHARE, "trial"):
            for rule in rules_for_tool(world.rules, call.name):
                verdict = None
                if rule.check and "has(response" not in rule.check.replace(" ", ""):
                    try:
                        value = evaluate_value(rule.check, variables)
                        verdict = value if isinstance(value, bool) else None
                    except ValueError:
                        pass
                verdicts.append((rule, verdict))
    except SharedOverBudget:
        return [(rule, None) for rule, _ in verdicts]
    return verdicts
