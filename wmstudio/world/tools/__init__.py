"""Tool schemas: the normalised Tool and the importers from the formats people already have."""

from wmstudio.world.tools.detect import detect_format
from wmstudio.world.tools.files import MAX_TOOLS_FILE_BYTES
from wmstudio.world.tools.importers import FORMATS, ImportResult, import_tools_file, parse_tools
from wmstudio.world.tools.tool import Tool, sanitise_name

__all__ = [
    "FORMATS",
    "MAX_TOOLS_FILE_BYTES",
    "ImportResult",
    "Tool",
    "detect_format",
    "import_tools_file",
    "parse_tools",
    "sanitise_name",
]
