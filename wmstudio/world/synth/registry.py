"""Names of synthetic worlds' simulators: `synthetic:<seed>:<index>`.

A world file's `simulator` field and a corpus row's `meta.world` hold such a name; `get_simulator` resolves it
(worlds.py builds the simulator it names), so rows, scenarios and checks rebuild a synthetic world
deterministically from 20-odd characters. `synthetic:<seed>:<index>:shapes` is the same world with the tools of the
shapes the base generator never makes (shapes.py)."""

from __future__ import annotations

import re

PREFIX = "synthetic"
SHAPES = "shapes"
_REF = re.compile(rf"^{PREFIX}:(\d{{1,9}}):(\d{{1,6}})(:{SHAPES})?$")


def synthetic_ref(seed: int, index: int, shapes: bool = False) -> str:
    """The simulator name of world `index` of `seed` (with the shapes' tools when `shapes`)."""
    return f"{PREFIX}:{seed}:{index}" + (f":{SHAPES}" if shapes else "")


def parse_ref(name: object) -> tuple[int, int] | None:
    """(seed, index) when `name` is a synthetic world's simulator name, else None."""
    match = _REF.match(name) if isinstance(name, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def has_shapes(name: object) -> bool:
    """Whether a synthetic world's simulator name asks for the shapes' tools."""
    match = _REF.match(name) if isinstance(name, str) else None
    return bool(match and match.group(3))


def is_synthetic(name: object) -> bool:
    return parse_ref(name) is not None
