"""Worlds of shapes the world model never trained on: the `:shapes` tools of generated worlds (a lookup by a field
that is not the id, a record with the records it owns, a union answer, a plain-text answer, a listing filtered by a
nested field; world/synth/shapes.py), each answered by the model and by the baselines that get what it gets.

Per call: the world's initial state, the sign-in first where the world has one (its answer in the history, as an
agent signs in), then one call of a shapes tool (three in four valid, the rest an unknown id or value), its truth
the world's simulator. Scored per family and overall, per row (macro) and over every field (value-weighted):
- shape right: the answer is of the truth's kind (text, an object with the same keys at every depth, a list of
  such objects);
- fields right: the truth's leaves the answer holds at the same path, equal (the free-text `message` and a listing's
  next-page token aside: the simulator's token is its own opaque encoding, which no answerer can know);
- text as text: of the calls a text tool answers, those answered with a string;
- and `wmstudio model eval`'s own measures on the same calls (train/world_model/evaluation.py's Rates): values
  copied from the state the prompt shows, numbers printed in the prompt, the simulator's status, rule-consistent
  with that status (over the answers that are objects: a text answer has no status).

    python benchmarks/new_shapes_bench.py --worlds 20 --calls 6 --seed 131
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from typing import Any

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.baselines import TrainingAnswers, baseline_response
from wmstudio.train.world_model.evaluation import EvalCase, Rates
from wmstudio.world.checks.report import check_step
from wmstudio.world.corpus.rows import with_issuing_page
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.synth.agent import MAKERS, login_call, with_session
from wmstudio.world.synth.registry import synthetic_ref

SHAPES = ("find", "owned", "union", "text", "nested")
MEASURES = (("from the state shown", ("field_accuracy", "copy_state")),
            ("numbers printed in the prompt", ("field_accuracy", "number_in_prompt")),
            ("the simulator's status", ("same_status",)), ("rule-consistent, with that status", ("rule_and_status",)))
BASELINES = ("echo", "echo_plus", "echo_plus_plus")


def family(plan: Any) -> str | None:
    """The shape a tool is of, or None for the base generator's tools."""
    if plan.family in SHAPES:
        return plan.family
    return "nested" if plan.family == "search" and any("." in key for _, key in plan.filters) else None


def shape(value: Any) -> Any:
    """What kind of value this is, at every depth: text, a number, an object's keys, a list's item kinds."""
    if isinstance(value, dict):
        return ("object", tuple(sorted((key, shape(child)) for key, child in value.items())))
    if isinstance(value, list):
        return ("list", tuple(sorted({repr(shape(item)) for item in value})))
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text" if isinstance(value, str) else "null"


def same_shape(answer: Any, truth: Any) -> bool:
    """The answer has the truth's shape; a list holding no items has the shape of any list."""
    if isinstance(truth, dict) and isinstance(answer, dict):
        return set(truth) == set(answer) and all(same_shape(answer[key], truth[key]) for key in truth)
    if isinstance(truth, list) and isinstance(answer, list):
        kinds = {repr(shape(item)) for item in truth}
        return not truth or not answer or all(repr(shape(item)) in kinds for item in answer)
    return shape(answer) == shape(truth)


def leaves(value: Any, path: tuple = (), skip: tuple[str, ...] = ("message",)) -> dict[tuple, Any]:
    """Every scalar of a JSON value by its path (the keys `skip` left out; an empty list is one leaf)."""
    if isinstance(value, dict):
        return {p: v for key, child in value.items() if key not in skip
                for p, v in leaves(child, path + (key,), skip).items()}
    if isinstance(value, list):
        return {p: v for i, child in enumerate(value) for p, v in leaves(child, path + (i,), skip).items()} \
            or {path: []}
    return {path: value}


def parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class Tally:
    """One answerer's figures: per family, rows with their right share, fields right and in all, shapes right."""

    def __init__(self) -> None:
        self.rows: dict[str, list[float]] = defaultdict(list)
        self.fields: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.shapes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.text: list[int] = [0, 0]

    def add(self, kind: str, answer_text: str, truth: Any, skip: tuple[str, ...]) -> None:
        answer = parsed(answer_text)
        want, got = leaves(truth, skip=skip), leaves(answer, skip=skip) if answer is not None else {}
        right = sum(p in got and got[p] == v and type(got[p]) is type(v) for p, v in want.items())
        for key in (kind, "all"):
            self.rows[key].append(right / max(len(want), 1))
            self.fields[key][0] += right
            self.fields[key][1] += len(want)
            self.shapes[key][0] += same_shape(answer, truth)
            self.shapes[key][1] += 1
        if isinstance(truth, str):
            self.text[0] += isinstance(answer, str)
            self.text[1] += 1

    def figures(self, kind: str) -> tuple[float, float, float]:
        """(shape right, fields right per row, fields right over every field)."""
        rows, (right, total), (shaped, n) = self.rows[kind], self.fields[kind], self.shapes[kind]
        return shaped / max(n, 1), sum(rows) / max(len(rows), 1), right / max(total, 1)


def calls_of(seed: int, worlds: int, per_tool: int
             ) -> list[tuple[Any, str, Call, list[HistoryStep], Any, tuple[str, ...]]]:
    """(world, family, call, history, truth, keys not scored) for `per_tool` calls of each shapes tool of each
    world."""
    drawn = []
    for index in range(worlds):
        sim = get_simulator(synthetic_ref(seed, index, shapes=True))
        bp, rng = sim.blueprint, random.Random(f"shapes:{seed}:{index}")
        state = sim.initial_state(rng)
        world, history = sim.world(state), []
        if bp.login is not None:
            login = login_call(bp, state)
            state, said = sim.step(state, login)
            history = [HistoryStep(login, json.dumps(said))]
        for plan in bp.tools:
            kind = family(plan)
            for turn in range(per_tool if kind else 0):
                arguments = MAKERS[plan.family](bp, plan, state, rng, rng.random() < 0.75)
                call = Call(plan.name, with_session(bp, plan, state, arguments))
                drawn.append((world, kind, call, with_issuing_page(sim, state, call, history),
                              sim.step(state, call)[1], ("message", plan.out.get("next", "message"))))
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=6, help="calls per shapes tool of each world")
    parser.add_argument("--seed", type=int, default=131, help="the generator seed of the worlds")
    parser.add_argument("--model", default=None, help="a model folder (default: the shipped one)")
    args = parser.parse_args()
    started = time.time()
    backend, settings = load_backend(args.model), SamplerSettings()
    drawn = calls_of(args.seed, args.worlds, args.calls)
    tallies = {name: Tally() for name in ("model", *BASELINES)}
    rates = {name: Rates() for name in tallies}
    known = TrainingAnswers()  # no answer of these tools was ever seen
    for world, kind, call, history, truth, skip in drawn:
        case = EvalCase(world, call, history, json.dumps(truth), world.name)
        sample = generate(backend, world, call, history=history, settings=settings).samples[0]
        tallies["model"].add(kind, sample.response, truth, skip)
        scored = isinstance(truth, dict)  # eval's measures read an object's fields and status; text has neither
        if scored:
            rates["model"].add(sample.checks, sample.response, case)
        for name in BASELINES:
            answer = baseline_response(name, world, call, world.initial_state, known, history)
            tallies[name].add(kind, answer, truth, skip)
            if scored:
                rates[name].add(check_step(world, call, answer, history=history), answer, case)
    print(f"{len(drawn)} calls of the shapes tools of {args.worlds} generated worlds of seed {args.seed} "
          f"({time.time() - started:.0f} s)\n")
    header = "".join(f"{name:>24}" for name in tallies)
    print(f"{'shape right / fields right per row / of all fields':<52}{header}")
    for kind in (*SHAPES, "all"):
        n = len(tallies["model"].rows[kind])
        if n:
            cells = "".join("{:>24}".format("{:.0%} / {:.1%} / {:.1%}".format(*t.figures(kind)))
                            for t in tallies.values())
            print(f"{kind} (n={n}, fields={tallies['model'].fields[kind][1]})".ljust(52) + cells)
    print("text answered as text: " + ", ".join(f"{name} {t.text[0]}/{t.text[1]}" for name, t in tallies.items()))
    title = f"as wmstudio model eval scores them ({rates['model'].total} object answers)"
    print(f"\n{title:<52}" + "".join(f"{name:>24}" for name in rates))
    for measure, path in MEASURES:
        cells = []
        for column in rates.values():
            value: Any = column.to_json()
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            cells.append(f"{value:>24.1%}" if isinstance(value, (int, float)) else f"{'-':>24}")
        print(f"{measure:<52}" + "".join(cells))


if __name__ == "__main__":
    main()
