"""The tool-file formats, one module each, each ending with its `FORMAT` (world/tools/tool_format.py).

`TOOL_FORMATS` holds them in the order detection tries them; `FORMATS` is what `--format` and the World tab
offer: `auto`, then every format's name."""

from __future__ import annotations

import importlib
import pkgutil

from wmstudio.world.tools.tool_format import ToolFormat


def _found() -> tuple[ToolFormat, ...]:
    """Every module of this folder's FORMAT, by its `order`."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        made = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FORMAT", None)
        if isinstance(made, ToolFormat):
            found.append(made)
    return tuple(sorted(found, key=lambda fmt: fmt.order))


TOOL_FORMATS: tuple[ToolFormat, ...] = _found()
BY_NAME: dict[str, ToolFormat] = {fmt.name: fmt for fmt in TOOL_FORMATS}
FORMATS: tuple[str, ...] = ("auto", *BY_NAME)
