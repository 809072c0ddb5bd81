"""Typed settings: a dataclass field that carries everything a door needs to offer it (its label, help text, range,
choices, and what 0 means where 0 is "automatic" or "off"), the one check of a value against it, and the checks of
a value's type and range.

A setting is declared once, in its dataclass: the CLI builds its options from the fields (`wmstudio/cli/options.py`),
the studio its widgets (`wmstudio/ui/forms.py`) and its named API's parameters, and every door reads a form value
with `form_value` and checks it with `setting_problems`. The number checks say yes or no; each caller names the
field and the fix in its own words."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any


def setting(default: Any, help: str, *, label: str = "", low: float | None = None, high: float | None = None,
            choices: tuple[Any, ...] = (), zero: str = "", step: float | None = None) -> Any:
    """A dataclass field with `default` and what the doors show for it: `label`, `help`, the range `low`..`high`,
    the `choices`, and for a field whose None means "automatic" or "off", `zero`: the word for it, which every
    door spells 0 (`--steps 0`, `"steps": 0`, a 0 in the form). `step` makes the studio show a slider."""
    return field(default=default, metadata={"help": help, "label": label, "low": low, "high": high,
                                            "choices": tuple(choices), "zero": zero, "step": step})


@dataclass(frozen=True)
class SettingSpec:
    """One setting as its field declares it: `kind` is whole, number, flag or choice."""

    name: str
    kind: str
    default: Any
    help: str
    label: str
    low: float | None
    high: float | None
    choices: tuple[Any, ...]
    zero: str
    step: float | None

    @property
    def form_default(self) -> Any:
        """The default as a form, the CLI and the API show it: 0 for a None that means `zero`."""
        return 0 if self.default is None and self.zero else self.default

    def describe(self) -> str:
        """The label with what 0 means and the range, as a form shows it: `Steps (0 = automatic, up to 512)`."""
        if self.kind not in ("whole", "number") or self.high is None:
            return self.label
        high = f"{self.high:,}" if self.kind == "whole" else f"{self.high:g}"
        if self.zero:
            return f"{self.label} (0 = {self.zero}, up to {high})"
        if self.high >= 2**31:
            return self.label
        low = f"{self.low:,}" if self.kind == "whole" else f"{self.low:g}"
        return f"{self.label} ({low} to {high})"


def setting_specs(config_type: type) -> list[SettingSpec]:
    """Every field of the dataclass `config_type` as a SettingSpec, in declaration order."""
    hints = typing.get_type_hints(config_type)
    specs = []
    for item in dataclasses.fields(config_type):
        meta = item.metadata
        base = _base_type(hints[item.name])
        kind = "flag" if base is bool else "whole" if base is int else "number" if base is float else "choice" \
            if meta.get("choices") else "text"
        specs.append(SettingSpec(item.name, kind, item.default, meta.get("help", ""), meta.get("label") or
                                 item.name.replace("_", " ").capitalize(), meta.get("low"), meta.get("high"),
                                 tuple(meta.get("choices", ())), meta.get("zero", ""), meta.get("step")))
    return specs


def form_value(spec: SettingSpec, value: Any) -> Any:
    """A value from a form widget, text or JSON as the setting's type (a whole number may come as 2.0 or "2"; 0,
    empty or None is None where 0 means `zero`; empty keeps the default). What cannot be read is passed on as it
    is, for `setting_problems` to name."""
    if spec.zero and value in (None, "", 0):
        return None
    if value is None or value == "":
        return spec.default
    if spec.kind == "whole":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif spec.kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def setting_problems(config: Any) -> list[tuple[str, str]]:
    """(field, what is wrong) for every field of the dataclass instance `config` outside its declaration."""
    found = []
    for spec in setting_specs(type(config)):
        value = getattr(config, spec.name)
        if value is None and (spec.zero or spec.default is None):  # off, automatic, or an optional setting left out
            continue
        problem = _problem(spec, value)
        if problem is not None:
            found.append((spec.name, problem))
    return found


def _problem(spec: SettingSpec, value: Any) -> str | None:
    empty = " (or 0 for " + spec.zero + ")" if spec.zero else ""
    if spec.kind == "flag":
        return None if isinstance(value, bool) else f"must be true or false, got {value!r}"
    if spec.kind == "choice":
        if value in spec.choices:
            return None
        return f"{value!r} is not known: use one of {', '.join(map(str, spec.choices))}"
    if spec.kind == "whole":
        low, high = int(spec.low) if spec.low is not None else None, int(spec.high) if spec.high is not None else None
        if whole_in(value, low, high):
            return None
        return f"must be a whole number{_range(low, high)}{empty}, got {value!r}"
    if spec.kind == "number":
        if number_in(value, spec.low, spec.high) and not (spec.zero and value == 0):
            return None
        return f"must be a number{_range(spec.low, spec.high)}{empty}, got {value!r}"
    return None


def _range(low: float | None, high: float | None) -> str:
    """` from 1 to 64`, ` from 0`, ` up to 9` or nothing, for a range with either end open (whole numbers as they
    are, others as `g` writes them)."""
    text = [(f"{end}" if isinstance(end, int) else f"{end:g}") if end is not None else None for end in (low, high)]
    return (f" from {text[0]}" if text[0] else "") + (f" {'to' if text[0] else 'up to'} {text[1]}" if text[1] else "")


def _base_type(hint: Any) -> Any:
    """`int` of `int | None`; the hint itself otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint


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
