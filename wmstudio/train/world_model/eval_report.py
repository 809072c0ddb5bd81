"""An evaluation's report: its figures (the `--json` shape), the table the card and the terminal show, and where it is
kept beside the weights (`quality.json` for grounding `none`, the headline; `quality-oracle.json` for `oracle`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.train.world_model.baselines import BASELINES
from wmstudio.train.world_model.field_kinds import FieldScores
from wmstudio.world.grounding import NONE, Grounding, parse_grounding

RATE_NAMES = ("json_valid", "schema_valid", "rule_consistent", "same_status", "rule_and_status",
              "code_contradicted", "message_strays", "text_repeats")  # the last three: lower is better
LOWER_IS_BETTER = {"code_contradicted": "code_contradicted: an error code the state contradicts (lower is better)",
                   "message_strays": "message_strays: a message naming an id or number shown nowhere (lower is better)",
                   "text_repeats": "text_repeats: a repeated word in a text field (lower is better)"}
COLUMN_NAMES = {"raw": "MDLM raw", "no_outcome_head": "no outcome head", "no_copy_head": "no copy head",
                "steered": "MDLM steered", "ar": "AR", **{b.name: b.label for b in BASELINES}}


@dataclass
class EvalReport:
    """All figures of one evaluation (the `--json` shape), a table to print, the settings, and timing."""

    figures: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return self.figures

    def summary(self) -> str:
        s = self.settings
        return (f"Measured by `wmstudio eval-wm --grounding {s.get('grounding')} --worlds {s.get('worlds', 'all')}` "
                f"on {s.get('rows')} held-out rows of the `{s.get('split')}` split of "
                f"`{Path(str(s.get('corpus'))).name}` (seed {s.get('seed')}, {self.seconds / 60:.1f} min); "
                f"greedy decoding with the default sampler settings. `MDLM raw`: the model with its copy and "
                f"outcome heads; `no outcome head` / `no copy head`: the same with that head off (`no copy head` is "
                f"the denoiser alone writing every value); `steered`: plus rule-guided repair; `AR`: the "
                f"autoregressive baseline of the same size (its card names its rows). Baselines on the same rows: "
                + "; ".join(f"`{b.label}` ({b.description})" for b in BASELINES) + ".")

    def columns(self) -> dict[str, dict[str, Any] | None]:
        f = self.figures
        found = {"raw": f.get("raw"), "no_outcome_head": f.get("no_outcome_head"),
                 "no_copy_head": f.get("no_copy_head"), "steered": f.get("steered"), "ar": f.get("ar"),
                 **{b.name: f["trivial"].get(b.name) for b in BASELINES}}
        return {name: figures for name, figures in found.items() if figures is not None}

    def table(self) -> list[dict[str, str]]:
        """Rows `measure | MDLM raw | no outcome head | no copy head | steered | AR | baselines...` for the card and
        the terminal; a column only where the model has that part."""
        f = self.figures
        columns = self.columns()
        rows: list[dict[str, str]] = []

        def row(measure: str, cells: dict[str, str]) -> None:
            rows.append({"measure": measure, **{COLUMN_NAMES[name]: cells.get(name, "") for name in columns}})

        def rates(measure: str, read: Callable[[dict], float | None]) -> None:
            row(measure, {name: _pct(read(c)) for name, c in columns.items()})

        for name in (*RATE_NAMES, "nonempty_recall"):
            rates(LOWER_IS_BETTER.get(name, name), lambda c, name=name: c.get(name))
        for kind in FieldScores().right:
            rates(f"field: {kind}", lambda c, kind=kind: c["field_accuracy"][kind])
        flip = f["flip"]
        cases = (flip.get("raw") or {}).get("cases", 0)
        row(f"flip (status=error pinned on {cases} ok calls): rule_consistent",
            {name: _pct(flip[name]["rule_consistent"]) for name in columns if flip.get(name)})
        free = f["free"]
        history = (f" (a skeleton from the tool's earlier answers on {_pct(free['from_history'])} of rows"
                   + (f", from the schema it was trained with on {_pct(free['from_training'])}"
                      if free.get("from_training") else "")
                   + (f", from the model's own sketch of its schema on {_pct(free['from_sketch'])}"
                      if free.get("from_sketch") else "") + ")"
                   if free.get("from_history") is not None else "")
        row(f"no response schema given{history}: json_valid / schema_valid / same_keys",
            {"raw": f"{_pct(free['json_valid'])} / {_pct(free['schema_valid'])} / {_pct(free['same_keys'])}"})
        if free.get("canvas_same_keys") is not None:
            row("no response schema, the free canvas alone (no skeleton): json_valid / same_keys",
                {"raw": f"{_pct(free['canvas_json_valid'])} / {_pct(free['canvas_same_keys'])}"})
        use = f["prompt_use"]
        if use.get("own_nll") is not None:
            row("prompt_use: content NLL own / swapped prompt (swapped ÷ own)",
                {"raw": f"{use['own_nll']:.3f} / {use['swapped_nll']:.3f} ({use['swapped_nll'] / use['own_nll']:.2f}x)",
                 **({"no_copy_head": f"{use['denoiser_own_nll']:.3f} / {use['denoiser_swapped_nll']:.3f} "
                                     f"({use['denoiser_swapped_nll'] / use['denoiser_own_nll']:.2f}x)"}
                    if use.get("denoiser_own_nll") else {})})
        for name, values in (f.get("diversity") or {}).items():
            row(f"{name} Self-BLEU / Distinct-2 (values only)",
                {"raw": f"{values['self_bleu']:.3f} / {values['distinct_2']:.3f} "
                        f"({values['values_self_bleu']:.3f} / {values['values_distinct_2']:.3f})"})
        return rows

    def render(self) -> str:
        table = self.table()
        widths = {key: max(len(key), *(len(row[key]) for row in table)) for key in table[0]}
        lines = ["  ".join(key.ljust(widths[key]) for key in widths)]
        lines += ["  ".join(row[key].ljust(widths[key]) for key in widths) for row in table]
        return "\n".join(lines)


def quality_file(grounding: Grounding) -> str:
    """Where an evaluation under `grounding` is kept beside the weights: `quality.json` for the headline (`none`)."""
    return "quality.json" if parse_grounding(grounding) == NONE else f"quality-{parse_grounding(grounding)}.json"


def write_quality(report: EvalReport, model_dir: Path) -> Path:
    """Save the report beside the weights (quality_file of its grounding) and rewrite the model card."""
    from wmstudio.train.world_model.model_card import write_model_card

    path = Path(model_dir) / quality_file(report.settings.get("grounding", NONE))
    data = {"figures": report.figures, "table": report.table(), "summary": report.summary(),
            "settings": {**report.settings, "corpus": Path(str(report.settings.get("corpus"))).name,
                         "mdlm": Path(str(report.settings.get("mdlm"))).name},
            "errors": report.errors[:20], "seconds": round(report.seconds, 1)}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if (Path(model_dir) / "training.json").exists():
        write_model_card(Path(model_dir))
    return path


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"
