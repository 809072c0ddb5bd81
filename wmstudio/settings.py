"""Typed settings: a dataclass field that carries its help text, and the checks of a value's type and range.

The CLI builds its options from such fields (`wmstudio/cli/options.py`) and the UI shows the same help, so a setting
is declared once. The checks say yes or no; each caller names the field and the fix in its own words."""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any


def setting(default: Any, help: str) -> Any:
    """A dataclass field with `default` and the `help` text the CLI and the UI show for it."""
    return field(default=default, metadata={"help": help})


def is_whole(value: Any) -> bool:
    """A whole number (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A number (an int or a float, not a bool); `number_in` also asks that it be finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def whole_in(value: Any, low: int | None = None, high: int | None = None) -> bool:
    """A whole number from `low` to `high` (either end open when None)."""
    return is_whole(value) and (low is None or value >= low) and (high is None or value <= high)


def number_in(value: Any, low: float | None = None, high: float | None = None, *, above: float | None = None,
              below: float | None = None) -> bool:
    """A finite number from `low` to `high` inclusive, and strictly `above` / `below` those bounds when given."""
    return (is_number(value) and math.isfinite(value) and (low is None or value >= low)
            and (high is None or value <= high) and (above is None or value > above)
            and (below is None or value < below))
