"""How a left-to-right world model honours pinned fields: when the text it has written so far has just named a pinned
field (`{"status`, `, "order": {"status": `, `"items": [{"sku"`), the rest of the key and the pinned value are
written for it, token by token, and generation goes on from there. A field is known by its path (`status`,
`order.status`, `items[0].sku`), read from the text with a small JSON scanner, so a pin is written only at its own
place, never for a same-named key elsewhere.

A string value is written without its closing quote: the model closes it itself, its next token chosen among those
that close a string and go on (`","`, `"}`), since its tokenizer joins a closing quote to what follows and a model
left to choose freely may read the value as a key (`"status":"error":"",...`). Fields after the pin read it; fields
before it were written without it (the left-to-right model's limit, which the masked diffusion model does not have:
its canvas holds every pin from the first step)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from wmstudio.world.jsonpath import format_path, parse_path
from wmstudio.world.steering.anchors import Anchor

CLOSE = -1  # queued after a string value: the next token must close the string
AFTER = -2  # queued after a number or literal: the next token must end the value (`,` `}` `]`)
_CLOSERS: dict[tuple[int, str], torch.Tensor] = {}  # per tokenizer (by id) and kind: the tokens that end a value

# where the text stands at a key (key_opening's phase)
IN_NAME, NAMED, COLON, QUOTE = "name", "named", "colon", "quote"


def path_pins(anchors: Sequence[Anchor]) -> dict[str, str]:
    """The anchors a left-to-right model can be made to write, by canonical path, each value as JSON text."""
    pins = {}
    for anchor in anchors:
        try:
            pins[format_path(parse_path(anchor.path))] = json.dumps(anchor.value, ensure_ascii=False)
        except ValueError:
            continue
    return pins


@dataclass
class _Frame:
    """One open object or array of the text scanned so far."""

    array: bool
    key: str | int | None = None  # the key (or index) of the value being written or next
    expect: str = "key"  # object: key, colon, value, comma; array: value, comma
    seen: set = field(default_factory=set)  # an object's keys written so far

    def items(self) -> int:
        """How many items an array holds so far (one being written counts)."""
        return int(self.key or 0) + (0 if self.expect == "value" else 1)


@dataclass
class _Scan:
    """Where a text stands: its open objects and arrays, whether it ends inside a string (and what the string holds
    so far), and whether a number or literal has begun."""

    stack: list[_Frame]
    inside: bool
    buffer: str
    scalar: bool

    def object_path(self) -> list[str | int] | None:
        """The path of the innermost open object (None when the innermost is an array, or nothing is open)."""
        if not self.stack or self.stack[-1].array:
            return None
        return self.innermost_path()

    def innermost_path(self) -> list[str | int] | None:
        """The path of the innermost open object or array (None when nothing is open or a key is unknown)."""
        if not self.stack or any(frame.key is None for frame in self.stack[:-1]):
            return None
        return [frame.key for frame in self.stack[:-1]]


def scan(text: str) -> _Scan:
    """Read `text` (a JSON value being written) up to its end."""
    stack: list[_Frame] = []
    inside, escaped, buffer, scalar = False, False, [], False
    for char in text:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
                if stack and not stack[-1].array and stack[-1].expect == "key":
                    stack[-1].key, stack[-1].expect = "".join(buffer), "colon"
                    stack[-1].seen.add(stack[-1].key)
                elif stack:
                    stack[-1].expect = "comma"
                continue
            buffer.append(char)
            continue
        if char.isspace():
            scalar = False
            continue
        top = stack[-1] if stack else None
        if char == '"':
            inside, buffer, scalar = True, [], False
        elif char in "{[":
            stack.append(_Frame(array=char == "[", key=0 if char == "[" else None,
                                expect="value" if char == "[" else "key"))
            scalar = False
        elif char in "}]":
            if stack:
                stack.pop()
            if stack:
                stack[-1].expect = "comma"
            scalar = False
        elif char == ":" and top is not None and not top.array:
            top.expect, scalar = "value", False
        elif char == "," and top is not None:
            if top.array:
                top.key, top.expect = int(top.key or 0) + 1, "value"
            else:
                top.key, top.expect = None, "key"
            scalar = False
        elif top is not None and top.expect == "value":
            top.expect, scalar = "comma", True  # a number, true, false or null has begun
    return _Scan(stack, inside, "".join(buffer), scalar)


def closed_value(text: str) -> bool:
    """Whether `text` is an object or array whose outermost bracket has closed (a JSON grammar ends there)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return False
    where = scan(text)
    return not where.stack and not where.inside


def key_opening(text: str) -> tuple[str, str] | None:
    """(path, phase) when `text` ends at a key of an object: inside its name (IN_NAME, the name so far as the path's
    last part), after its closing quote (NAMED), after its colon (COLON) or after a string value's opening quote
    (QUOTE, nothing written inside yet); None anywhere else (inside a value, between fields, outside any object)."""
    where = scan(text)
    parent = where.object_path()
    if parent is None:
        return None
    top = where.stack[-1]
    if where.inside and top.expect == "key":
        phase, last = IN_NAME, where.buffer
    elif where.inside and top.expect == "value" and not where.buffer:
        phase, last = QUOTE, top.key
    elif not where.inside and not where.scalar and top.expect in ("colon", "value"):
        phase, last = (NAMED if top.expect == "colon" else COLON), top.key
    else:
        return None
    return format_path([*parent, last]), phase


@dataclass
class PinWriter:
    """One sample's pins (canonical path -> JSON value text): which are still to be written, and the tokens queued
    to write one."""

    pins: dict[str, str]
    tokenizer: Any
    queued: list[int] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    text: str = ""  # the sample's text as last read (while pins were still to be written)
    chose: bool = False  # the last forced token was the model's choice of how a pinned value ends

    @property
    def pending(self) -> bool:
        """Whether a pin is still to be opened (the text need not be read once all are written)."""
        return not self.queued and len(self.written) < len(self.pins)

    @property
    def reading(self) -> bool:
        """Whether the sample's text must still be read: a pin is left to write, or one is being written."""
        return bool(self.queued) or len(self.written) < len(self.pins)

    def next_forced(self, logits: torch.Tensor) -> int | None:
        """The next token a pin writes (given the model's logits for this sample), or None when the model chooses.
        `chose` says whether the model picked it among the tokens that may end a pinned value."""
        self.chose = False
        if not self.queued:
            return None
        token = self.queued.pop(0)
        if token not in (CLOSE, AFTER):
            return token
        choices = closing_tokens(self.tokenizer) if token == CLOSE else ending_tokens(self.tokenizer)
        self.chose = True
        return int(choices[logits[choices.to(logits.device)].argmax()])

    def _unwritten_under(self, parent: list[str | int]) -> list[list[str | int]]:
        """The paths (as parts) of the pins still to write anywhere under `parent`, in the pins' order."""
        found = []
        for path in self.pins:
            parts = parse_path(path)
            if path not in self.written and len(parts) > len(parent) and parts[:len(parent)] == parent:
                found.append(parts)
        return found

    def _build(self, prefix: list[str | int]) -> Any:
        """The value the unwritten pins under `prefix` make (objects and arrays built from their paths), each
        marked written."""
        own = format_path(prefix)
        if own in self.pins and own not in self.written:  # a pinned value itself
            self.written.add(own)
            return json.loads(self.pins[own])
        value: Any = None
        for parts in self._unwritten_under(prefix):
            self.written.add(format_path(parts))
            rest, leaf = parts[len(prefix):], json.loads(self.pins[format_path(parts)])
            node_holder = [value]
            node, key = node_holder, 0
            for part in rest:
                if node[key] is None:
                    node[key] = [] if isinstance(part, int) else {}
                container = node[key]
                if isinstance(part, int):
                    if not isinstance(container, list):
                        break
                    while len(container) <= part:
                        container.append(None)
                elif not isinstance(container, dict):
                    break
                else:
                    container.setdefault(part, None)
                node, key = container, part
            else:
                node[key] = leaf
            value = node_holder[0]
        return value

    def before_closing(self, text: str, piece: str) -> int | None:
        """When the model's next token (`piece`) would close an object or array that still has pins to write (an
        object's fields it never opened, an array's items past those it wrote), the token to write instead (the rest
        queued): the piece up to its bracket, then those fields or items, built from the pins (a left-to-right model
        reaches its pins no later than the end of what holds them); None to let the token be."""
        if self.queued or len(self.written) == len(self.pins):
            return None
        for closing in [i for i, char in enumerate(piece) if char in "}]"]:  # `}]` closes an item, then its array
            instead = self._fill_before(text, piece[:closing], piece[closing:])
            if instead is not None:
                return instead
        return None

    def before_ending(self, text: str) -> int | None:
        """When the model would end (its end-of-text token) with pins still to write and its JSON still open: the
        token to write instead, those pins then every bracket still open closed; None to let it end."""
        where = scan(text)
        if self.queued or where.inside or not where.stack or len(self.written) == len(self.pins):
            return None
        return self.before_closing(text, "".join("]" if frame.array else "}" for frame in reversed(where.stack)))

    def _fill_before(self, text: str, before: str, rest: str) -> int | None:
        """before_closing at one bracket of the piece (`before`, then `rest` from the bracket on): the token to write
        instead, the pins put between the two, or None."""
        then = scan(text + before)
        path = then.innermost_path()
        if then.inside or path is None or then.stack[-1].array != (rest[0] == "]"):
            return None
        top = then.stack[-1]
        opener = "" if top.expect in ("key", "value") else ","  # just after a bracket or a comma: no comma
        if top.array:
            indices = sorted({parts[len(path)] for parts in self._unwritten_under(path)
                              if isinstance(parts[len(path)], int) and parts[len(path)] >= top.items()})
            parts = [json.dumps(self._build([*path, i]), ensure_ascii=False, separators=(",", ":")) for i in indices]
        else:
            keys = list(dict.fromkeys(parts[len(path)] for parts in self._unwritten_under(path)
                                      if parts[len(path)] not in top.seen))  # a key it opened holds its own
            parts = [json.dumps(key) + ":" + json.dumps(self._build([*path, key]), ensure_ascii=False,
                                                        separators=(",", ":")) for key in keys]
        if not parts:
            return None
        self.queued = list(self.tokenizer.encode(before + opener + ",".join(parts) + rest, add_special_tokens=False))
        return self.queued.pop(0)  # then the model's own close: its tokens join as they would have

    def after(self, text: str) -> None:
        """Read the text written so far; where it has just named a pinned field (or written its colon, or the
        opening quote of its value), queue the rest of the key and the pinned value."""
        self.text = text
        if not self.pending:
            return
        opening = key_opening(text)
        if opening is None or opening[0] not in self.pins or opening[0] in self.written:
            return
        path, phase = opening
        value = self.pins[path]
        if phase == IN_NAME:
            rest = '":' + value
        elif phase == NAMED:
            rest = ":" + value
        elif phase == COLON:
            rest = value
        elif value.startswith('"'):  # QUOTE: the value's opening quote is written already
            rest = value[1:]
        else:
            return  # a quote opened where the pin is not a string: leave it to the model
        closed = value.startswith('"')  # the model closes a string itself, with a token that goes on
        self.queued = list(self.tokenizer.encode(rest[:-1] if closed else rest, add_special_tokens=False))
        self.queued += [CLOSE] if closed else [AFTER] if value[-1] not in "}]" else []
        self.written.add(path)


def ending_tokens(tokenizer: Any) -> torch.Tensor:
    """The ids of the tokens that end a number or literal and go on (`,`, `}`, `],"`...)."""
    if (id(tokenizer), "scalar") not in _CLOSERS:
        found = [index for index in range(len(tokenizer)) if re.match(r"\s*[,}\]]", tokenizer.decode([index]))]
        _CLOSERS[(id(tokenizer), "scalar")] = torch.tensor(found, dtype=torch.long)
    return _CLOSERS[(id(tokenizer), "scalar")]


def closing_tokens(tokenizer: Any) -> torch.Tensor:
    """The ids of the tokens that close a string and go on to the next key or the end (`","`, `",`, `"}`)."""
    if (id(tokenizer), "string") not in _CLOSERS:
        pieces = {index: tokenizer.decode([index]) for index in range(len(tokenizer))}
        found = [index for index, piece in pieces.items() if re.fullmatch(r'"\s*(,\s*"?|})', piece)]
        _CLOSERS[(id(tokenizer), "string")] = torch.tensor(found or [tokenizer.convert_tokens_to_ids('"')],
                                                           dtype=torch.long)
    return _CLOSERS[(id(tokenizer), "string")]
