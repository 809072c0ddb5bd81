"""Whether a tool only reads: what the checks, the episode state and the copies ask before treating a call as a
lookup."""

from __future__ import annotations

import re

from wmstudio.world.tools.tool import Tool

READ_VERBS = ("get", "list", "search", "find", "lookup", "read", "show", "fetch", "query", "describe", "view",
              "count", "browse", "retrieve")


def read_only(tool: Tool) -> bool:
    """Whether `tool` only reads: its annotations say so, or its name starts with a reading verb."""
    hints = getattr(tool, "annotations", None) or {}
    if isinstance(hints, dict) and "readOnlyHint" in hints:
        return hints["readOnlyHint"] is True
    first = re.split(r"[_\-.]|(?<=[a-z])(?=[A-Z])", tool.name)[0].lower()
    return first in READ_VERBS
