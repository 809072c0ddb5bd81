"""The floor a world model must clear, in seconds and with no model: every baseline of train/baselines.py on the
rows `wmstudio model eval` scores (the same cases, the same training answers, the same scoring), beside the model's
own figures from a `quality.json` when one is given.

    wmstudio corpus --out head_2026 --rows 4000 --seed 2026 --synthetic 250 --synthetic-seed 2026
    python benchmarks/floor_bench.py head_2026 --worlds demo \\
        --quality assets/models/wm-mdlm-small/quality.json

Prints one row per measure (the headline kinds, status, consistency) and one column per baseline, so a baseline
added to the registry (echo+, say) is measured on a model's published rows without rerunning the model."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmstudio.train.baselines import BASELINES
from wmstudio.train.evaluation import Rates, load_cases, score_baselines, training_answers
from wmstudio.world.grounding import parse_grounding

MEASURES = (
    ("copied from the call", ("field_accuracy", "copy_call")),
    ("copied from the state shown", ("field_accuracy", "copy_state")),
    ("numbers printed in the prompt", ("field_accuracy", "number_in_prompt")),
    ("numbers derived from the prompt", ("field_accuracy", "derived_number")),
    ("same status", ("same_status",)),
    ("rule-consistent", ("rule_consistent",)),
    ("rule-consistent and status", ("rule_and_status",)),
    ("fields filled", ("nonempty_recall",)),
)


def figure(column: dict | None, path: tuple[str, ...]) -> str:
    value = column
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return f"{value:.1%}" if isinstance(value, (int, float)) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", default="demo")
    parser.add_argument("--grounding", default="none")
    parser.add_argument("--quality", type=Path, help="a model's quality.json measured on the same rows")
    args = parser.parse_args()
    grounding = parse_grounding(args.grounding)
    started = time.perf_counter()
    cases = load_cases(args.corpus, args.split, args.rows, args.seed, args.worlds)
    answers = training_answers(args.corpus, grounding)
    rates = {b.name: Rates() for b in BASELINES}
    flips = {b.name: Rates() for b in BASELINES}
    for case in cases:
        score_baselines(case, answers, grounding, rates, flips)
    columns = [(b.label, rates[b.name].to_json()) for b in BASELINES]
    if args.quality:
        quality = json.loads(args.quality.read_text(encoding="utf-8"))
        settings = quality.get("settings") or {}
        same = (settings.get("rows"), settings.get("worlds"), settings.get("seed")) == (args.rows, args.worlds,
                                                                                        args.seed)
        print(f"{args.quality}: measured on {settings.get('corpus')} {settings.get('worlds')} rows "
              f"{settings.get('rows')} seed {settings.get('seed')}" + ("" if same else " (NOT the same rows)"))
        columns.insert(0, ("MDLM (quality.json)", quality["figures"]["raw"]))
    print(f"{len(cases)} rows of {args.corpus} ({args.worlds}, split {args.split}, grounding {grounding}); "
          f"{time.perf_counter() - started:.1f} s")
    print("| measure | " + " | ".join(label for label, _ in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for measure, path in MEASURES:
        print(f"| {measure} | " + " | ".join(figure(column, path) for _, column in columns) + " |")
    print("values of each kind scored:", json.dumps(rates[BASELINES[0].name].fields.total))


if __name__ == "__main__":
    main()
