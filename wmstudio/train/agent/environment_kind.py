"""What an environment is: its name (the `--env` value), the sentence a user is told of it, what it needs, and who
answers each of an episode's calls. Each environment is one module of train/agent/environment_kinds/, ending with
its `ENVIRONMENT`; the episode loop (train/agent/environments.py) asks it for every answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

WORLD_MODEL = "world-model"  # who answered a call, as EpisodeWorld.answered_by counts it
SIMULATOR = "simulator"


@dataclass
class CallToAnswer:
    """One call of an episode as an environment sees it: the call, the scenario's anchors for it, the simulator's
    answer when the world has one (`truth`, already steered; None without), and `model()`, the world model's answer
    (generated only when asked for)."""

    call: Call
    anchors: list[Anchor]
    truth: Any
    model: Callable[[], str]

    def truth_text(self) -> str:
        """The simulator's answer as the agent reads it (compact JSON)."""
        return json.dumps(self.truth, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class EnvironmentKind:
    """One environment. `answer` writes the response to a call (asking `model()` where the world model answers);
    `source` names who answered the calls that did not reach the world model; `order` places it in the choices."""

    name: str
    help: str
    needs_model: bool
    needs_simulator: bool
    answer: Callable[[CallToAnswer], str]
    source: str = SIMULATOR
    order: int = 100
