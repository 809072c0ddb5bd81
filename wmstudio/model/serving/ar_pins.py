"""How a left-to-right world model honours pinned fields: when the text it has written so far has just named a pinned
top-level key (`{"status` or `, "status": `), the rest of the key and the pinned value are written for it, token by
token, and generation goes on from there.

A string value is written without its closing quote: the model closes it itself, its next token chosen among those
that close a string and go on (`","`, `"}`), since its tokenizer joins a closing quote to what follows and a model
left to choose freely may read the value as a key (`"status":"error":"",...`). Fields after the pin read it; fields before it were written without it (the left-to-right model's limit, which the
masked diffusion model does not have: its canvas holds every pin from the first step). Pins of nested paths stay
directives in the prompt only."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from wmstudio.world.steering.anchors import Anchor

CLOSE = -1  # queued after a string value: the next token must close the string
_CLOSERS: dict[int, torch.Tensor] = {}  # per tokenizer (by id): the tokens that close a string and go on


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

    def next_forced(self, logits: torch.Tensor) -> int | None:
        """The next token a pin writes (given the model's logits for this sample), or None when the model chooses."""
        if not self.queued:
            return None
        token = self.queued.pop(0)
        if token != CLOSE:
            return token
        closers = closing_tokens(self.tokenizer)
        return int(closers[logits[closers.to(logits.device)].argmax()])

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
            closed = value.startswith('"')  # the model closes a string itself, with a token that goes on
            self.queued = list(self.tokenizer.encode(rest[:-1] if closed else rest, add_special_tokens=False))
            self.queued += [CLOSE] if closed else []
            self.written.add(key)
            return


def closing_tokens(tokenizer: Any) -> torch.Tensor:
    """The ids of the tokens that close a string and go on to the next key or the end (`","`, `",`, `"}`)."""
    if id(tokenizer) not in _CLOSERS:
        pieces = {index: tokenizer.decode([index]) for index in range(len(tokenizer))}
        found = [index for index, piece in pieces.items() if re.fullmatch(r'"\s*(,\s*"?|})', piece)]
        _CLOSERS[id(tokenizer)] = torch.tensor(found or [tokenizer.convert_tokens_to_ids('"')], dtype=torch.long)
    return _CLOSERS[id(tokenizer)]
