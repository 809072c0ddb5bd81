"""Episodes closed-loop: the world model answers each call with its own earlier answers as history, on the five demo
worlds, against the simulators' truth. Prints, per world and overall:

- lookups after writes: every write tool, then a read of what it changed; the share of the read's fields equal to
  the simulator's (per read and over all fields), and the share of reads contradicting the episode's state that
  the checks flag;
- closed-loop episodes (3-6 steps, the simulator's scripted calls, 15% invalid; a record the episode made is named
  to the model by the id the model gave it): Config Match (the change the model's answer predicts, applied to the
  true state, gives the simulator's next state; also counted with new ids as the model named them, since no model
  draws the simulator's random ids; beside it, the state the model's whole episode of answers leaves) split by the size of the true change (failure, none,
  1-2, 3-6, 7+ fields), Feedback Match (the answer's fields equal the simulator's; macro per step) by step depth;
- echo++ (echo+ with every hand-built helper the model uses: train/world_model/baselines.py) played on the same calls, its own
  answers as its history; its status codes learned from 200 simulator steps per world (for generated worlds, of
  those same worlds: more than the model knows of them);
- the same state tracking fed the simulator's own answers (teacher-forced, named `oracle answers`): what the
  deterministic state tracking alone reaches when the answers are right.

    python benchmarks/episode_bench.py --episodes 20 --seed 7
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.baselines import TrainingAnswers, baseline_response
from wmstudio.world.checks.report import check_step
from wmstudio.world.episode.changes import EpisodeState
from wmstudio.world.episode.lookup import SHELL_READS, words
from wmstudio.world.episode.state import apply_step, episode_state
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import json_leaves, needles_of
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, WorldSpec, load_world
from wmstudio.world.tools.reading import read_only

WORLDS = ("retail", "airline", "filesystem", "records", "payments")


def differences(a: Any, b: Any, path: tuple = ()) -> list[tuple]:
    """The paths where two JSON values differ (a list of another length differs as a whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in {*a, *b} for d in (differences(a[key], b[key], path + (key,)) if key in a and key in b
                                               else [path + (key,)])]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [path]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, path + (i,))]
    return [] if a == b and type(a) is type(b) else [path]


def leaves(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    """Every scalar of a JSON value by its path (the free-text `message` left out)."""
    if isinstance(value, dict):
        return {p: v for key, child in value.items() if key != "message" for p, v in leaves(child, path + (key,)).items()}
    if isinstance(value, list):
        return {p: v for i, child in enumerate(value) for p, v in leaves(child, path + (i,)).items()} or {path: []}
    return {path: value}


def field_match(answer_text: str, truth: dict[str, Any]) -> tuple[int, int]:
    """(fields equal to the simulator's, fields the simulator wrote)."""
    try:
        answer = json.loads(answer_text)
    except ValueError:
        answer = None
    want, got = leaves(truth), leaves(answer) if isinstance(answer, (dict, list)) else {}
    return sum(got.get(p, object()) == v for p, v in want.items()), len(want)


def bucket(truth: dict[str, Any], changed: int) -> str:
    if truth.get("status") == "error":
        return "failure"
    return "none" if changed == 0 else "1-2" if changed <= 2 else "3-6" if changed <= 6 else "7+"


def read_after(world: WorldSpec, write: Call) -> Call | None:
    """A read of what `write` changed: a reading tool whose required arguments the write sent (an id it acted on
    before a session's token alone; the first id where it sent a list), or, for a path, a listing of the folder
    holding it (the destination's, after a move)."""
    paths = [value for key, value in write.arguments.items() if isinstance(value, str) and key in PATH_KEYS]
    lister = next((tool for tool in world.tools if tool.name == "ls"), None)
    if paths and lister is not None:
        where = paths[-1].rstrip("/")
        folder = where.rsplit("/", 1)[0] if "/" in where else "."
        return Call("ls", {"path": folder or "/"})
    found = []
    for tool in world.tools:
        if not (read_only(tool) or tool.name in SHELL_READS):
            continue
        required = (tool.parameters or {}).get("required") or []
        sent = {}
        for name in required:
            value = write.arguments.get(name, write.arguments.get(f"{name}s"))
            sent[name] = value[0] if isinstance(value, list) and value else value
        if required and all(isinstance(value, str) and value for value in sent.values()):
            found.append((-len(required), tool.name, sent))
    return Call(min(found)[1], min(found)[2]) if found else None


PATH_KEYS = ("path", "source", "destination", "dest", "target", "dir", "directory")


@dataclass
class Tally:
    """What one group of worlds measured."""

    lookups: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lookup_fields: list[int] = field(default_factory=lambda: [0, 0])
    contradictions: list[int] = field(default_factory=lambda: [0, 0])
    config: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    loose: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    drift: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    oracle: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    depth: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))

    def summary(self) -> dict[str, Any]:
        """The headline figures: state-changing steps exact (and with new ids as the answers named them), the rest,
        answer fields right at step 1 and 4+, lookups after writes (fields), with their counts."""
        changing = [sum(self.config[k][i] for k in ("1-2", "3-6", "7+")) for i in (0, 1)]
        rest = [sum(self.config[k][i] for k in ("failure", "none")) for i in (0, 1)]
        share = lambda part, whole: round(part / whole, 4) if whole else None  # noqa: E731
        return {"state_changing": share(*changing), "state_changing_named": share(
                    sum(self.loose[k][0] for k in ("1-2", "3-6", "7+")), changing[1]),
                "state_changing_steps": changing[1], "rest": share(*rest), "rest_steps": rest[1],
                "step_1": round(_mean(self.depth[1]), 4) if self.depth[1] else None,
                "step_4": round(_mean(self.depth[4]), 4) if self.depth[4] else None,
                "lookups_after_writes": share(*self.lookup_fields), "lookup_fields": self.lookup_fields[1]}

    def report(self, title: str) -> None:
        print(f"\n== {title} ==")
        every = [share for shares in self.lookups.values() for share in shares]
        if every:
            print(f"lookups after writes: {_mean(every):.1%} macro, "
                  f"{self.lookup_fields[0] / max(self.lookup_fields[1], 1):.1%} of {self.lookup_fields[1]} fields, "
                  f"{len(every)} reads; contradicting reads flagged {self.contradictions[0]}/{self.contradictions[1]}")
        for kind in ("failure", "none", "1-2", "3-6", "7+"):
            r, n = self.config[kind]
            if n:
                print(f"Config Match [{kind:>7}]: {r / n:.1%} ({r}/{n}), new ids as the answers named them "
                      f"{self.loose[kind][0] / n:.1%}; whole episode so far {self.drift[kind][0] / n:.1%}; "
                      f"oracle answers {self.oracle[kind][0] / n:.1%}")
        changing = [sum(self.config[k][i] for k in ("1-2", "3-6", "7+")) for i in (0, 1)]
        loose = sum(self.loose[k][0] for k in ("1-2", "3-6", "7+"))
        rest = [sum(self.config[k][i] for k in ("failure", "none")) for i in (0, 1)]
        print(f"Config Match state-changing {changing[0] / max(changing[1], 1):.1%} of {changing[1]} "
              f"({loose / max(changing[1], 1):.1%} with new ids as the answers named them); "
              f"the rest {rest[0] / max(rest[1], 1):.1%} of {rest[1]}")
        for d in sorted(self.depth):
            print(f"Feedback Match step {d}{'+' if d == 4 else ''}: {_mean(self.depth[d]):.1%} "
                  f"(n={len(self.depth[d])})")


def probe_writes(backend: Any, settings: SamplerSettings, world: WorldSpec, sim: Any, rng: random.Random,
                 probes: int, tally: Tally, name: str) -> None:
    """Each write tool in turn, then a read of what it changed, both answered by the model; where the world has a
    sign-in, the model's own sign-in first (its token is the one the write and the read send)."""
    writes = [tool.name for tool in world.tools if not (read_only(tool) or tool.name in SHELL_READS)]
    signs_in = [tool for tool in writes if set(words(tool)) & SIGN_IN_WORDS]
    for probe in range(probes if writes else 0):
        state, history, renamed = world.initial_state, [], {}
        if signs_in:
            login = _drawn(sim, state, rng, signs_in[0])
            after, truth = sim.step(state, login) if login is not None else (state, {"status": "error"})
            if truth.get("status") == "error":
                continue
            answer = generate(backend, world, login, history=[], settings=settings).samples[0].response
            renamed.update(_minted(state, truth, answer))
            history, state = [HistoryStep(login, answer)], after
        wanted = [tool for tool in writes if tool not in signs_in][probe % max(len(writes) - len(signs_in), 1)] \
            if len(writes) > len(signs_in) else None
        call = _drawn(sim, state, rng, wanted) if wanted else None
        if call is None:
            continue
        after, truth = sim.step(state, call)
        made = {key: value for key, value in truth.items() if isinstance(value, str) and value
                and key not in ("status", "error", "message")}  # a record it made is read by its new id
        read = read_after(world, call) or read_after(world, Call(call.name, {**made, **call.arguments}))
        if read is None or truth.get("status") == "error":
            continue
        answer = generate(backend, world, _renamed(call, renamed), history=history, settings=settings).samples[0]
        renamed.update(_minted(state, truth, answer.response))
        history = [*history, HistoryStep(_renamed(call, renamed), answer.response)]
        _, read_truth = sim.step(after, read)
        asked = _renamed(read, renamed)
        read_answer = generate(backend, world, asked, history=history, settings=settings).samples[0].response
        right, total = field_match(_swapped_text(read_answer, {v: k for k, v in renamed.items()}), read_truth)
        tally.lookups[name].append(right / max(total, 1))
        tally.lookup_fields[0] += right
        tally.lookup_fields[1] += total
        report = check_step(world, asked, read_answer, history=history)
        flagged = any("history changed it" in line or "record the call names holds" in line
                      for line in report.invented)
        contradicted = right < total and _contradicts(world, history, asked, read_answer)
        tally.contradictions[0] += contradicted and flagged
        tally.contradictions[1] += contradicted


SIGN_IN_WORDS = frozenset({"login", "signin", "authenticate"}) | {"sign"}  # `login`, `sign_in`


def _drawn(sim: Any, state: Any, rng: random.Random, wanted: str) -> Call | None:
    """A valid call of the tool `wanted` the simulator draws on `state` (None after 200 tries)."""
    for _ in range(200):
        call = sim.valid_call(state, rng)
        if call.name == wanted:
            return call
    return None


def play_episodes(answer_of: Answerer, world: WorldSpec, sim: Any, rng: random.Random, episodes: int,
                  tally: Tally) -> None:
    """Closed-loop episodes of 3-6 steps: the simulator's scripted calls, the answerer's own answers as history."""
    for _ in range(episodes):
        state, model_history, true_history, renamed = world.initial_state, [], [], {}
        for step in range(rng.randint(3, 6)):
            call = sim.valid_call(state, rng) if rng.random() < 0.85 else sim.invalid_call(state, rng)
            after, truth = sim.step(state, call)
            asked = _renamed(call, renamed)  # the agent names a record it made by the id the model gave it
            answer = answer_of(world, asked, model_history)
            renamed.update(_minted(state, truth, answer))
            model_history.append(HistoryStep(asked, answer))
            true_history.append(HistoryStep(call, truth))
            kind = bucket(truth, len(differences(state, after)))
            back = {new: old for old, new in renamed.items()}
            predicted = _one_step(world, state, call, answer)
            tally.config[kind][0] += not differences(predicted, after)
            tally.config[kind][1] += 1
            tally.loose[kind][0] += not differences(_swapped(predicted, back), after)
            tally.loose[kind][1] += 1
            tally.drift[kind][0] += not differences(_swapped(episode_state(world, model_history).state, back), after)
            tally.drift[kind][1] += 1
            tally.oracle[kind][0] += not differences(episode_state(world, true_history).state, after)
            tally.oracle[kind][1] += 1
            right, total = field_match(_swapped_text(answer, back), truth)
            tally.depth[min(step + 1, 4)].append(right / max(total, 1))
            state = after


Answerer = Callable[[WorldSpec, Call, list], str]


def model_answers(backend: Any, settings: SamplerSettings) -> Answerer:
    return lambda world, call, history: generate(backend, world, call, history=history,
                                                 settings=settings).samples[0].response


def echo_answers(answers: TrainingAnswers) -> Answerer:
    """echo++ (train/world_model/baselines.py): echo+ with every hand-built helper the model uses, the same history."""
    return lambda world, call, history: baseline_response("echo_plus_plus", world, call, world.initial_state,
                                                          answers, history)


def training_answers(worlds: list[tuple[WorldSpec, Any]], seed: int) -> TrainingAnswers:
    """What echo++ knows of training: 200 simulator steps of each world, drawn apart from the measured ones."""
    answers, rng = TrainingAnswers(), random.Random(f"train:{seed}")
    for world, sim in worlds:
        state = world.initial_state
        for step in range(200):
            state = world.initial_state if step % 5 == 0 else state
            call = sim.valid_call(state, rng) if rng.random() < 0.8 else sim.invalid_call(state, rng)
            after, truth = sim.step(state, call)
            answers.add(world, call, world.initial_state, json.dumps(truth))
            state = after
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="closed-loop episodes per world")
    parser.add_argument("--writes", type=int, default=10, help="write-then-read probes per world")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--generated", type=int, default=0,
                        help="also this many generated worlds of the seed (themes no fit saw: the seed is new)")
    parser.add_argument("--json", type=Path, help="also write the headline figures here, as docs/headline_table.py "
                                                  "reads them")
    args = parser.parse_args()
    backend, settings = load_backend(), SamplerSettings()
    started = time.time()
    demo, demo_echo = Tally(), Tally()
    worlds = [(load_world(DEMO_WORLDS_DIR / f"{name}.json"), get_simulator(name)) for name in WORLDS]
    echo = echo_answers(training_answers(worlds, args.seed))
    for name, (world, sim) in zip(WORLDS, worlds):
        rng = random.Random(f"{args.seed}:{name}")
        probe_writes(backend, settings, world, sim, rng, args.writes, demo, name)
        play_episodes(model_answers(backend, settings), world, sim, random.Random(f"{args.seed}:{name}:play"),
                      args.episodes, demo)
        play_episodes(echo, world, sim, random.Random(f"{args.seed}:{name}:play"), args.episodes, demo_echo)
        print(f"{name}: lookups after writes {_mean(demo.lookups[name]):.1%} of fields "
              f"(n={len(demo.lookups[name])})", flush=True)
    demo.report("demo worlds: the model")
    demo_echo.report("demo worlds: echo++ on the same calls")
    if args.generated:
        generated, generated_echo = Tally(), Tally()
        made = [get_simulator(f"synthetic:{args.seed}:{index}") for index in range(args.generated)]
        made_worlds = [(sim.world(), sim) for sim in made]
        echo = echo_answers(training_answers(made_worlds, args.seed))  # their tools seen as echo++'s training
        for index, (world, sim) in enumerate(made_worlds):
            rng = random.Random(f"{args.seed}:generated:{index}")
            probe_writes(backend, settings, world, sim, rng, max(1, args.writes // 5), generated, world.name)
            for tally, answer_of in ((generated, model_answers(backend, settings)), (generated_echo, echo)):
                play_episodes(answer_of, world, sim, random.Random(f"{args.seed}:generated:{index}:play"),
                              max(1, args.episodes // 5), tally)
        generated.report(f"{args.generated} generated worlds of seed {args.seed}: the model")
        generated_echo.report(f"{args.generated} generated worlds of seed {args.seed}: echo++ on the same calls")
    print(f"({time.time() - started:.0f} s)")
    if args.json:
        written = {"seed": args.seed, "episodes": args.episodes, "generated_worlds": args.generated,
                   "demo": {"model": demo.summary(), "echo_plus_plus": demo_echo.summary()}}
        if args.generated:
            written["generated"] = {"model": generated.summary(), "echo_plus_plus": generated_echo.summary()}
        args.json.write_text(json.dumps(written, indent=1) + "\n", encoding="utf-8")


def _minted(state: Any, truth: dict[str, Any], answer: str) -> dict[str, str]:
    """{the simulator's new id: the model's} for each id-like answer field the simulator filled with an id the state
    did not hold (a record it made) and the model with another."""
    try:
        said = json.loads(answer)
    except ValueError:
        return {}
    held = {leaf for leaf in json_leaves(state, keys=True) if isinstance(leaf, str)}
    if not isinstance(said, dict) or truth.get("status") == "error":
        return {}
    return {value: said[key] for key, value in truth.items() if isinstance(value, str) and len(value) >= 4
            and value not in held and isinstance(said.get(key), str) and said[key] and said[key] != value
            and (key.endswith(("id", "Id", "token")) or value in needles_of(value, strict=True))}


def _renamed(call: Call, renamed: dict[str, str]) -> Call:
    """`call` with the simulator's ids of records made in this episode replaced by the model's."""
    return Call(call.name, _swapped(call.arguments, renamed)) if renamed else call


def _swapped(value: Any, names: dict[str, str]) -> Any:
    """`value` with every string (and map key) in `names` replaced by its new name."""
    if not names:
        return value
    if isinstance(value, dict):
        return {names.get(k, k): _swapped(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_swapped(v, names) for v in value]
    return names.get(value, value) if isinstance(value, str) else value


def _swapped_text(text: str, names: dict[str, str]) -> str:
    try:
        return json.dumps(_swapped(json.loads(text), names))
    except ValueError:
        return text


def _one_step(world: WorldSpec, state: Any, call: Call, answer: str) -> Any:
    """The true state before a step with the change the model's answer predicts applied (EnvSimBench's Config
    Match compares this with the true next state)."""
    tracked = EpisodeState(copy.deepcopy(state))
    apply_step(tracked, world, call, HistoryStep(call, answer).response_value())
    return tracked.state


def _contradicts(world: WorldSpec, history: list[HistoryStep], read: Call, answer_text: str) -> bool:
    """Whether a read's answer states a field of the record it names other than the episode's state holds (a
    field the history made sure of)."""
    from wmstudio.world.episode.lookup import field_for, named_records

    try:
        answer = json.loads(answer_text)
    except ValueError:
        return False
    tracked = episode_state(world, history)
    found = named_records(tracked.state, read.arguments)
    if not isinstance(answer, dict) or not found or answer.get("status") not in (None, "ok"):
        return False
    path, record = found[0]
    for key, value in answer.items():
        name = field_for(key, record, path) if key not in ("status", "error", "message") else None
        if name is not None and tracked.is_sure(path + (name,)) and not isinstance(value, (dict, list)) \
                and record.get(name) != value:
            return True
    return False


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


if __name__ == "__main__":
    main()
