"""Zero-shot on a world no one here wrote: tau2-bench's retail domain (16 tools with `$defs`, a 55 KB state slice).

The embedded world model never trained on it. For each of the real (call, response) pairs that tau2-bench's own
tool code produced on this state (assets/benchmarks/tau2-retail, MIT, Sierra Research), generate a response and
score it: JSON validity for every call, and for the object responses, exact field accuracy by where each value
comes from, beside two trivial answers on the same rows: every field empty, and `echo` (the call's arguments into
same-named fields and the fields of the state record a call id names; train/world_model/baselines.py). The model's column is
its default settings; `no record copy` is the same model with the named record's copy switched off (its heads and
denoiser on the prompt alone: the learned part, model/heads/record_copy.py aside). Prompts are rendered with grounding
`none` (the world has no simulator).

    python benchmarks/zero_shot_tau.py [--model PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wmstudio.locations import ASSETS_DIR, DEFAULT_MODEL  # noqa: E402
from wmstudio.model.denoising.sampler import SamplerSettings  # noqa: E402
from wmstudio.model.generation.generation import generate  # noqa: E402
from wmstudio.model.serving.backends import load_backend  # noqa: E402
from wmstudio.train.world_model.baselines import TrainingAnswers, baseline_response  # noqa: E402
from wmstudio.train.world_model.field_kinds import FieldScores, enum_options, parse, prompt_values  # noqa: E402
from wmstudio.world.sims.base import neutral_value  # noqa: E402
from wmstudio.world.spec import Call, load_world  # noqa: E402

WORLD = ASSETS_DIR / "benchmarks" / "tau2-retail"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    world = load_world(WORLD / "world.json")
    cases = [json.loads(line) for line in (WORLD / "cases.jsonl").read_text().splitlines() if line.strip()]
    backend = load_backend(args.model)
    model, trivial, echo, bare = FieldScores(), FieldScores(), FieldScores(), FieldScores()
    json_valid, objects, seconds, copied = 0, 0, [], 0
    state_values = prompt_values(world.initial_state)
    unknown = [case["tool"] for case in cases if case["tool"] not in {tool.name for tool in world.tools}]
    cases = [case for case in cases if case["tool"] not in unknown]  # the agent called a tool the world lacks
    for case in cases:
        call = Call(case["tool"], case["arguments"])
        started = time.perf_counter()
        generation = generate(backend, world, call)
        seconds.append(time.perf_counter() - started)
        sample = generation.samples[0]
        json_valid += int(sample.checks.json_valid)
        copied += sum(bool(f.copied[0]) for f in generation.frames if f.copied)
        truth = parse(case["response"]) if isinstance(case["response"], str) else case["response"]
        if not isinstance(truth, dict):
            continue
        objects += 1
        schema = world.tool(call.name).response or {}
        call_values = prompt_values(call.arguments)
        enums = enum_options(schema)
        model.add(truth, parse(sample.response), call_values, state_values, enums)
        alone = generate(backend, world, call, settings=SamplerSettings(record_copy=False)).samples[0]
        bare.add(truth, parse(alone.response), call_values, state_values, enums)
        trivial.add(truth, _resolved_neutral(schema), call_values, state_values, enums)
        echoed = parse(baseline_response("echo", world, call, world.initial_state, TrainingAnswers()))
        echo.add(truth, echoed, call_values, state_values, enums)
    report = {
        "world": "tau2-retail (tau2-bench, kept aside)", "model": args.model, "calls": len(cases),
        "skipped_unknown_tools": unknown,
        "json_valid": round(json_valid / len(cases), 4), "object_responses": objects,
        "field_accuracy": model.accuracy(), "nonempty_recall": model.recall(),
        "trivial_empty": {"field_accuracy": trivial.accuracy(), "nonempty_recall": trivial.recall()},
        "echo": {"field_accuracy": echo.accuracy(), "nonempty_recall": echo.recall()},
        "no_record_copy": {"field_accuracy": bare.accuracy(), "nonempty_recall": bare.recall()},
        "median_seconds": round(sorted(seconds)[len(seconds) // 2], 2),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['world']}: {len(cases)} calls, JSON-valid {100 * report['json_valid']:.0f}%, "
          f"median {report['median_seconds']} s a call ({args.model})")
    print(f"{'kind':<18}{'model':>8}{'no record copy':>16}{'empty':>8}{'echo':>8}   fields")
    for kind, value in report["field_accuracy"].items():
        base, echoed = report["trivial_empty"]["field_accuracy"][kind], report["echo"]["field_accuracy"][kind]
        alone = report["no_record_copy"]["field_accuracy"][kind]
        if value is not None:
            print(f"{kind:<18}{100 * value:>7.1f}%{100 * alone:>15.1f}%{100 * base:>7.1f}%{100 * echoed:>7.1f}%"
                  f"   {model.total[kind]}")
    print(f"{'nonempty recall':<18}{100 * (model.recall() or 0):>7.1f}%{100 * (bare.recall() or 0):>15.1f}%"
          f"{100 * (trivial.recall() or 0):>7.1f}%{100 * (echo.recall() or 0):>7.1f}%")


def _resolved_neutral(schema: dict):
    """The constant baseline: the response schema's neutral value, following the `$ref` the tau2 schemas use."""
    target = schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = schema.get("$defs", {}).get(ref.split("/")[-1], {})
    return neutral_value(target)


if __name__ == "__main__":
    main()
