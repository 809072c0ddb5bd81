"""How a left-to-right world model honours pinned fields: when the text it has written so far has just named a pinned
top-level key (`{"status` or `, "status": `), the rest of the key and the pinned value are written for it, token by
token, and generation goes on from there.

Fields after the pin read it; fields before it were written without it (the left-to-right model's limit, which the
masked diffusion model does not have: its canvas holds every pin from the first step). Pins of nested paths stay
directives in the prompt only."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.steering.anchors import Anchor


def top_level_pins(anchors: Sequence[Anchor]) -> dict[str, str]:
    """The anchors a left-to-right model can be made to write: top-level keys, each with its value as JSON text."""
    return {anchor.path: json.dumps(anchor.value, ensure_ascii=False) for anchor in anchors
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", anchor.path)}


def _depth_and_string(text: str) -> tuple[int, bool]:
    """The object/array nesting depth at the end of `text` and whether it ends inside a string."""
    depth, inside, escaped = 0, False, False
    for char in text:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth, inside


@dataclass
class PinWriter:
    """One sample's pins: which are still to be written, and the tokens queued to write one."""

    pins: dict[str, str]
    tokenizer: Any
    queued: list[int] = field(default_factory=list)
    written: set[str] = field(default_factory=set)

    @property
    def pending(self) -> bool:
        """Whether a pin is still to be opened (the text need not be read once all are written)."""
        return not self.queued and len(self.written) < len(self.pins)

    def next_forced(self) -> int | None:
        """The next token a pin writes, or None when the model chooses."""
        return self.queued.pop(0) if self.queued else None

    def after(self, text: str) -> None:
        """Read the text written so far; where it has just written a pinned top-level key's name (or its colon, or
        the opening quote of its value), queue the rest of the key and the pinned value."""
        if not self.pending:
            return
        for key, value in self.pins.items():
            if key in self.written:
                continue
            found = re.search(rf'[{{,]\s*"{re.escape(key)}("\s*:\s*("?))?$', text)
            if found is None:
                continue
            depth, inside = _depth_and_string(text)
            if depth != 1:
                continue
            if found.group(1) is None:  # inside the key's name: close it, then the value
                rest = '":' + value if inside else None
            else:
                opened = found.group(2) == '"'
                rest = (value[1:] if opened else value) if inside == opened and (value[0] == '"' or not opened) \
                    else None
            if rest is None:
                continue
            if value.startswith('"'):  # the model closes the string itself: its tokens join a closing quote to
                rest = rest[:-1]       # what follows (`","`), and a lone quote reads to it as one still open
            self.queued = list(self.tokenizer.encode(rest, add_special_tokens=False))
            self.written.add(key)
            return
