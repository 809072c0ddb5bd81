"""[wm-pair] The paper's comparison at this scale: the pair's masked diffusion model and its left-to-right twin (the
same rows, tokenizer, shape, steps and CPU time: `wmstudio model train-pair`), each with and without the helpers that
are not diffusion's own (the outcome head, record and listing copy, the call's ids, rule-fixed fields; the AR gets
them as pins written where it opens their keys), on the same held-out rows, beside echo+ and echo++.

    wmstudio corpus --out pair-eval --rows 3000 --seed 6161 --synthetic 200 --synthetic-seed 6161 --oracle-share 0
    python benchmarks/pair_bench.py pair-eval --worlds demo --rows 150 --json pair-demo.json

Prints, per column: field accuracy by kind (value-weighted, and per row: the mean of each row's share of fields
right), status, rule-consistent (and status), the Patronus protocol's exact, JSON-semantic and ROUGE-L match,
diversity over K samples at temperature 1, with and without the helpers (Self-BLEU, lower is more diverse; Distinct-2,
higher is) and seconds per answer. Pinned errors are benchmarks/pinned_error_coherence.py's (`--model` / `--ar` the pair's)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.problems import InvalidInput
from wmstudio.train.world_model.baselines import BASELINE_NAMES
from wmstudio.train.world_model.chat_scoring import normalise, rouge_l, semantic_match
from wmstudio.train.world_model.evaluation import EvalCase, EvalReport, Rates, load_cases, sample_diversity, \
    score_baselines, training_answers
from wmstudio.train.world_model.field_kinds import FieldScores, enum_options, prompt_values
from wmstudio.train.world_model.field_kinds import parse as parse_answer

PAIR = {"mdlm": "assets/models/wm-mdlm-pair", "ar": "assets/models/wm-ar-pair"}
HELPERS_OFF = SamplerSettings(record_copy=False, outcome_head=False, rule_fields=False, rule_outcomes=False)
COLUMNS = {"MDLM": ("mdlm", SamplerSettings()), "AR": ("ar", SamplerSettings()),
           "MDLM, no helpers": ("mdlm", HELPERS_OFF), "AR, no helpers": ("ar", HELPERS_OFF)}
BASELINES_SHOWN = {"rule_status": "status rule", "echo_plus": "echo+", "echo_plus_plus": "echo++"}
KINDS = (("call", "copy_call"), ("state", "copy_state"), ("printed", "number_in_prompt"),
         ("derived", "derived_number"), ("status", "status"), ("error code", "error_code"))


@dataclass
class Column:
    """One model-and-settings column: its rates, per-row field shares, Patronus matches and time."""

    rates: Rates = field(default_factory=Rates)
    row_shares: list[float] = field(default_factory=list)
    exact: int = 0
    semantic: int = 0
    rouge: float = 0.0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def add(self, sample: Any, case: EvalCase, seconds: float) -> None:
        self.rates.add(sample.checks, sample.response, case)
        own = FieldScores()
        own.add(parse_answer(case.truth), parse_answer(sample.response), prompt_values(case.call.arguments),
                prompt_values(case.world.initial_state, [s.to_json() for s in case.history]),
                enum_options(case.schema))
        total = sum(own.total.values())
        if total:
            self.row_shares.append(sum(own.right.values()) / total)
        self.exact += int(normalise(sample.response) == normalise(case.truth))
        self.semantic += int(semantic_match(sample.response, case.truth))
        self.rouge += rouge_l(normalise(sample.response), normalise(case.truth))
        self.seconds += seconds

    def to_json(self) -> dict[str, Any]:
        figures = with_all_fields(self.rates)
        n = max(self.rates.total, 1)
        figures["fields_per_row"] = round(sum(self.row_shares) / max(len(self.row_shares), 1), 4)
        figures.update(exact=round(self.exact / n, 4), semantic=round(self.semantic / n, 4),
                       rouge_l=round(self.rouge / n, 4), seconds_per_answer=round(self.seconds / n, 3),
                       errors=len(self.errors))
        return figures


def measure(corpus: Path, pair: dict[str, str], rows: int, worlds: str, seed: int, diversity_calls: int,
            samples: int) -> dict[str, Any]:
    """Every column on the same `rows` held-out rows of `corpus`, the baselines beside them, and diversity."""
    cases = load_cases(corpus, "test", rows, seed, worlds)
    backends = {arch: load_backend(path) for arch, path in pair.items()}
    columns = {name: Column() for name in COLUMNS}
    answers = training_answers(corpus, "none")
    base = {name: Rates() for name in BASELINE_NAMES}
    flips = {name: Rates() for name in BASELINE_NAMES}
    for case in cases:
        score_baselines(case, answers, "none", base, flips)
        for name, (arch, settings) in COLUMNS.items():
            started = time.perf_counter()
            try:
                sample = generate(backends[arch], case.world, case.call, (), case.history, settings).samples[0]
            except InvalidInput as err:
                columns[name].errors.append(f"{case.where}: {err}")
                continue
            columns[name].add(sample, case, time.perf_counter() - started)
    report = EvalReport()
    diversity = {}
    for suffix, base in (("", SamplerSettings()), (", no helpers", HELPERS_OFF)) if diversity_calls else ():
        for arch, backend in backends.items():
            diversity[f"{arch.upper()}{suffix}"] = sample_diversity(backend, cases[:diversity_calls], samples, seed,
                                                                    report, "none", base)
    result = {"corpus": str(corpus), "worlds": worlds, "rows": len(cases), "seed": seed, "pair": pair,
              "columns": {name: column.to_json() for name, column in columns.items()},
              "baselines": {label: with_all_fields(base[name]) for name, label in BASELINES_SHOWN.items()},
              "diversity": diversity, "errors": {n: c.errors[:5] for n, c in columns.items() if c.errors}}
    return result


def with_all_fields(rates: Rates) -> dict[str, Any]:
    """`rates` as figures, with the accuracy over every field of every kind (value-weighted)."""
    figures = rates.to_json()
    right, total = rates.fields.right, rates.fields.total
    figures["fields_all"] = round(sum(right.values()) / max(sum(total.values()), 1), 4)
    return figures


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def table(result: dict[str, Any]) -> str:
    """The comparison as a markdown table: one row per measure, one column per model-and-settings and baseline."""
    names = [*result["columns"], *result["baselines"]]
    cells = {**result["columns"], **result["baselines"]}
    lines = ["| measure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]

    def row(label: str, read) -> None:
        lines.append(f"| {label} | " + " | ".join(read(cells[name]) for name in names) + " |")

    for label, kind in KINDS:
        row(f"field: {label}", lambda c, kind=kind: _pct(c["field_accuracy"][kind]))
    row("all fields (value-weighted)", lambda c: _pct(c.get("fields_all")))
    row("all fields (per row)", lambda c: _pct(c.get("fields_per_row")))
    for measure in ("json_valid", "same_status", "rule_consistent", "rule_and_status"):
        row(measure, lambda c, m=measure: _pct(c[m]))
    for measure in ("exact", "semantic", "rouge_l"):
        row(f"Patronus {measure}", lambda c, m=measure: _pct(c.get(m)))
    row("seconds per answer", lambda c: f"{c['seconds_per_answer']:.2f}" if "seconds_per_answer" in c else "—")
    diversity = result.get("diversity") or {}
    for arch, values in diversity.items():
        if values:
            lines.append(f"\nDiversity, {arch} ({values['calls']} calls × K samples at temperature 1): "
                         f"Self-BLEU {values['self_bleu']:.3f} (values {values['values_self_bleu']:.3f}), "
                         f"Distinct-2 {values['distinct_2']:.3f} (values {values['values_distinct_2']:.3f})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--rows", type=int, default=150)
    parser.add_argument("--worlds", default="demo", help="all, demo or heldout-synthetic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mdlm", default=PAIR["mdlm"])
    parser.add_argument("--ar", default=PAIR["ar"])
    parser.add_argument("--diversity-calls", type=int, default=12)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = measure(args.corpus, {"mdlm": args.mdlm, "ar": args.ar}, args.rows, args.worlds, args.seed,
                     args.diversity_calls, args.samples)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{result['rows']} rows of {args.corpus} ({args.worlds}), grounding none")
    print(table(result))
    for name, errors in result["errors"].items():
        print(f"{name}: {len(errors)} errors, e.g. {errors[0]}")


if __name__ == "__main__":
    main()
