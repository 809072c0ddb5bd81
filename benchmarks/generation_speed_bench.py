"""Generation speed on held-out rows: the median time of one `generate` call, greedy, one torch thread.

Prints, for the same rows: raw (the model with its heads), the outcome head off, steered (rule-guided repair), and
a tool without a response schema (the model sketches one first, when it was trained to). Run from the repository:

    wmstudio corpus --out /tmp/eval --rows 3000 --seed 1
    python benchmarks/generation_speed_bench.py --corpus /tmp/eval --rows 60
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from wmstudio.locations import DEFAULT_MODEL
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.evaluation import load_cases

VARIANTS = {
    "raw": SamplerSettings(),
    "outcome head off": SamplerSettings(outcome_head=False),
    "steered (repair)": SamplerSettings(repair=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a `wmstudio corpus` folder (its test split)")
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backend = load_backend(args.model)
    cases = load_cases(args.corpus, "test", args.rows, seed=0)
    generate(backend, cases[0].world, cases[0].call, (), cases[0].history)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in [*VARIANTS, "no response schema"]}
    for case in cases:
        for name, settings in VARIANTS.items():
            started = time.perf_counter()
            generate(backend, case.world, case.call, (), case.history, settings)
            times[name].append(1000 * (time.perf_counter() - started))
        schemaless = case.world.without_response_schema(case.call.name)
        started = time.perf_counter()
        generate(backend, schemaless, case.call, (), case.history)
        times["no response schema"].append(1000 * (time.perf_counter() - started))
    report = {name: {"median_ms": round(statistics.median(values), 1), "p90_ms": round(sorted(values)[int(0.9 * len(values))], 1)}
              for name, values in times.items()}
    print(json.dumps({"model": args.model, "rows": len(cases), "threads": args.threads, "figures": report}, indent=2))


if __name__ == "__main__":
    main()
