"""What a step does to an episode's state: each change (a field set, a record added or removed) and the state
with the changes so far, the fields writes may have changed without saying how marked unsure."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.jsonpath import format_path


@dataclass(frozen=True)
class Change:
    """One predicted change: a field set (`set`), a record or entry added (`add`) or removed (`remove`)."""

    op: str
    path: tuple[str | int, ...]
    before: Any = None
    after: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "path": format_path(list(self.path)), "before": self.before, "after": self.after}


@dataclass
class EpisodeState:
    """The state after a history, each step's changes, and the fields writes may have changed without saying."""

    state: Any
    steps: list[list[Change]] = field(default_factory=list)
    unsure: set[tuple[str | int, ...]] = field(default_factory=set)

    def is_sure(self, path: tuple[str | int, ...]) -> bool:
        """Whether the history says what the field at `path` holds (or no write touched its record)."""
        return tuple(path) not in self.unsure


def set_field(tracked: EpisodeState, path: tuple, record: dict[str, Any], name: str, value: Any) -> list[Change]:
    """Set `record[name]` to `value` (sure from now on); the change, or none when it held that already."""
    tracked.unsure.discard(path + (name,))
    if record.get(name) == value and type(record.get(name)) is type(value):
        return []
    before = record.get(name)
    record[name] = copy.deepcopy(value)
    return [Change("set", path + (name,), before, value)]


def node_at(state: Any, path: tuple[str | int, ...]) -> Any:
    """The node at `path` in `state` itself; None where the path leads nowhere."""
    node = state
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node
