"""Error cascade and pagination on world-model rollouts (issue 33): the model answers each step with its own earlier
answers as history (grounding none, default SamplerSettings), the simulator stepped on the same calls is the truth.

1. Error cascade: N 5-step rollouts per world kind (the 5 demo worlds in turn; synthetic worlds `synthetic:<seed>:<i>`,
   one per rollout, of a generator seed training never used). The calls come from the simulator's scripted agent on
   the true state; step 2 carries the `error-cascade` preset (world/steering/presets.py: its directives, among them
   `inject_error: SERVICE_UNAVAILABLE`, and its anchors status=error, error=SERVICE_UNAVAILABLE); the simulator gets
   the same `inject_error` directive there. Reported: of steps 3-5 the simulator answers ok, the share the model
   answers error (target <= 10%).
2. Pagination: the `pagination` preset (page_size 3) over 3 pages of a paged listing tool (a page token, or a page
   number with a has-more flag): the model answers page 1, then each call continues with the token (or page + 1) its
   own previous answer gave. Passes when the model's record ids over the pages repeat none and equal the ids of the
   simulator's own 3-page listing (target >= 90% of rollouts).
Run: `python benchmarks/error_cascade_bench.py [--rollouts 30] [--pages 3] [--seed 0] [--synthetic-seed 2026]
[--model PATH] [--ar PATH] [--json]`."""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.report import parse_response
from wmstudio.world.corpus.stress import PAGE_NUMBER, is_session_key, paging_keys, signed_in_episode
from wmstudio.world.history import HistoryStep
from wmstudio.world.sims import Simulator
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call
from wmstudio.world.steering.presets import CASCADE_ERROR, apply_preset
from wmstudio.world.synth.registry import synthetic_ref

STEPS, ERROR_STEP = 5, 2
DEMO = ("retail", "airline", "filesystem", "records", "payments")
TRIES = 80


def answer(backend: Any, sim: Simulator, initial: Any, call: Any, history: list[HistoryStep],
           preset: str | None = None) -> tuple[bool, Any]:
    """The model's answer to `call` (under `preset`, when given): (parsed as JSON, value)."""
    world, anchors = sim.world(initial), []
    if preset is not None:
        world, anchors = apply_preset(preset, world, call, anchors)
    text = generate(backend, world, call, anchors, history, SamplerSettings()).samples[0].response
    return parse_response(text)


def worlds_of(kind: str, count: int, synthetic_seed: int) -> list[str]:
    """`count` world names: the demo worlds in turn, or synthetic worlds 0..count-1 of `synthetic_seed`."""
    return [DEMO[i % len(DEMO)] if kind == "demo" else synthetic_ref(synthetic_seed, i) for i in range(count)]


@dataclass
class Cascade:
    """One model's error-cascade tally for a world kind."""

    rollouts: int = 0
    later_ok: int = 0  # steps 3-5 the simulator answers ok
    answered_error: int = 0  # ... that the model answered with status error
    not_json: int = 0
    pin_kept: int = 0  # step 2 answered error, as pinned

    def row(self) -> dict[str, Any]:
        return {"rollouts": self.rollouts, "later_ok_steps": self.later_ok, "answered_error": self.answered_error,
                "error_share": round(self.answered_error / self.later_ok, 3) if self.later_ok else None,
                "not_json": self.not_json, "pin_kept": self.pin_kept}


def cascade_rollout(backend: Any, sim: Simulator, rng: random.Random, tally: Cascade, pin: bool = True) -> None:
    """One 5-step rollout: the scripted agent's calls on the true state, the error preset at step 2 (`pin` False:
    none, the control)."""
    initial = truth = sim.initial_state(rng)
    history: list[HistoryStep] = []
    tally.rollouts += 1
    for step in range(1, STEPS + 1):
        call = sim.agent_call(truth, rng)
        pinned = pin and step == ERROR_STEP
        truth, expected = sim.step(truth, call, [f"inject_error: {CASCADE_ERROR}"] if pinned else [])
        valid, value = answer(backend, sim, initial, call, history, "error-cascade" if pinned else None)
        said_error = valid and isinstance(value, dict) and value.get("status") == "error"
        tally.pin_kept += pinned and said_error
        if step > ERROR_STEP and expected.get("status") == "ok":
            tally.later_ok += 1
            tally.answered_error += said_error
            tally.not_json += not valid
        history.append(HistoryStep(call=call, response=value))


@dataclass
class Paging:
    """How a world lists in pages: the tool, its token parameter and next-token field (token paging) or its page
    parameter and has-more field (page numbers), and the items field and their id key."""

    tool: str
    token: str | None
    after: str | None
    page: str | None
    more: str | None
    items: str
    id_key: str


def paging_of(sim: Simulator) -> Paging | None:
    """The world's paged listing tool (a page token first, else a page number), or None."""
    for by_token in (True, False):
        for tool in sim.tools():
            fields = (tool.response or {}).get("properties", {})
            items = next((k for k, s in fields.items() if s.get("type") == "array"
                          and s.get("items", {}).get("type") == "object"), None)
            if items is None:
                continue
            id_key = next((k for k in fields[items]["items"].get("properties", {}) if re.search("id$", k, re.I)), None)
            keys = paging_keys(tool)
            if by_token and keys and id_key:
                return Paging(tool.name, keys[0], keys[1], None, None, items, id_key)
            page = next((k for k in tool.parameters.get("properties", {}) if PAGE_NUMBER.search(k)), None)
            more = next((k for k, s in fields.items() if s.get("type") == "boolean" and "more" in k), None)
            if not by_token and page in fields and more and id_key:
                return Paging(tool.name, None, None, page, more, items, id_key)
    return None


def next_call(call: Call, paging: Paging, response: Any) -> Any | None:
    """The call for the page after `response`, from what it says (None: it was the last page, or unreadable)."""
    if not isinstance(response, dict) or response.get("status") != "ok":
        return None
    if paging.token is not None:
        token = response.get(paging.after)
        return Call(call.name, {**call.arguments, paging.token: token}) if isinstance(token, str) and token \
            else None
    page = response.get(paging.page)
    if response.get(paging.more) is not True or not isinstance(page, int):
        return None
    return Call(call.name, {**call.arguments, paging.page: page + 1})


def page_ids(response: Any, paging: Paging) -> list[Any]:
    items = response.get(paging.items) if isinstance(response, dict) else None
    return [item.get(paging.id_key) for item in items if isinstance(item, dict)] if isinstance(items, list) else []


@dataclass
class Pagination:
    """One model's pagination tally for a world kind."""

    rollouts: int = 0
    passed: int = 0
    repeated: int = 0
    skipped: int = 0
    invented: int = 0
    true_pages: int = 0

    def row(self) -> dict[str, Any]:
        share = (lambda n: round(n / self.rollouts, 3)) if self.rollouts else (lambda n: None)
        return {"rollouts": self.rollouts, "pass_share": share(self.passed), "repeated": share(self.repeated),
                "skipped": share(self.skipped), "invented": share(self.invented),
                "true_pages_mean": share(self.true_pages)}


def first_page(sim: Simulator, rng: random.Random, paging: Paging) -> tuple[Any, Any, Call, list[HistoryStep]] | None:
    """(initial state, state now, page-1 call, history): a signed-in start (synthetic worlds with sessions) and the scripted
    agent's first call of the paged tool, its page token or number dropped and each filter kept at even odds."""
    synthetic = getattr(sim, "blueprint", None) is not None
    initial = sim.initial_state(rng, records=rng.randrange(8, 16)) if synthetic else sim.initial_state(rng)
    episode = signed_in_episode(sim, initial)
    for _ in range(TRIES):
        call = sim.agent_call(episode.state, rng)
        if call.name == paging.tool:
            kept = {k: v for k, v in call.arguments.items() if k not in (paging.token, paging.page)
                    and (is_session_key(k) or rng.random() < 0.5)}
            return initial, episode.state, Call(call.name, kept), episode.history
    return None


def pagination_rollout(backend: Any, sim: Simulator, rng: random.Random, paging: Paging, pages: int,
                       tally: Pagination) -> None:
    """One rollout over `pages` pages: the simulator's own listing, then the model's, each page's call from the
    previous answer."""
    start = first_page(sim, rng, paging)
    if start is None:
        return
    initial, state, first, history = start
    truth, call = [], first
    for _ in range(pages):
        response = sim.step(state, call, ["page_size: 3"])[1]
        truth += page_ids(response, paging)
        tally.true_pages += 1
        if (call := next_call(call, paging, response)) is None:
            break
    said, call, steps = [], first, list(history)
    for _ in range(pages):
        valid, value = answer(backend, sim, initial, call, steps, "pagination")
        said += page_ids(value, paging) if valid else []
        steps.append(HistoryStep(call=call, response=value))
        if (call := next_call(call, paging, value if valid else None)) is None:
            break
    tally.rollouts += 1
    named = [str(i) for i in said if i not in ("", None)]  # a blank row is invented, not a repeat
    repeated, skipped = len(named) != len(set(named)), bool(set(truth) - set(said))
    invented = bool(set(map(str, said)) - set(map(str, truth)))
    tally.repeated += repeated
    tally.skipped += skipped
    tally.invented += invented
    tally.passed += not (repeated or skipped or invented)


def table(rows: dict[str, dict[str, Any]], columns: list[str]) -> None:
    print(f"{'':22}" + "".join(f"{c:>16}" for c in columns))
    for name, row in rows.items():
        print(f"{name:22}" + "".join(f"{str(row[c]):>16}" for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=30, help="Rollouts per world kind, per benchmark.")
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="Seed of the states and the agent's calls.")
    parser.add_argument("--synthetic-seed", type=int, default=2026, help="Generator seed of the synthetic worlds "
                                                                         "(one training never used).")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--ar", default=DEFAULT_AR_MODEL, help="AR baseline ('' for none).")
    parser.add_argument("--control", action="store_true", help="Also the cascade rollouts without the error.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()

    started = time.perf_counter()
    models = {"mdlm": load_backend(args.model), **({"ar": load_backend(args.ar)} if args.ar else {})}
    cascade: dict[str, dict[str, Any]] = {}
    paged: dict[str, dict[str, Any]] = {}
    paged_worlds: dict[str, list[str]] = {}
    for kind in ("demo", "synthetic"):
        names = worlds_of(kind, args.rollouts, args.synthetic_seed)
        pageable = [n for n in dict.fromkeys(worlds_of(kind, max(args.rollouts, len(DEMO)), args.synthetic_seed))
                    if paging_of(SIMULATORS[n]) is not None]
        paged_worlds[kind] = pageable
        for label, backend in models.items():
            for pin in (True, False) if args.control else (True,):
                tally = Cascade()
                for i, name in enumerate(names):
                    cascade_rollout(backend, SIMULATORS[name], random.Random(f"cascade/{args.seed}/{kind}/{i}"),
                                    tally, pin)
                cascade[f"{kind} {label}" + ("" if pin else " no pin")] = tally.row()
            pages = Pagination()
            for i in range(args.rollouts if pageable else 0):
                sim = SIMULATORS[pageable[i % len(pageable)]]
                pagination_rollout(backend, sim, random.Random(f"pagination/{args.seed}/{kind}/{i}"),
                                   paging_of(sim), args.pages, pages)
            paged[f"{kind} {label}"] = pages.row()
    report = {"model": args.model, "ar": args.ar or None, "seed": args.seed, "synthetic_seed": args.synthetic_seed,
              "error_step": ERROR_STEP, "steps": STEPS, "cascade": cascade, "pagination": paged,
              "paged_worlds": paged_worlds, "seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"Error cascade: {STEPS}-step rollouts, preset error-cascade at step {ERROR_STEP} "
          f"({CASCADE_ERROR}); of steps 3-5 the simulator answers ok, the share the model answers error (<= 0.10)")
    table(cascade, ["rollouts", "later_ok_steps", "answered_error", "error_share", "not_json", "pin_kept"])
    print(f"\nPagination: preset pagination over {args.pages} pages; rollouts with no record repeated, skipped or "
          f"invented vs the simulator's listing (>= 0.90). Paged worlds: demo {', '.join(paged_worlds['demo'])}; "
          f"synthetic {len(paged_worlds['synthetic'])} of {max(args.rollouts, len(DEMO))}")
    table(paged, ["rollouts", "pass_share", "repeated", "skipped", "invented", "true_pages_mean"])
    print(f"\n{report['seconds']} s")


if __name__ == "__main__":
    main()
