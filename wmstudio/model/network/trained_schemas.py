"""The response schemas a world model was trained with, kept for a world that leaves a tool's schema out.

A world imported without response schemas (a copy of a demo world, a tool file that only names the calls) leaves a
tool the model knows with no skeleton, and the small model's free canvas does not write the keys: it was trained
to fill skeletons, and the skeleton it filled for that tool is known. `trained_schemas.json` beside the checkpoint
keeps, per world and tool, the response schema its training rows laid out and the tool's argument names. A tool of
another world, or one whose arguments changed, is not that tool: it gets nothing and falls to the free canvas.
This is a lookup, not something the denoiser learned: it gives the keys and their spans; the values are the
denoiser's and its heads'."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wmstudio.world.spec import Call, WorldSpec

SCHEMAS_FILE = "trained_schemas.json"


def argument_names(world: WorldSpec, tool_name: str) -> list[str] | None:
    """The sorted argument names of `world`'s tool `tool_name` (None: the world has no such tool)."""
    try:
        parameters = world.tool(tool_name).parameters
    except KeyError:
        return None
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return sorted(properties) if isinstance(properties, dict) else []


class TrainedSchemas:
    """Per `world/tool`: the argument names the tool took in training and the response schema it was trained with."""

    def __init__(self, schemas: dict[str, dict[str, Any]]) -> None:
        self.schemas = schemas
        self._key_names: frozenset[str] | None = None

    def schema_for(self, world: WorldSpec, call: Call) -> dict[str, Any] | None:
        """The trained response schema of `call`'s tool in `world` (a copy: canvases edit it), or None when the model
        never trained on this world's tool, or trained on it with other arguments."""
        kept = self.schemas.get(f"{world.name}/{call.name}")
        if kept is None or argument_names(world, call.name) != kept["arguments"]:
            return None
        return copy.deepcopy(kept["schema"])

    @classmethod
    def fit(cls, rows: Iterable[tuple[WorldSpec, Call]]) -> "TrainedSchemas":
        """From the (world, call) of training rows: each called tool's response schema, where the world gives one.
        A tool whose later rows differ in arguments or schema keeps its first rows' (the rest is a namesake)."""
        kept: dict[str, dict[str, Any]] = {}
        for world, call in rows:
            key = f"{world.name}/{call.name}"
            if key in kept:
                kept[key]["rows"] += 1
                continue
            names = argument_names(world, call.name)
            if names is not None and isinstance(world.tool(call.name).response, dict):
                kept[key] = {"arguments": names, "rows": 1, "schema": copy.deepcopy(world.tool(call.name).response)}
        return cls(dict(sorted(kept.items())))

    def save(self, folder: Path, fitted: dict[str, Any] | None = None) -> None:
        """Write the schemas (and what they were kept from) beside a checkpoint in `folder`."""
        document = {"schemas": self.schemas, "fitted": fitted or {}}
        (Path(folder) / SCHEMAS_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")

    def key_names(self) -> frozenset[str]:
        """Every property name of the kept schemas, at any depth: the keys the model's copy head trained on."""
        if self._key_names is not None:
            return self._key_names
        names: set[str] = set()
        stack = [kept["schema"] for kept in self.schemas.values()]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if isinstance(node.get("properties"), dict):
                    names.update(node["properties"])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        self._key_names = frozenset(names)
        return self._key_names

    def __len__(self) -> int:
        return len(self.schemas)


def load_trained_schemas(folder: Path) -> TrainedSchemas | None:
    """The schemas kept beside a checkpoint, or None when the folder has none or an unreadable file."""
    path = Path(folder) / SCHEMAS_FILE
    if not path.exists():
        return None
    try:
        schemas = json.loads(path.read_text(encoding="utf-8")).get("schemas")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(schemas, dict):
        return None
    return TrainedSchemas({key: kept for key, kept in schemas.items() if isinstance(kept, dict)
                           and isinstance(kept.get("schema"), dict) and isinstance(kept.get("arguments"), list)})
