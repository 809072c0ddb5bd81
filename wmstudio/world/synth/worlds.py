"""Synthetic worlds by name: the generic simulator that `synthetic:<seed>:<index>` names (built once from the world's
blueprint), and a folder of world files written from them (`wmstudio worlds synth`)."""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.world.spec import save_world
from wmstudio.world.synth.generate import generate_blueprint
from wmstudio.world.synth.registry import has_shapes, parse_ref, synthetic_ref
from wmstudio.world.synth.simulator import SyntheticSimulator

MAX_WORLDS = 100_000


@lru_cache(maxsize=1024)
def synthetic_simulator(name: str):
    """The generic simulator of the synthetic world `name`; KeyError when `name` is not one."""
    parsed = parse_ref(name)
    if parsed is None:
        raise KeyError(f"{name!r} is not a synthetic world's simulator (synthetic:<seed>:<index>)")
    return SyntheticSimulator(generate_blueprint(*parsed, shapes=has_shapes(name)))


def write_worlds(out: Path, count: int, seed: int, shapes: bool = False) -> dict[str, Any]:
    """Write worlds 0..count-1 of `seed` as `<name>.json` under `out` (with the shapes' tools, `shapes`); return
    what was written.

    Each file is a normal world file (`wmstudio validate` reads it) whose `simulator` names its generator seed and
    index; the same count, seed and shapes write byte-identical files."""
    problems = []
    if not whole_in(count, 1, MAX_WORLDS):
        problems.append(Problem("count", f"must be a whole number from 1 to {MAX_WORLDS:,}, got {count!r}"))
    if not whole_in(seed, 0):
        problems.append(Problem("seed", f"must be a whole number from 0, got {seed!r}"))
    out = Path(out)
    if out.exists() and not out.is_dir():
        problems.append(Problem("out", f"{out} is a file: give a folder for the world files"))
    if problems:
        raise InvalidInput(problems)
    started = time.perf_counter()
    written, tools, rules = [], 0, 0
    for index in range(count):
        simulator = synthetic_simulator(synthetic_ref(seed, index, shapes))
        world = simulator.world()
        path = save_world(world, out / f"{world.name}.json")
        written.append(path.name)
        tools += len(world.tools)
        rules += len(world.rules)
    return {"out": str(out), "seed": seed, "shapes": shapes, "worlds": count, "files": written, "tools": tools,
            "rules": rules, "seconds": round(time.perf_counter() - started, 2)}
