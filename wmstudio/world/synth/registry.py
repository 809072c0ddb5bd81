"""Names of synthetic worlds' simulators: `synthetic:<seed>:<index>`.

A world file's `simulator` field and a corpus row's `meta.world` hold such a name; `get_simulator` resolves it
(worlds.py builds the simulator it names), so rows, scenarios and checks rebuild a synthetic world
deterministically from 20-odd characters."""

from __future__ import annotations

import re

PREFIX = "synthetic"
_REF = re.compile(rf"^{PREFIX}:(\d{{1,9}}):(\d{{1,6}})$")


def synthetic_ref(seed: int, index: int) -> str:
    """The simulator name of world `index` of `seed`."""
    return f"{PREFIX}:{seed}:{index}"


def parse_ref(name: object) -> tuple[int, int] | None:
    """(seed, index) when `name` is a synthetic world's simulator name, else None."""
    match = _REF.match(name) if isinstance(name, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def is_synthetic(name: object) -> bool:
    return parse_ref(name) is not None
