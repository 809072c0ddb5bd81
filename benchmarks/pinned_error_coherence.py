"""Pinned errors that must stay coherent (issue 31): pin `status: "error"` on calls the simulator answers ok and count
how often the rest of the response disagrees with the state.

On the 5 demo worlds, N ok calls (default 50, balanced over the worlds, seeded) from the test split of a `wmstudio
corpus` are answered with `status` pinned to "error" by the shipped MDLM, raw and steered (repair), and by its
autoregressive baseline (the pin as a directive; it has no repair). Printed per model, as rates over the calls:
- code contradicted: an error code whose cause a rule states and the state (with the history) contradicts
  (REFUND_WINDOW_EXPIRED for an order delivered 4 days ago; world/checks/error_codes.py);
- stray mention: a message naming an id or number (of 100 or more) that nothing holds (world/checks/message_mentions.py);
- code explained: a code the world can explain (world/checks/explained_codes.py: stated by it, transient, or a
  sign-in failure where it has a sign-in), and auth codes answered in worlds with no sign-in (a count);
- not JSON, status kept (the pin honoured), all checks pass, repeated words (world/checks/text_quality.py), seconds/call.
Target (issue 31): steered 0 and 0. Run: `python benchmarks/pinned_error_coherence.py [--calls 50] [--seed 0]
[--rows 2000] [--model PATH] [--ar PATH] [--text-penalty 1.3] [--json]`."""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.denoising import text_penalty
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.error_codes import contradicted
from wmstudio.world.checks.explained_codes import AUTH_CODES, explains, signs_in
from wmstudio.world.checks.report import parse_response
from wmstudio.world.checks.text_quality import response_repeats
from wmstudio.world.corpus.rows import iter_corpus
from wmstudio.world.history import HistoryStep, parse_history
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

PIN = Anchor("status", "error")


@dataclass
class Case:
    """One ok call of the test split: its world (with the row's directives), the call and the history before it."""

    world: WorldSpec
    call: Call
    history: list[HistoryStep]


@dataclass
class Tally:
    """What one model's answers showed, call by call."""

    calls: int = 0
    contradicted: int = 0
    stray: int = 0
    not_json: int = 0
    kept: int = 0
    passed: int = 0
    repeats: int = 0
    explained: int = 0
    auth_no_sign_in: int = 0
    seconds: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, case: Case, text: str, report: Any, seconds: float) -> None:
        self.calls += 1
        self.seconds += seconds
        json_valid, value = parse_response(text)
        code = contradicted(case.world, case.call, value, case.history) if json_valid else None
        self.contradicted += code is not None
        self.stray += bool(report.message_strays)
        self.not_json += not json_valid
        self.kept += json_valid and isinstance(value, dict) and value.get("status") == "error"
        self.passed += report.ok
        self.repeats += response_repeats(value if json_valid else text)
        error = value.get("error") if json_valid and isinstance(value, dict) else None
        self.explained += isinstance(error, str) and bool(error) and explains(case.world, error)
        self.auth_no_sign_in += error in AUTH_CODES and not signs_in(case.world)
        if (code or report.message_strays) and len(self.examples) < 3:
            self.examples.append({"call": case.call.to_json(), "response": text, "contradicted": code,
                                  "strays": report.message_strays})

    def row(self) -> dict[str, Any]:
        share = (lambda n: round(n / self.calls, 3)) if self.calls else (lambda n: None)
        return {"calls": self.calls, "code_contradicted": share(self.contradicted), "stray_mention": share(self.stray),
                "not_json": share(self.not_json), "status_kept": share(self.kept), "checks_pass": share(self.passed),
                "repeated_words_per_call": share(self.repeats), "code_explained": share(self.explained),
                "auth_code_without_sign_in": self.auth_no_sign_in,
                "seconds_per_call": round(self.seconds / self.calls, 3) if self.calls else None}


def ok_cases(calls: int, seed: int, rows: int) -> list[Case]:
    """`calls` ok calls from the corpus's test split, as even over the worlds as the split allows, seeded."""
    by_world: dict[str, list[Case]] = defaultdict(list)
    for generated in iter_corpus(rows, seed):
        if generated.split != "test":
            continue
        meta = generated.data["meta"]
        truth = json.loads(generated.data["messages"][-1]["content"])
        if truth.get("status") != "ok":
            continue
        world = get_simulator(meta["world"]).world(meta["initial_state"], meta["directives"])
        by_world[meta["world"]].append(Case(world, Call.from_json(meta["call"]), parse_history(meta["history"])))
    rng = random.Random(f"pinned-error/{seed}")
    for cases in by_world.values():
        rng.shuffle(cases)
    chosen, names = [], sorted(by_world)
    while len(chosen) < calls and any(by_world.values()):
        for name in names:
            if by_world[name] and len(chosen) < calls:
                chosen.append(by_world[name].pop())
    return chosen


def measure(backend: Any, cases: list[Case], settings: SamplerSettings) -> Tally:
    tally = Tally()
    for case in cases:
        started = time.perf_counter()
        sample = generate(backend, case.world, case.call, [PIN], case.history, settings).samples[0]
        tally.add(case, sample.response, sample.checks, time.perf_counter() - started)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0, help="Corpus seed (its test split is used) and sampling seed.")
    parser.add_argument("--rows", type=int, default=2000, help="Corpus rows to draw the test split from.")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--ar", default=DEFAULT_AR_MODEL, help="AR baseline ('' for none).")
    parser.add_argument("--text-penalty", type=float, default=text_penalty.TEXT_REPETITION_PENALTY,
                        help="Repetition penalty inside text spans (1 = off), to measure what it does.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    text_penalty.TEXT_REPETITION_PENALTY = args.text_penalty

    cases = ok_cases(args.calls, args.seed, args.rows)
    mdlm = load_backend(args.model)
    results = {"mdlm raw": measure(mdlm, cases, SamplerSettings(seed=args.seed)),
               "mdlm steered": measure(mdlm, cases, SamplerSettings(seed=args.seed, repair=True))}
    if args.ar:
        results["ar raw"] = measure(load_backend(args.ar), cases, SamplerSettings(seed=args.seed))
    worlds = sorted({case.world.name for case in cases})
    report = {"calls": len(cases), "worlds": worlds, "seed": args.seed, "model": args.model, "ar": args.ar or None,
              "text_penalty": args.text_penalty,
              "results": {name: tally.row() for name, tally in results.items()},
              "examples": {name: tally.examples for name, tally in results.items()}}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"status pinned to \"error\" on {len(cases)} ok calls ({', '.join(worlds)}; corpus seed {args.seed}, "
          f"test split of {args.rows} rows; text-span repetition penalty {args.text_penalty:g})")
    columns = ["code_contradicted", "code_explained", "auth_code_without_sign_in", "stray_mention", "not_json",
               "status_kept", "checks_pass", "repeated_words_per_call", "seconds_per_call"]
    print(f"{'':14}" + "".join(f"{c:>27}" for c in columns))
    for name, row in report["results"].items():
        print(f"{name:14}" + "".join(f"{str(row[c]):>27}" for c in columns))
    for name, examples in report["examples"].items():
        for example in examples[:1]:
            print(f"\n{name} e.g. {json.dumps(example['call'])}\n  {example['response']}\n  contradicted: "
                  f"{example['contradicted']}; strays: {example['strays']}")


if __name__ == "__main__":
    assert set(SIMULATORS) == {"retail", "airline", "filesystem", "records", "payments"}
    main()
