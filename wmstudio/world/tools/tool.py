"""The normalised tool: what every importer produces and every other part of wmstudio reads.

One shape for all sources (OpenAI, MCP, BFCL, ToolEmu, tau2, API-Bank, SWE-agent) so nothing downstream
knows where a schema came from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def sanitise_name(name: str) -> str:
    """Make a tool name fit the OpenAI pattern `^[A-Za-z0-9_-]{1,64}$` (`math.factorial` -> `math_factorial`)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name.strip())[:64]
    return cleaned or "tool"


@dataclass
class Tool:
    """A callable tool: `parameters` and `response` are JSON Schema objects (response optional)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    response: dict[str, Any] | None = None
    original_name: str | None = None  # the source's name when it had to be sanitised
    annotations: dict[str, Any] | None = None  # MCP hints (title, readOnlyHint, destructiveHint...), kept as given

    def to_json(self) -> dict[str, Any]:
        """The OpenAI-wrapped form written to world files and by `wmstudio tools import`."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.response is not None:
            function["response"] = self.response
        if self.original_name is not None and self.original_name != self.name:
            function["original_name"] = self.original_name
        if self.annotations is not None:
            function["annotations"] = self.annotations
        return {"type": "function", "function": function}
