"""The message the outcome head writes with the outcome it chooses: per tool and outcome, the template its training
answers' messages share (world/heads/message_templates.py), filled from the call and the record it names in the
state the prompt shows.

Fitted on the training rows (`wmstudio model fit-messages`, and `train-wm` after training) and kept beside the
checkpoint in `message_templates.json`. A tool it never saw, or an outcome its rows never showed with a template,
gets none: the denoiser writes that message. This is learned from the training answers like the outcome head, not
written by hand; `--no-outcome-head` switches it off with the head."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmstudio.model.heads.outcome_head import Outcome, outcome_of, tool_key
from wmstudio.problems import InvalidInput
from wmstudio.world.grounding import NONE, ORACLE, Grounding
from wmstudio.world.heads.message_templates import MESSAGE_KEY, SLOT, fill, template_of
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import current_state
from wmstudio.world.records import named_record
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.directives import steering

TEMPLATES_FILE = "message_templates.json"
MIN_ROWS = 2  # answers sharing a template before it is kept
ANY_TOOL = "*"  # the key part of a template learned from every tool's answers
VERBOSE_MARK = "|verbose"  # ends the key of a success's template learned where the world asked for explanations
ERROR_STATUS = "error"


class OutcomeMessages:
    """Templates by `tool_key|status|error`."""

    def __init__(self, templates: dict[str, str]) -> None:
        self.templates = templates

    def message(self, world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: dict[str, Any] | None,
                outcome: Outcome, grounding: Grounding = NONE) -> str | None:
        """The message for `outcome` of `call`, or None (no template, a slot nothing fills, no message field)."""
        if MESSAGE_KEY not in ((schema or {}).get("properties") or {}) or outcome.error is None:
            return None
        key = _key(call.name, schema, outcome.status, outcome.error, _explains(world, outcome.status))
        template = self.templates.get(key)
        if template is None:
            template = self.templates.get(f"{ANY_TOOL}|{outcome.status}|{outcome.error}")
        if template is None:
            return None
        return fill(template, call, named_record(_shown(world, history, grounding), call))

    @classmethod
    def fit(cls, rows: Sequence[tuple[WorldSpec, Call, Sequence[HistoryStep], Any, Grounding]]
            ) -> tuple[OutcomeMessages, dict[str, Any]]:
        """Templates from training rows (world, call, history, response value, grounding): per tool, outcome and (for
        a success) whether the world asks for explanations (the `verbose` directive), the commonest template of the answers'
        messages, an empty message counting as one (a tool whose ok answers say nothing gets ""), kept when MIN_ROWS
        answers share it; and per outcome of any tool, its commonest written template when it has no slot (an
        outage's "The request failed with TIMEOUT."), for the tools whose rows never showed that outcome."""
        counts: dict[str, Counter] = {}
        seen = 0
        for world, call, history, response, grounding in rows:
            outcome = outcome_of(response)
            message = response.get(MESSAGE_KEY) if isinstance(response, dict) else None
            if outcome is None or not isinstance(message, str):
                continue
            seen += 1
            key = _key(call.name, _schema(world, call), *outcome, _explains(world, outcome[0]))
            if not message.strip():
                counts.setdefault(key, Counter())[""] += 1
                continue
            template = template_of(message, call, named_record(_shown(world, history, grounding), call))
            if template is not None:
                counts.setdefault(key, Counter())[template] += 1
                counts.setdefault(f"{ANY_TOOL}|{outcome[0]}|{outcome[1]}", Counter())[template] += 1
        templates = {key: found.most_common(1)[0][0] for key, found in counts.items()
                     if found.most_common(1)[0][1] >= MIN_ROWS
                     and (not key.startswith(f"{ANY_TOOL}|") or not SLOT.search(found.most_common(1)[0][0]))}
        return cls(templates), {"rows": seen, "templates": len(templates)}

    def save(self, folder: Path, fitted: dict[str, Any]) -> None:
        (Path(folder) / TEMPLATES_FILE).write_text(json.dumps({"templates": self.templates, "fitted": fitted},
                                                              indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_outcome_messages(folder: Path) -> OutcomeMessages | None:
    """The templates saved beside a checkpoint, or None without (or with an unreadable) file."""
    try:
        data = json.loads((Path(folder) / TEMPLATES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    templates = data.get("templates") if isinstance(data, dict) else None
    if not isinstance(templates, dict):
        return None
    return OutcomeMessages({k: v for k, v in templates.items() if isinstance(k, str) and isinstance(v, str)})


def fit_outcome_messages(rows: Sequence[tuple[WorldSpec, Call, Sequence[HistoryStep], Any, Grounding]], out: Path,
                         corpus: str = "") -> dict[str, Any]:
    """Fit templates on `rows`, save them in `out`; what the fit saw."""
    started = time.perf_counter()
    messages, fitted = OutcomeMessages.fit(rows)
    fitted.update(corpus=Path(corpus).name if corpus else "", seconds=round(time.perf_counter() - started, 1))
    messages.save(out, fitted)
    return fitted


def _key(tool: str, schema: dict[str, Any] | None, status: str, error: str, verbose: bool = False) -> str:
    return f"{tool_key(tool, schema)}|{status}|{error}" + (VERBOSE_MARK if verbose else "")


def _explains(world: WorldSpec, status: str) -> bool:
    """Whether an answer of `status` is asked to explain itself: a success (ok, partial) where the world's directives
    say `verbose`. An error explains itself either way, so its templates are learned from every row."""
    if status == ERROR_STATUS:
        return False
    try:
        return steering(world.directives).verbose
    except InvalidInput:
        return False


def _shown(world: WorldSpec, history: Sequence[HistoryStep], grounding: Grounding) -> Any:
    """The state the prompt shows: the initial one, or with grounding oracle the simulator's after `history`."""
    state = current_state(world, history) if grounding == ORACLE else None
    return world.initial_state if state is None else state


def _schema(world: WorldSpec, call: Call) -> dict[str, Any] | None:
    try:
        return world.tool(call.name).response
    except KeyError:
        return None
