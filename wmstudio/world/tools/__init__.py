"""Tool schemas: the normalised Tool and the importers from the formats people already have."""

from wmstudio.world.tools.importers import FORMATS, ImportResult, parse_tools
from wmstudio.world.tools.tool import Tool, sanitise_name

__all__ = ["FORMATS", "ImportResult", "Tool", "parse_tools", "sanitise_name"]
