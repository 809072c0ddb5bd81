"""Rule-guided repair: remask the fields a failed check reads and denoise them again, the rest held as anchors.

After denoising, the deterministic checks say what is wrong. The fields a failed rule's CEL expression reads
(`response.refund_processed`) and the fields a schema error names are masked again; every other field stays as
written (pinned like a user anchor) and K candidates are denoised in one batch; the first that passes every check
is kept, else the one with the fewest problems goes into the next round (R rounds). Before each round, fields a
failed rule states as an equality (`response.count == size(response.entries)`) are set to the value it implies
(world/rules/equations.py), and text a failed rule's `matches` rejects is brought to the nearest text of that
shape (world/rules/patterns.py); an error code whose stated cause the state contradicts becomes a code the state
allows, or an outage when none does (world/checks/error_codes.py); a message naming what nothing holds loses those
sentences (world/checks/message_mentions.py): each kept only where it leaves fewer problems, as arithmetic, exact token
shapes and a state's causes are what the small model does not do. Remasking what a verifier flags follows ReMDM (arXiv 2503.00307) and RemeDi (arXiv
2509.23653); picking among candidates by the checks is PRISM-like (arXiv 2505.18456). Reported apart from the
model's raw output (`eval-wm`'s `steered` row)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from wmstudio.model.canvas.canvas import OUTCOME_KEY
from wmstudio.model.canvas.layout import dump
from wmstudio.world.checks.error_codes import allowed_codes, failure_message, outage_code
from wmstudio.world.checks.message_mentions import MESSAGE_KEY, stray_mentions
from wmstudio.world.checks.report import CheckReport, check_step, check_variables, parse_response
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.cel import rule_codes
from wmstudio.world.rules.equations import implied_values
from wmstudio.world.rules.patterns import implied_texts
from wmstudio.world.rules.references import references
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

REPAIR_CANDIDATES = 4  # K: candidates denoised together per round
REPAIR_ROUNDS = 2  # R
REPAIR_SECONDS = 1.0  # CPU time repair may spend on one answer: no round starts after it (what a request costs)
REPAIR_TEMPERATURE = 0.7  # candidates must differ from the greedy answer that failed
SOLVE_PASSES = 4  # fields set one at a time, each leaving fewer problems
ERROR_KEY = "error"  # the error code of the simulated worlds' responses (and the tau-bench-like APIs they mimic)


@dataclass
class RepairRound:
    """One round: the fields remasked, the candidates' texts and checks, the one kept, and the round's canvas with
    the kept candidate's frames (what the studio draws: the fields remasked and refilled). A round without a
    canvas set `solved` fields to what a failed rule's equalities say instead (no model call)."""

    remasked: list[str]  # fields denoised again; or, in a round that `solved` fields, the fields set
    candidates: list[str] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    kept: int = 0
    canvas: Any = None
    frames: list = field(default_factory=list)
    solved: dict[str, Any] = field(default_factory=dict)  # field -> value a failed rule's equality implied


def fields_to_remask(world: WorldSpec, report: CheckReport, response: Any) -> list[str]:
    """Top-level response fields a failed rule reads or a schema error names, in order; the outcome field (`status`)
    only when nothing else is named, so repair makes the fields agree with the model's outcome, not the reverse."""
    checks = {rule.text: rule.check for rule in world.rules if rule.check}
    names: list[str] = []
    for violation in report.rule_violations:
        names += [path[0] for root, path in references(checks.get(violation["rule"], "")) if root == "response"]
    for error in report.schema_errors:
        path = error.split(":", 1)[0]
        if path and path != "(root)":
            names.append(re.split(r"[.\[]", path, maxsplit=1)[0])
    if report.message_strays:
        names.append(MESSAGE_KEY)
    names += [re.split(r"[.\[:]", line, maxsplit=1)[0] for line in report.invented]  # the field each names first
    present = response if isinstance(response, dict) else {}
    fields = [name for name in dict.fromkeys(names) if name in present]
    others = [name for name in fields if name != OUTCOME_KEY]
    return others or fields  # the model's outcome stays unless it alone is what the failed checks read


def held_anchors(response: dict[str, Any], remask: list[str], pinned: list[Anchor]) -> list[Anchor]:
    """Anchors for the next round: the user's pins, and every top-level field of `response` not remasked."""
    pinned_paths = {a.path for a in pinned}
    held = [Anchor(key, value) for key, value in response.items()
            if key not in remask and key not in pinned_paths and not any(p.startswith(key) for p in pinned_paths)]
    return [*pinned, *held]


def problem_count(report: CheckReport) -> int:
    """How far a response is from passing: its failed checks (not JSON counts as many)."""
    if not report.json_valid:
        return 1000
    return (len(report.schema_errors) + len(report.rule_violations) + len(report.anchor_violations)
            + len(report.message_strays) + len(report.invented))


def solve_by_rules(world: WorldSpec, call: Call, response_text: str, report: CheckReport, pinned: list[Anchor],
                   history: list[HistoryStep]) -> tuple[str, CheckReport, dict[str, Any]] | None:
    """Set, one at a time, top-level fields that a failed rule's equalities or patterns imply, keeping each change
    only when it leaves fewer problems; (text, report, fields set) or None when nothing helped. Pinned fields are
    never set; the outcome may be (`response.status == "error" ? ...`): measured on 200 held-out rows, holding it
    kept 10 more rows' status right but left 36 more responses inconsistent."""
    json_valid, value = parse_response(response_text)
    if not json_valid or not isinstance(value, dict):
        return None
    checks = {rule.text: rule.check for rule in world.rules if rule.check}
    text, best, solved = response_text, report, {}
    for _ in range(SOLVE_PASSES):
        if best.ok:
            break
        step = _one_solving_step(world, call, value, best, checks, pinned, history)
        if step is None:
            break
        value, text, best, names = step
        solved.update((name, value[name]) for name in names)
    return (text, best, solved) if solved else None


def _one_solving_step(world: WorldSpec, call: Call, value: dict[str, Any], report: CheckReport,
                      checks: dict[str, str], pinned: list[Anchor], history: list[HistoryStep]):
    """The change to unpinned fields that leaves the fewest problems, fewer than now (the first of equals): a value a
    failed rule's equality or pattern implies, an error code the state allows (error_trials), or a message without
    its stray mentions (message_trials). (response, text, report, fields changed). The fewest, not the first: a key
    emptied as an error's would be passes its schema too, but a key given its rule's shape passes the rule as well,
    with the outcome kept."""
    pinned_roots = {re.split(r"[.\[]", a.path, maxsplit=1)[0] for a in pinned}
    variables = check_variables(world, call, value, history)
    trials: list[dict[str, Any]] = []
    for violation in report.rule_violations:
        check = checks.get(violation["rule"], "")
        for name, implied in [*implied_values(check, variables), *implied_texts(check, value)]:
            fitted = _fitted(value.get(name), implied)
            if name in pinned_roots or name not in value or fitted is None or fitted == value[name]:
                continue
            trials.append({name: fitted})
    trials += error_trials(world, call, value, report, pinned_roots, history)
    trials += message_trials(world, call, value, report, pinned_roots, history)
    best = None
    for change in trials:
        trial = {**value, **change}
        text = dump(trial)
        trial_report = check_step(world, call, text, anchors=pinned, history=history)
        left = problem_count(trial_report)
        if left < problem_count(report) and (best is None or left < best[0]):
            best = (left, (trial, text, trial_report, list(change)))
        if left == 0:
            return best[1]
    return best[1] if best else None


def error_trials(world: WorldSpec, call: Call, value: dict[str, Any], report: CheckReport, pinned_roots: set[str],
                 history: list[HistoryStep]) -> list[dict[str, Any]]:
    """When a failed rule states an error code's cause and the error is not pinned: each code the state allows for
    the call (world/checks/error_codes.py), then a code with no cause in the state (an outage), each with the plain message
    of that failure unless the message is pinned (the old one explained the old code)."""
    rules = {rule.text: rule for rule in world.rules}
    if ERROR_KEY in pinned_roots or not isinstance(value.get(ERROR_KEY), str) or not any(
            rule_codes(rules[v["rule"]]) for v in report.rule_violations if v["rule"] in rules):
        return []
    codes = [*allowed_codes(world, call, value, history), outage_code(world)]
    trials = []
    for code in dict.fromkeys(code for code in codes if code and code != value[ERROR_KEY]):
        change: dict[str, Any] = {ERROR_KEY: code}
        if MESSAGE_KEY in value and MESSAGE_KEY not in pinned_roots:
            change[MESSAGE_KEY] = failure_message(code)
        trials.append(change)
    return trials


def message_trials(world: WorldSpec, call: Call, value: dict[str, Any], report: CheckReport, pinned_roots: set[str],
                   history: list[HistoryStep]) -> list[dict[str, Any]]:
    """When the message names what nothing holds and is not pinned: the message without its sentences that do, then
    the plain message of the response's failure ("" for a success)."""
    message = value.get(MESSAGE_KEY)
    if not report.message_strays or MESSAGE_KEY in pinned_roots or not isinstance(message, str):
        return []
    strays = stray_mentions(world, call, value, history)
    kept = " ".join(sentence for sentence in re.split(r"(?<=[.;!?])\s+", message)
                    if not any(stray in sentence for stray in strays)).strip()
    code = value.get(ERROR_KEY)
    plain = failure_message(code) if isinstance(code, str) and code else ""
    return [{MESSAGE_KEY: text} for text in dict.fromkeys([kept, plain]) if text != message]


def _fitted(current: Any, implied: Any) -> Any:
    """`implied` in the JSON type of the field's current value, or None when the types disagree."""
    if isinstance(current, bool) or isinstance(implied, bool):
        return implied if isinstance(current, bool) and isinstance(implied, bool) else None
    if isinstance(current, int) and isinstance(implied, float):
        return int(implied) if implied.is_integer() else None
    if isinstance(current, (int, float)) and isinstance(implied, (int, float)):
        return implied
    return implied if isinstance(current, str) and isinstance(implied, str) else None
