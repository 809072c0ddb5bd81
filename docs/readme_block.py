"""A generated block of README.md: the text between two HTML-comment markers, read back or written in place, for the
scripts that write the README's tables from the figures they were measured as (docs/quality_table.py,
docs/headline_table.py)."""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def between(text: str, start: str, end: str) -> str:
    """What stands between the markers in `text` (ValueError when they are missing)."""
    return text[text.index(start) + len(start):text.index(end)].strip("\n")


def update(table: str, start: str, end: str, check: bool, readme: Path = README) -> int:
    """Write `table` between the README's markers, or with `check` only compare: 1 (said on stderr) when the README's
    block is out of date or has no markers, else 0."""
    text = readme.read_text(encoding="utf-8")
    if start not in text or end not in text:
        print(f"{readme.name} has no {start} ... {end} block", file=sys.stderr)
        return 1
    if check:
        if between(text, start, end) != table:
            print(f"{readme.name}'s block {start} is out of date: run the script that writes it", file=sys.stderr)
            return 1
        return 0
    head, rest = text.split(start, 1)
    readme.write_text(f"{head}{start}\n{table}\n{end}{rest.split(end, 1)[1]}", encoding="utf-8")
    return 0
