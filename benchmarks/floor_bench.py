"""The floor a world model must clear, in seconds and with no model: every baseline of train/world_model/baselines.py on the
rows `wmstudio model eval` scores (the same cases, the same training answers, the same scoring), beside the model's
own figures from a `quality.json` when one is given.

    wmstudio corpus --out head_2026 --rows 4000 --seed 2026 --synthetic 250 --synthetic-seed 2026
    python benchmarks/floor_bench.py head_2026 --worlds demo \\
        --quality assets/models/wm-mdlm-small/quality.json

Prints one row per measure (the headline kinds, status, consistency) and one column per baseline, so a baseline
added to the registry (echo+, say) is measured on a model's published rows without rerunning the model. `--model`
adds the model's raw column measured here (greedy, default settings, the same scoring as `wmstudio model eval`'s
`raw`) and the share of the state values the truth holds that its prompt showed (within the model's budget): a
quick A/B of a change to the prompt or the heads, in minutes instead of eval's half hour. `--ablate record_copy`
(any boolean sampler settings, comma-separated) adds a column of the model with each switched off."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmstudio.train.world_model.baselines import BASELINES
from wmstudio.train.world_model.evaluation import Rates, load_cases, score_baselines, training_answers
from wmstudio.train.world_model.field_kinds import classify, enum_options, field_leaves, parse, prompt_values
from wmstudio.world.grounding import parse_grounding
from wmstudio.world.records import json_leaves

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


def model_rates(model: str, cases: list, grounding: str, prompt_tokens: int | None = None, off: str = ""
                ) -> tuple[Rates, tuple[int, int]]:
    """The model's raw answers scored as eval's `raw` column (with the boolean setting `off` switched off), and
    (state values of the truth its prompts showed, state values of the truth)."""
    from wmstudio.model.denoising.sampler_settings import SamplerSettings
    from wmstudio.model.generation.generation import generate
    from wmstudio.model.generation.prompting import prepare_prompt
    from wmstudio.model.serving.backends import load_backend

    backend, rates, shown, total = load_backend(model), Rates(), 0, 0
    backend.prompt_tokens = prompt_tokens or backend.prompt_tokens
    settings = SamplerSettings(grounding=grounding, **({off: False} if off else {}))
    for case in cases:
        generation = generate(backend, case.world, case.call, (), case.history, settings)
        sample = generation.samples[0]
        rates.add(sample.checks, sample.response, case)
        prompt = prepare_prompt(backend, case.world, case.call, case.history, len(generation.canvas or ()),
                                grounding=grounding)
        seen = {str(leaf) for source in (prompt.rendered.shown.state, prompt.rendered.shown.query)
                for leaf in json_leaves(source, keys=True)}
        seen |= {str(leaf) for _, step in prompt.rendered.shown.turns for leaf in json_leaves(step.to_json())}
        truth = parse(case.truth)
        shown_values = prompt_values(case.world.initial_state, [s.to_json() for s in case.history])
        for path, value in field_leaves(truth):
            kind = classify(path, value, prompt_values(case.call.arguments), shown_values, enum_options(case.schema))
            if kind == "copy_state":
                total += 1
                shown += str(value) in seen
    return rates, (shown, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", default="demo")
    parser.add_argument("--grounding", default="none")
    parser.add_argument("--quality", type=Path, help="a model's quality.json measured on the same rows")
    parser.add_argument("--prompt-tokens", type=int, help="the model's prompt budget (default: what it was trained "
                                                              "with)")
    parser.add_argument("--model", help="also run this world model (raw) on the rows, e.g. "
                                        "assets/models/wm-mdlm-small")
    parser.add_argument("--ablate", default="", help="boolean sampler settings to switch off, a column each (with "
                                                     "--model), e.g. record_copy,copy_head")
    parser.add_argument("--json", type=Path, help="also write the figures here ({column: figures}, the model's as "
                                                  "`model`), as docs/headline_table.py reads them")
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
    written = {b.name: rates[b.name].to_json() for b in BASELINES}
    if args.model:
        raw, shown = model_rates(args.model, cases, grounding, args.prompt_tokens)
        written["model"] = {**raw.to_json(), "state_shown": round(shown[0] / max(1, shown[1]), 4)}
        columns.insert(0, (f"{Path(args.model).name} raw (here)", raw.to_json()))
        print(f"state values the prompt showed: {shown[0]} of {shown[1]} ({shown[0] / max(1, shown[1]):.1%})")
        for number, name in enumerate(n.strip() for n in args.ablate.split(",") if n.strip()):
            ablated, _ = model_rates(args.model, cases, grounding, args.prompt_tokens, name)
            columns.insert(1 + number, (f"no {name}", ablated.to_json()))
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
    if args.json:
        args.json.write_text(json.dumps({"corpus": str(args.corpus), "worlds": args.worlds, "rows": len(cases),
                                         "split": args.split, "seed": args.seed, "grounding": str(grounding),
                                         "figures": written}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
