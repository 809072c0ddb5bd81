"""The environments an agent's episode can be played in, one module each, each ending with its `ENVIRONMENT`
(train/agent/environment_kind.py): adding one is adding a file here. The settings' choices and help, the Train tab,
the `--env` options and the checks all read `KINDS`."""

from __future__ import annotations

import importlib
import pkgutil

from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.environment_kind import EnvironmentKind


def _found() -> tuple[EnvironmentKind, ...]:
    """Every module of this folder's ENVIRONMENT, by its `order`."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        made = getattr(importlib.import_module(f"{__name__}.{module.name}"), "ENVIRONMENT", None)
        if isinstance(made, EnvironmentKind):
            found.append(made)
    return tuple(sorted(found, key=lambda kind: (kind.order, kind.name)))


KINDS: dict[str, EnvironmentKind] = {kind.name: kind for kind in _found()}
ENVIRONMENTS = tuple(KINDS)
ENVIRONMENT_HELP = "Who answers the agent's tool calls: " + "; ".join(f"{k.name}: {k.help}" for k in KINDS.values()) \
    + "."


def environment_kind(name: str, field: str = "env") -> EnvironmentKind:
    """The environment named `name`; InvalidInput naming `field` and the choices when there is none."""
    if name not in KINDS:
        raise InvalidInput(Problem(field, f"{name!r} is not an environment: use {', '.join(ENVIRONMENTS)}"))
    return KINDS[name]
