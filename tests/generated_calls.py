"""Calls on generated worlds for tests: each world's simulator draws them from its own initial state."""

from __future__ import annotations

import random
from typing import Any, Iterator

from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, WorldSpec


def generated_calls(seed: int, worlds: int, per_world: int, invalid: bool = False
                    ) -> Iterator[tuple[WorldSpec, Call, dict[str, Any]]]:
    """(world, call, the simulator's answer) for `per_world` calls on each of generated worlds 0..worlds-1 of
    `seed`; with `invalid`, every other call is an invalid one."""
    for index in range(worlds):
        simulator = get_simulator(f"synthetic:{seed}:{index}")
        world = simulator.world()
        rng = random.Random(index)
        for number in range(per_world):
            draw = simulator.invalid_call if invalid and number % 2 == 0 else simulator.valid_call
            call = draw(world.initial_state, rng)
            _, answer = simulator.step(world.initial_state, call)
            yield world, call, answer
