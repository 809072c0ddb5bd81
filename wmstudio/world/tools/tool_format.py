"""What a tool-file format is to the importer: its name, how an entry in it looks (for detection and messages),
and the parser that reads one entry into normalised Tools.

Each format is one module under world/tools/formats/ that ends with a `FORMAT = ToolFormat(...)`; the folder is
read when it is imported (formats/__init__.py), so a new format is one module there and its test: detection,
parsing, `--format`, the CLI's help and the World tab's list all follow from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wmstudio.world.tools.findings import Findings
from wmstudio.world.tools.tool import Tool


@dataclass(frozen=True)
class ToolFormat:
    """One tool-file format.

    `looks_like(entry)` recognises one entry (a dict) by its keys; formats are tried by ascending `order`, so a
    telling key (`inputSchema`) is asked about before a common one (`function`). `parse(entry, path, findings)`
    reads it. `also_reads` names formats whose entries this parser reads too (OpenAI's reads BFCL's), and
    `function_docs` says its entries may be BFCL question or task records to expand."""

    name: str
    sign: str
    order: int
    looks_like: Callable[[dict[str, Any]], bool]
    parse: Callable[[Any, str, Findings], list[Tool]]
    also_reads: tuple[str, ...] = ()
    function_docs: bool = False
