"""The check report as badges (JSON, schema, each rule, each anchor) and samples drawn side by side.

Used for the MDLM's samples and for the autoregressive baseline, so both read the same way."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from wmstudio.metrics.diversity import distinct_n, self_bleu
from wmstudio.model.generation.generation import FROM_HISTORY, FROM_SKETCH, FROM_TRAINING, Generation
from wmstudio.world.checks.report import CheckReport
from wmstudio.world.records import ENVELOPE_FIELDS
from wmstudio.world.spec import WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.tools import Tool

BADGE_CHARS = 240
REPORT_CSS = """
.wm-cards { display: flex; gap: 12px; flex-wrap: wrap; align-items: stretch; }
.wm-card { flex: 1 1 320px; min-width: 0; border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 10px; background: var(--background-fill-primary); }
.wm-card h4 { margin: 0 0 6px 0; font-size: 0.95em; }
.wm-card pre { font-size: 0.82em; white-space: pre-wrap; word-break: break-word; max-height: 320px; overflow: auto;
  margin: 6px 0; padding: 6px; border-radius: 6px; background: var(--background-fill-secondary); }
.wm-badges { display: flex; flex-direction: column; gap: 3px; font-size: 0.85em; }
.wm-badge { padding: 2px 8px; border-radius: 10px; width: fit-content; max-width: 100%; box-sizing: border-box;
  overflow-wrap: anywhere; }
.wm-badge.ok { background: #dcfce7; color: #166534; }
.wm-badge.bad { background: #fee2e2; color: #991b1b; }
.wm-badge.na { background: #f3f4f6; color: #4b5563; }
.wm-verdict { font-weight: 600; margin-bottom: 4px; }
.wm-verdict.ok { color: #166534; }
.wm-verdict.bad { color: #991b1b; }
.wm-metrics { margin: 8px 0; font-size: 0.9em; }
.wm-metrics b { margin-right: 14px; }
.wm-repair, .wm-cut, .wm-outcome, .wm-neutral { font-size: 0.85em; color: var(--body-text-color-subdued); margin-top: 4px; }
"""


def check_badges(world: WorldSpec, tool: Tool, report: CheckReport, anchors: Sequence[Anchor]) -> list[tuple[str, str]]:
    """The report as (state, text) badges in reading order; state is "ok", "bad" or "na" (not checked)."""
    badges = [("ok", "JSON: valid") if report.json_valid else ("bad", "JSON: not valid JSON")]
    if tool.response is None:
        badges.append(("na", "Schema: the tool has no response schema"))
    elif not report.json_valid:
        badges.append(("na", "Schema: not checked (not JSON)"))
    elif report.schema_errors:
        badges += [("bad", f"Schema: {error}") for error in report.schema_errors]
    else:
        badges.append(("ok", "Schema: matches the response schema"))
    broken = {v["rule"]: v["message"] for v in report.rule_violations}
    for rule in world.rules:
        if rule.check is None:
            badges.append(("na", f"Rule (not machine-checked): {rule.text}"))
        elif rule.text in broken:
            badges.append(("bad", f"Rule: {rule.text} — {broken[rule.text]}"))
        else:
            badges.append(("ok", f"Rule: {rule.text}"))
    for anchor in anchors:
        violation = next((v for v in report.anchor_violations if v.startswith(f"{anchor.path}:")), None)
        badges.append(("bad", f"Anchor {violation}") if violation else ("ok", f"Anchor: {anchor}"))
    badges += [("bad", f"Message: {stray}") for stray in report.message_strays]
    badges += [("bad", f"Made up: {line}") for line in report.invented]
    return badges


def sample_card(title: str, response: str, world: WorldSpec, tool: Tool, report: CheckReport,
                anchors: Sequence[Anchor]) -> str:
    """One response with its verdict and badges, as an HTML card."""
    badges = "".join(_badge(state, text) for state, text in check_badges(world, tool, report, anchors))
    verdict = '<div class="wm-verdict ok">✓ all checks pass</div>' if report.ok else \
        '<div class="wm-verdict bad">✗ some checks fail</div>'
    return (f'<div class="wm-card"><h4>{html.escape(title)}</h4>{verdict}'
            f"<pre>{html.escape(pretty_response(response)[0])}</pre>{neutral_note(response)}"
            f"<div class=\"wm-badges\">{badges}</div></div>")


def neutral_note(response: str) -> str:
    """Under an error answer whose other fields are neutral ("", 0, false, empty): what they mean, so they do not read
    as made up ("" where there is none)."""
    try:
        value = json.loads(response)
    except (TypeError, ValueError):
        return ""
    if not isinstance(value, dict) or value.get("status") != "error":
        return ""
    neutral = [key for key, field in value.items() if key not in ENVELOPE_FIELDS
               and field in ("", 0, False, [], {}) and field is not None]
    if not neutral:
        return ""
    return (f'<div class="wm-neutral">{html.escape(", ".join(neutral[:6]))}{" …" if len(neutral) > 6 else ""}: '
            'neutral ("", 0, false) as the world answers what a refused call did not produce, not values made '
            "up.</div>")


def _badge(state: str, text: str) -> str:
    """One badge; a very long message (e.g. a rule that could not be evaluated) is cut, whole on hover."""
    mark = {"ok": "✓", "bad": "✗"}.get(state, "○")
    shown = text if len(text) <= BADGE_CHARS else text[: BADGE_CHARS - 1] + "…"
    return f'<span class="wm-badge {state}" title="{html.escape(text)}">{mark} {html.escape(shown)}</span>'


def outcome_sentence(generation: Generation) -> str | None:
    """What the outcome head did, as the Simulate status and report say it; None when the canvas decided."""
    summary = generation.outcome_summary()
    return f"The outcome head {summary} from the call and the state; the rest of the answer follows it." \
        if summary else None


def generation_html(generation: Generation, world: WorldSpec, tool: Tool, anchors: Sequence[Anchor],
                    label: str = "Sample") -> str:
    """Every sample of a generation side by side, with Self-BLEU and Distinct-N when there are several."""
    cards = [sample_card(f"{label} {k + 1}" if len(generation.samples) > 1 else label, s.response, world, tool,
                         s.checks, anchors) for k, s in enumerate(generation.samples)]
    passed = sum(s.checks.ok for s in generation.samples)
    lines = [f"<b>{passed}/{len(generation.samples)} pass every check</b>",
             f"<b>{generation.elapsed_ms:.0f} ms</b>"]
    for k, sample in enumerate(generation.samples):
        for number, repair in enumerate(sample.repairs, start=1):
            if repair.solved:
                set_ = ", ".join(f"{name} = {json.dumps(value, ensure_ascii=False)}" for name, value in
                                 repair.solved.items())
                lines.append(f'<div class="wm-repair">{label} {k + 1}, repair round {number}: set '
                             f"{html.escape(set_)} as a failed rule's equality says (no model call)</div>")
                continue
            lines.append(f'<div class="wm-repair">{label} {k + 1}, repair round {number}: remasked '
                         f'{html.escape(", ".join(repair.remasked))}; {sum(repair.passed)} of '
                         f"{len(repair.candidates)} candidates pass every check</div>")
    if tool.response is None and generation.schema_from == FROM_HISTORY:
        lines.append('<div class="wm-cut">The tool has no response schema: the skeleton was laid out from the schema '
                     "its earlier answers in the history fit (save one in the World tab to fix its shape)</div>")
    elif tool.response is None and generation.schema_from == FROM_TRAINING:
        lines.append('<div class="wm-cut">The tool has no response schema: the skeleton was laid out from the one '
                     "the model was trained with for this tool (save one in the World tab to fix its shape)</div>")
    elif tool.response is None and generation.schema_from == FROM_SKETCH:
        lines.append('<div class="wm-cut">The tool has no response schema: the model first sketched its shape, '
                     f"<code>{html.escape(generation.sketch.text)}</code>, and the skeleton was laid out from that "
                     "(save a schema in the World tab to fix its shape)</div>")
    elif tool.response is None and generation.sketch is not None:
        lines.append('<div class="wm-cut">The tool has no response schema and the model\'s sketch of its shape, '
                     f"<code>{html.escape(generation.sketch.text)}</code>, is not one: the response was written on a "
                     "free canvas</div>")
    said = outcome_sentence(generation)
    if said:
        lines.append(f'<div class="wm-outcome">{html.escape(said)} (switch it off to let the canvas decide)</div>')
    if generation.prompt_cut:
        lines.append(f'<div class="wm-cut">The prompt left out, to fit the model\'s budget: '
                     f"{html.escape('; '.join(generation.prompt_cut))}</div>")
    if len(generation.samples) > 1:
        texts = [s.response for s in generation.samples]
        lines += [f"<b>Self-BLEU {self_bleu(texts):.3f}</b>", f"<b>Distinct-1 {distinct_n(texts, 1):.3f}</b>",
                  f"<b>Distinct-2 {distinct_n(texts, 2):.3f}</b>",
                  "<span>(lower Self-BLEU and higher Distinct-N = more diverse)</span>"]
    return f'<div class="wm-metrics">{"".join(lines)}</div><div class="wm-cards">{"".join(cards)}</div>'


def pretty_response(response: str) -> tuple[str, bool]:
    """(the response indented for reading when it is JSON, else as written; whether it is JSON)."""
    try:
        return json.dumps(json.loads(response), indent=2, ensure_ascii=False), True
    except (json.JSONDecodeError, TypeError, ValueError):
        return response, False
