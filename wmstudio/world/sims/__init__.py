"""Built-in simulated worlds: deterministic ground truth for corpora, checks and the demo world files.

`DEMO_SIMULATORS` holds the five demo worlds' simulators; world/simulators.py looks any simulator up by name,
synthetic worlds' included."""

from __future__ import annotations

from wmstudio.world.sims.airline import AirlineSimulator
from wmstudio.world.sims.base import Simulator
from wmstudio.world.sims.filesystem import FilesystemSimulator
from wmstudio.world.sims.payments import PaymentsSimulator
from wmstudio.world.sims.records import RecordsSimulator
from wmstudio.world.sims.retail import RetailSimulator

DEMO_SIMULATORS: tuple[Simulator, ...] = (RetailSimulator(), AirlineSimulator(), FilesystemSimulator(),
                                          RecordsSimulator(), PaymentsSimulator())

__all__ = ["DEMO_SIMULATORS", "Simulator"]
