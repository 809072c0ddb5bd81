"""Rule-guided repair: remask the fields a failed check reads and denoise them again, the rest held as anchors.

After denoising, the deterministic checks say what is wrong. The fields a failed rule's CEL expression reads
(`response.refund_processed`) and the fields a schema error names are masked again; every other field stays as
written (pinned like a user anchor) and K candidates are denoised in one batch; the first that passes every check
is kept, else the one with the fewest problems goes into the next round (R rounds). Remasking what a verifier
flags follows ReMDM (arXiv 2503.00307) and RemeDi (arXiv 2509.23653); picking among candidates by the checks is
PRISM-like (arXiv 2505.18456). Reported apart from the model's raw output (`eval-wm`'s `steered` row)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.anchors import Anchor
from wmstudio.world.checks import CheckReport
from wmstudio.world.spec import WorldSpec

REPAIR_CANDIDATES = 4  # K: candidates denoised together per round
REPAIR_ROUNDS = 2  # R
REPAIR_TEMPERATURE = 0.7  # candidates must differ from the greedy answer that failed
_RESPONSE_FIELD = re.compile(r"\bresponse\.([A-Za-z_]\w*)")


@dataclass
class RepairRound:
    """One round: the fields remasked, the candidates' texts and checks, the one kept, and the round's canvas with
    the kept candidate's frames (what the studio draws: the fields remasked and refilled)."""

    remasked: list[str]
    candidates: list[str] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    kept: int = 0
    canvas: Any = None
    frames: list = field(default_factory=list)


def fields_to_remask(world: WorldSpec, report: CheckReport, response: Any) -> list[str]:
    """Top-level response fields a failed rule reads or a schema error names (anchored ones stay), in order."""
    checks = {rule.text: rule.check for rule in world.rules if rule.check}
    names: list[str] = []
    for violation in report.rule_violations:
        names += _RESPONSE_FIELD.findall(checks.get(violation["rule"], ""))
    for error in report.schema_errors:
        path = error.split(":", 1)[0]
        if path and path != "(root)":
            names.append(re.split(r"[.\[]", path, maxsplit=1)[0])
    present = response if isinstance(response, dict) else {}
    return [name for name in dict.fromkeys(names) if name in present]


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
    return len(report.schema_errors) + len(report.rule_violations) + len(report.anchor_violations)
