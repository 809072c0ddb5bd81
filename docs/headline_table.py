"""The README's current accuracy table, written from the shipped model's `headline.json`: the figures the two
benchmark scripts measured on one named evaluation seed (single calls: benchmarks/floor_bench.py; closed-loop
episodes: benchmarks/episode_bench.py), the model beside echo++ and the status rule on the same rows.

    python benchmarks/floor_bench.py CORPUS --worlds demo --rows 200 --model assets/models/wm-mdlm-small --json demo.json
    python benchmarks/floor_bench.py CORPUS --worlds heldout-synthetic --rows 400 --model ... --json generated.json
    python benchmarks/episode_bench.py --episodes 20 --writes 10 --seed 91 --generated 15 --json episodes.json
    python docs/headline_table.py --assemble demo.json generated.json episodes.json   # headline.json + README
    python docs/headline_table.py           # rewrite the block between <!-- headline-table --> markers
    python docs/headline_table.py --check   # exit 1 when a block is not what headline.json says

The block stands in README.md and at the top of docs/results.md.

`tests/test_docs.py` runs the check."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from readme_block import between, update

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ROOT / "assets" / "models" / "wm-mdlm-small" / "headline.json"
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"  # opens with the same table, above the dated history
START, END = "<!-- headline-table -->", "<!-- /headline-table -->"
SINGLE_ROWS = (  # row, where a column's floor_bench figures hold it
    ("values copied from the state shown", ("field_accuracy", "copy_state")),
    ("numbers printed in the prompt", ("field_accuracy", "number_in_prompt")),
    ("numbers derived from the prompt", ("field_accuracy", "derived_number")),
    ("the simulator's status", ("same_status",)),
    ("rule-consistent, with that status", ("rule_and_status",)),
)
COLUMNS = ("model", "echo_plus_plus", "rule_status")  # per world set: the model, echo++, the status rule
SETS = (("demo", "demo worlds"), ("generated", "unseen generated worlds"))


def _at(figures: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        figures = figures.get(key) if isinstance(figures, dict) else None
    return figures


def _share(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else ""


def _episode_cells(episodes: dict[str, Any], name: str) -> list[list[str]]:
    """The three episode rows' cells of one world set: the model's and echo++'s (the status rule plays none)."""
    rows: list[list[str]] = [[], [], []]
    for column in COLUMNS:
        figures = _at(episodes, (name, column))
        if not isinstance(figures, dict):
            rows = [row + [""] for row in rows]
            continue
        rows[0].append(f"{_share(figures['state_changing'])} ({_share(figures['state_changing_named'])})")
        rows[1].append(_share(figures["rest"]))
        rows[2].append(f"{figures['step_1'] * 100:.1f} / {_share(figures['step_4'])}")
    return rows


def render(headline: dict[str, Any]) -> str:
    """The table and the line saying where its figures come from, as they stand between the markers."""
    heading = ["", *(f"model, {label}" if column == "model" else {"echo_plus_plus": "echo++",
                                                                  "rule_status": "status rule"}[column]
                     for _, label in SETS for column in COLUMNS)]
    lines = ["| " + " | ".join(heading) + " |", "|---" * len(heading) + "|"]
    for row, path in SINGLE_ROWS:
        cells = [_share(_at(headline, ("single", name, "figures", column, *path))) for name, _ in SETS
                 for column in COLUMNS]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    episode_rows = ("episodes: steps that change the state, next state exact (with new ids as the answers named "
                    "them)", "episodes: the other steps, next state exact",
                    "episodes: answer fields right at step 1 / step 4+")
    per_set = [_episode_cells(headline.get("episodes") or {}, name) for name, _ in SETS]
    for index, row in enumerate(episode_rows):
        lines.append(f"| {row} | " + " | ".join(cell for cells in per_set for cell in cells[index]) + " |")
    single = headline.get("single") or {}
    episodes = headline.get("episodes") or {}
    counts = (f"{_at(single, ('demo', 'rows'))} demo and {_at(single, ('generated', 'rows'))} generated single "
              f"calls of corpus `{_at(single, ('demo', 'corpus'))}`; "
              f"{_at(episodes, ('demo', 'model', 'state_changing_steps')) + _at(episodes, ('demo', 'model', 'rest_steps'))}"
              f" demo and {_at(episodes, ('generated', 'model', 'state_changing_steps')) + _at(episodes, ('generated', 'model', 'rest_steps'))}"
              f" generated episode steps of seed {episodes.get('seed')}")
    return "\n".join(lines) + f"\n\n*Measured {headline.get('measured')} ({counts}), written by " \
        "`python docs/headline_table.py` from `assets/models/wm-mdlm-small/headline.json`.*"


def block(readme: str) -> str:
    """The text between the README's markers (ValueError when they are missing)."""
    return between(readme, START, END)


def assemble(demo: Path, generated: Path, episodes: Path) -> dict[str, Any]:
    """headline.json's content from the three benchmark outputs (their `--json` files)."""
    read = lambda path: json.loads(path.read_text(encoding="utf-8"))  # noqa: E731
    return {"measured": date.today().isoformat(), "single": {"demo": read(demo), "generated": read(generated)},
            "episodes": read(episodes)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the README's block is out of date")
    parser.add_argument("--assemble", nargs=3, type=Path, metavar=("DEMO", "GENERATED", "EPISODES"),
                        help="write headline.json from floor_bench's two and episode_bench's --json outputs first")
    args = parser.parse_args()
    if args.assemble:
        HEADLINE.write_text(json.dumps(assemble(*args.assemble), indent=1) + "\n", encoding="utf-8")
    table = render(json.loads(HEADLINE.read_text(encoding="utf-8")))
    return max(update(table, START, END, args.check, page) for page in (README, RESULTS))


if __name__ == "__main__":
    sys.exit(main())
