"""Every simulator by name: the five demo worlds' (world/sims) and each generated world's (world/synth).

`SIMULATORS` maps each demo world's name to its simulator (iterating it lists the five demo worlds); looking a
synthetic world's simulator name up in it (`synthetic:<seed>:<index>`) builds that world's generic simulator, so
every reader of a world's `simulator` field handles generated worlds too. `get_simulator(name)` names the known
worlds on a typo."""

from __future__ import annotations

from wmstudio.world.sims import DEMO_SIMULATORS, Simulator
from wmstudio.world.synth.worlds import synthetic_simulator


class SimulatorRegistry(dict):
    """The demo simulators by name; `[name]` and `.get(name)` also resolve synthetic worlds' simulator names."""

    def __missing__(self, name: str) -> Simulator:
        return synthetic_simulator(name)

    def get(self, name, default=None):
        try:
            return self[name]
        except (KeyError, TypeError):
            return default


SIMULATORS: dict[str, Simulator] = SimulatorRegistry((sim.name, sim) for sim in DEMO_SIMULATORS)


def get_simulator(name: str) -> Simulator:
    """The simulator called `name`; KeyError lists the known names."""
    try:
        return SIMULATORS[name]
    except KeyError:
        raise KeyError(f"no simulator named {name!r}; known: {', '.join(SIMULATORS)} and synthetic:<seed>:<index>"
                       ) from None
