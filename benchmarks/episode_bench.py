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
from typing import Any

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.backends import load_backend
from wmstudio.model.generation import generate
from wmstudio.model.sampler import SamplerSettings
from wmstudio.world.checks.report import check_step
from wmstudio.world.episode_state import SHELL_READS, EpisodeState, apply_step, episode_state
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
    """A read of what `write` changed: a reading tool whose required argument the write sent (its first id where it
    sent a list), or, for a path, a listing of the folder holding it."""
    for tool in world.tools:
        if not (read_only(tool) or tool.name in SHELL_READS):
            continue
        required = (tool.parameters or {}).get("required") or []
        if len(required) != 1:
            continue
        name = required[0]
        value = write.arguments.get(name, write.arguments.get(f"{name}s"))
        value = value[0] if isinstance(value, list) and value else value
        if isinstance(value, str) and value.startswith("/") and tool.name == "ls":
            return Call(tool.name, {name: value.rsplit("/", 1)[0] or "/"})
        if isinstance(value, str) and not value.startswith("/"):
            return Call(tool.name, {name: value})
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="closed-loop episodes per world")
    parser.add_argument("--writes", type=int, default=10, help="write-then-read probes per world")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    backend, settings = load_backend(), SamplerSettings()
    started = time.time()
    lookups: dict[str, list[float]] = defaultdict(list)
    lookup_fields = [0, 0]
    contradictions = [0, 0]
    config: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    oracle: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    drift: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    loose: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    depth: dict[int, list[float]] = defaultdict(list)
    for name in WORLDS:
        world, sim = load_world(DEMO_WORLDS_DIR / f"{name}.json"), get_simulator(name)
        rng = random.Random(f"{args.seed}:{name}")
        writes = [tool.name for tool in world.tools if not (read_only(tool) or tool.name in SHELL_READS)]
        for probe in range(args.writes):  # lookups after writes
            wanted, call = writes[probe % len(writes)], None
            for _ in range(200):
                call = sim.valid_call(world.initial_state, rng)
                if call.name == wanted:
                    break
            read = read_after(world, call) if call is not None and call.name == wanted else None
            if read is None:
                continue
            after, truth = sim.step(world.initial_state, call)
            if truth.get("status") == "error":
                continue
            answer = generate(backend, world, call, history=[], settings=settings).samples[0].response
            history = [HistoryStep(call, answer)]
            _, read_truth = sim.step(after, read)
            read_answer = generate(backend, world, read, history=history, settings=settings).samples[0].response
            right, total = field_match(read_answer, read_truth)
            lookups[name].append(right / max(total, 1))
            lookup_fields[0] += right
            lookup_fields[1] += total
            report = check_step(world, read, read_answer, history=history)
            flagged = any("history changed it" in line or "record the call names holds" in line
                          for line in report.invented)
            contradicted = right < total and _contradicts(world, history, read, read_answer)
            contradictions[0] += contradicted and flagged
            contradictions[1] += contradicted
        for _ in range(args.episodes):  # closed-loop episodes
            state, model_history, true_history, renamed = world.initial_state, [], [], {}
            for step in range(rng.randint(3, 6)):
                call = sim.valid_call(state, rng) if rng.random() < 0.85 else sim.invalid_call(state, rng)
                after, truth = sim.step(state, call)
                asked = _renamed(call, renamed)  # the agent names a record it made by the id the model gave it
                answer = generate(backend, world, asked, history=model_history, settings=settings).samples[0].response
                renamed.update(_minted(state, truth, answer))
                model_history.append(HistoryStep(asked, answer))
                true_history.append(HistoryStep(call, truth))
                kind = bucket(truth, len(differences(state, after)))
                back = {new: old for old, new in renamed.items()}
                config[name][kind][0] += not differences(_one_step(world, state, call, answer), after)
                config[name][kind][1] += 1
                loose[kind][0] += not differences(_swapped(_one_step(world, state, call, answer), back), after)
                loose[kind][1] += 1
                drift[kind][0] += not differences(_swapped(episode_state(world, model_history).state, back), after)
                drift[kind][1] += 1
                oracle[kind][0] += not differences(episode_state(world, true_history).state, after)
                oracle[kind][1] += 1
                right, total = field_match(_swapped_text(answer, back), truth)
                depth[min(step + 1, 4)].append(right / max(total, 1))
                state = after
        print(f"{name}: lookups after writes {_mean(lookups[name]):.1%} of fields (n={len(lookups[name])}); "
              f"Config Match " + ", ".join(f"{k} {r}/{n}" for k, (r, n) in sorted(config[name].items())), flush=True)
    print("\n== all worlds ==")
    every = [share for shares in lookups.values() for share in shares]
    print(f"lookups after writes: {_mean(every):.1%} macro, {lookup_fields[0] / max(lookup_fields[1], 1):.1%} of "
          f"{lookup_fields[1]} fields, {len(every)} reads; contradicting reads flagged {contradictions[0]}/"
          f"{contradictions[1]}")
    for kind in ("failure", "none", "1-2", "3-6", "7+"):
        r = sum(config[w][kind][0] for w in config)
        n = sum(config[w][kind][1] for w in config)
        o = oracle[kind]
        if n:
            print(f"Config Match [{kind:>7}]: model {r / n:.1%} ({r}/{n}), new ids as the model named them "
                  f"{loose[kind][0] / n:.1%}; whole episode so far {drift[kind][0] / n:.1%}; oracle answers "
                  f"{o[0] / o[1]:.1%}")
    changing_loose = sum(loose[k][0] for k in ("1-2", "3-6", "7+"))
    changing = [sum(config[w][k][i] for w in config for k in ("1-2", "3-6", "7+")) for i in (0, 1)]
    rest = [sum(config[w][k][i] for w in config for k in ("failure", "none")) for i in (0, 1)]
    print(f"Config Match state-changing {changing[0] / max(changing[1], 1):.1%} of {changing[1]} "
          f"({changing_loose / max(changing[1], 1):.1%} with new ids as the model named them); "
          f"the rest {rest[0] / max(rest[1], 1):.1%} of {rest[1]}")
    for d in sorted(depth):
        print(f"Feedback Match step {d}{'+' if d == 4 else ''}: {_mean(depth[d]):.1%} (n={len(depth[d])})")
    print(f"({time.time() - started:.0f} s)")


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
    from wmstudio.world.episode_state import field_for, named_records

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
