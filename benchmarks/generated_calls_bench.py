"""Exceptions on generated worlds: N calls (valid and invalid, the simulators' own draws) on generated worlds of a
seed, and on each world's listing tools the same worlds with every collection grown to 220 records and the page
size asked as large as the tool allows (or 200). Prints how many calls ended in an exception (by type; a refusal
of bad input, InvalidInput, counts too), how many listings were cut as an API pages them, and how many listing
answers hold a record the call's filter excludes or one record twice (world/checks/invention.py's listing_slips).

    python benchmarks/generated_calls_bench.py --calls 1000 --seed 58
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.invention import listing_slips
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.reading import read_only
from wmstudio.world.tools.schema import listed_property

GROWN = 220
SIZE_WORDS = ("limit", "size", "max", "per_page", "perpage", "count")


def grown(world: WorldSpec) -> WorldSpec:
    """`world` with every list of records in its state grown to GROWN records (copies with fresh ids: the record's
    own id field, else its first text with a digit)."""
    state = copy.deepcopy(world.initial_state)
    for key, value in list(state.items()) if isinstance(state, dict) else []:
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            base = list(value)
            while len(value) < GROWN:
                record = copy.deepcopy(base[len(value) % len(base)])
                name = next((name for name, field in record.items() if isinstance(field, str)
                             and (name.lower() == "id" or name.lower().endswith(("_id", "id")))), None)
                name = name or next((name for name, field in record.items() if isinstance(field, str)
                                     and any(ch.isdigit() for ch in field)), None)
                if name is not None:  # the copy's own id: a grown collection holds each record once
                    record[name] = f"{record[name]}x{len(value)}"
                value.append(record)
    return replace(world, initial_state=state)


def page_call(tool: Any) -> Call:
    """A call of a listing tool asking for its largest page."""
    properties = (tool.parameters or {}).get("properties") or {}
    for name, schema in properties.items():
        if any(word in name.lower() for word in SIZE_WORDS) and isinstance(schema, dict) \
                and schema.get("type") == "integer":
            return Call(tool.name, {name: int(schema.get("maximum", 200))})
    return Call(tool.name, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--worlds", type=int, default=40)
    args = parser.parse_args()
    backend, settings, rng = load_backend(), SamplerSettings(), random.Random(args.seed)
    failures: Counter[str] = Counter()
    made = paged = listings = listed = slipped = 0
    slips: list[str] = []
    started = time.time()
    per_world = max(1, args.calls // args.worlds)
    for index in range(args.worlds):
        simulator = get_simulator(f"synthetic:{args.seed}:{index}")
        world = simulator.world()
        calls = [simulator.valid_call(world.initial_state, rng) if rng.random() < 0.7
                 else simulator.invalid_call(world.initial_state, rng) for _ in range(per_world)]
        big = grown(world)
        listers = [t for t in world.tools if read_only(t) and listed_property(t.response) is not None]
        jobs = [(world, call) for call in calls] + [(big, page_call(tool)) for tool in listers]
        for target, call in jobs:
            made += 1
            try:
                answer = json.loads(generate(backend, target, call, settings=settings).samples[0].response)
            except Exception as err:  # noqa: BLE001 - counting them is the point
                failures[type(err).__name__] += 1
                continue
            tool = next((t for t in target.tools if t.name == call.name), None)
            if tool is not None and read_only(tool) and listed_property(tool.response) is not None:
                listed += 1
                found = listing_slips(call, answer)
                slipped += bool(found)
                slips += [f"{call.name} {json.dumps(call.arguments)}: {found[0]}"] if found else []
            if target is big:
                listings += 1
                key = listed_property(target.tool(call.name).response)[0]
                items = answer.get(key) if isinstance(answer, dict) else None
                paged += isinstance(items, list) and 0 < len(items) < GROWN and answer.get("status") == "ok"
    print(f"{made} generated calls on {args.worlds} worlds of seed {args.seed} ({listings} of them listings over "
          f"{GROWN} records): {sum(failures.values())} exceptions {dict(failures)}; {paged} listings answered a "
          f"page of fewer records than match; {time.time() - started:.0f} s")
    print(f"{listed} listing answers: {slipped} hold a record the call's filter excludes or one record twice")
    for line in slips[:10]:
        print("  " + line)


if __name__ == "__main__":
    main()
