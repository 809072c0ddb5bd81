"""Built-in simulated worlds: deterministic ground truth for corpora, checks and the demo world files.

`SIMULATORS` maps each world's name to its simulator; `get_simulator(name)` names the known worlds on a typo."""

from __future__ import annotations

from wmstudio.world.sims.airline import AirlineSimulator
from wmstudio.world.sims.base import Simulator
from wmstudio.world.sims.filesystem import FilesystemSimulator
from wmstudio.world.sims.payments import PaymentsSimulator
from wmstudio.world.sims.records import RecordsSimulator
from wmstudio.world.sims.retail import RetailSimulator

SIMULATORS: dict[str, Simulator] = {
    sim.name: sim
    for sim in (RetailSimulator(), AirlineSimulator(), FilesystemSimulator(), RecordsSimulator(), PaymentsSimulator())
}


def get_simulator(name: str) -> Simulator:
    """The simulator called `name`; KeyError lists the known names."""
    try:
        return SIMULATORS[name]
    except KeyError:
        raise KeyError(f"no simulator named {name!r}; known: {', '.join(SIMULATORS)}") from None


__all__ = ["SIMULATORS", "Simulator", "get_simulator"]
