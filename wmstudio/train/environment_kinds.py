"""The environments an agent's episode can be played in, declared once: each one's name, what it needs and what a
user is told of it. The settings' choices and help (train/agent_config.py), the Train tab, the `--env` options and
the checks all read this table; the episode loop (train/environments.py) routes a call by it."""

from __future__ import annotations

from dataclasses import dataclass

from wmstudio.problems import InvalidInput, Problem


@dataclass(frozen=True)
class EnvironmentKind:
    """One environment: its `name` (the `--env` value), whether the world model answers every call, none, or only
    the calls a task turns on, and the sentence that says so."""

    name: str
    model_answers: str  # "all", "none" or "tasks" (the state-changing tools the tasks ask for)
    help: str

    @property
    def needs_model(self) -> bool:
        return self.model_answers != "none"

    @property
    def needs_simulator(self) -> bool:
        return self.model_answers != "all"


KINDS = {kind.name: kind for kind in (
    EnvironmentKind("world-model", "all", "the world model answers every call"),
    EnvironmentKind("simulator", "none", "the worlds' exact simulators answer"),
    EnvironmentKind("hybrid", "tasks", "the world model answers the calls a task turns on, the simulators the rest"),
)}
ENVIRONMENTS = tuple(KINDS)
ENVIRONMENT_HELP = "Who answers the agent's tool calls: " + "; ".join(f"{k.name}: {k.help}" for k in KINDS.values()) \
    + "."


def environment_kind(name: str, field: str = "env") -> EnvironmentKind:
    """The environment named `name`; InvalidInput naming `field` and the choices when there is none."""
    if name not in KINDS:
        raise InvalidInput(Problem(field, f"{name!r} is not an environment: use {', '.join(ENVIRONMENTS)}"))
    return KINDS[name]
