"""The README's quality table, written from the shipped model's `quality.json` (what `wmstudio model eval --write`
saves), so the front page always shows the shipped model's own figures beside its baselines.

    python docs/quality_table.py           # rewrite the block between <!-- quality-table --> markers in README.md
    python docs/quality_table.py --check   # exit 1 when the README's block is not what quality.json says

`tests/test_docs.py` runs the check."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from readme_block import between, update

from wmstudio.train.world_model.baselines import BASELINES

ROOT = Path(__file__).resolve().parents[1]
QUALITY = ROOT / "assets" / "models" / "wm-mdlm-small" / "quality.json"
README = ROOT / "README.md"
START, END = "<!-- quality-table -->", "<!-- /quality-table -->"
ROWS = (  # measure, where it is in a column's figures
    ("copied from the call (ids, names)", ("field_accuracy", "copy_call")),
    ("copied from the state shown", ("field_accuracy", "copy_state")),
    ("numbers printed in the prompt", ("field_accuracy", "number_in_prompt")),
    ("numbers derived from the prompt", ("field_accuracy", "derived_number")),
    ("same status as the simulator", ("same_status",)),
    ("rule-consistent", ("rule_consistent",)),
    ("rule-consistent and the simulator's status", ("rule_and_status",)),
    ("fields the simulator fills, filled", ("nonempty_recall",)),
)


def columns(quality: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(heading, figures) for the model as shipped, with each head off, steered, the AR baseline and every trivial
    baseline the file holds."""
    figures = quality["figures"]
    shown = [("MDLM", figures["raw"]),
             ("no outcome head", figures.get("no_outcome_head") or quality.get("denoiser")),
             ("no copy head", figures.get("no_copy_head")),
             ("steered", figures.get("steered")),
             ("AR baseline", figures.get("ar"))]
    trivial = figures.get("trivial", {})
    shown += [(baseline.label, trivial.get(baseline.name)) for baseline in BASELINES]  # train/world_model/baselines.py
    return [(heading, column) for heading, column in shown if column]


def cell(column: dict[str, Any], path: tuple[str, ...]) -> str:
    value: Any = column
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return f"{value:.1%}" if isinstance(value, (int, float)) else ""


def render(quality: dict[str, Any]) -> str:
    """The table (and the line saying what it was measured on) that stands between the markers."""
    figures = quality["figures"]
    shown = columns(quality)
    grounding = figures.get("grounding") or "oracle (the simulator's state in the prompt; measured before grounding was recorded)"
    settings = quality.get("settings") or {}
    seed = f" (corpus seed {settings['corpus_seed']})" if settings.get("corpus_seed") is not None else ""
    worlds = {"demo": " of the five demo worlds", "heldout-synthetic": " of synthetic worlds never trained on"}.get(
        settings.get("worlds") or "", "")
    lines = [f"On {figures['rows']} held-out rows{worlds} of a corpus seed training never saw{seed}, greedy, "
             f"grounding {grounding} "
             f"(`{QUALITY.relative_to(ROOT).as_posix()}`):", "",
             "| | " + " | ".join(heading for heading, _ in shown) + " |",
             "|---" * (len(shown) + 1) + "|"]
    for measure, path in ROWS:
        lines.append(f"| {measure} | " + " | ".join(cell(column, path) for _, column in shown) + " |")
    return "\n".join(lines)


def block(text: str) -> str:
    """What stands between the markers in `text` (ValueError when they are missing)."""
    return between(text, START, END)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Only compare; exit 1 when they differ.")
    args = parser.parse_args()
    sys.exit(update(render(json.loads(QUALITY.read_text(encoding="utf-8"))), START, END, args.check, README))


if __name__ == "__main__":
    main()
