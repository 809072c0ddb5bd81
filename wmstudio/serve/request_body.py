"""A request body as the served world model reads it: no further than the server's limit (413 past it), then as
JSON within the CLI's limits (world/input_limits.py: 100 levels of nesting, 100-character numbers, no NaN or
Infinity, no lone surrogates), a refusal naming the field it is in: `call.arguments.a.a.a.a` for nesting too deep,
`history[2].x` for a 5,000-digit number, `anchors["a.b"]` for a key holding a lone surrogate."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from fastapi import Request

from wmstudio.problems import InvalidInput, Problem, join_key
from wmstudio.serve.deadlines import BODY_SECONDS
from wmstudio.world.input_limits import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_CHARS,
    InputRefused,
    loads_limited,
    surrogate_message,
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN = re.compile(r'[^"\[\]{},:]+')


class PayloadTooLarge(Exception):
    """A request body over the server's limit (answered 413 before it is parsed)."""


class BodyTooSlow(Exception):
    """A request body that did not arrive within its deadline (answered 408)."""


async def read_body(request: Request, limit: int, seconds: float = BODY_SECONDS) -> bytes:
    """The body, read no further than `limit` bytes (PayloadTooLarge past it) and within `seconds` of the first
    read (BodyTooSlow after)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {int(declared):,} bytes is over this server's limit of {limit:,}")
    chunks, size = [], 0
    deadline = asyncio.get_running_loop().time() + seconds
    stream = request.stream().__aiter__()
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            chunk = await asyncio.wait_for(stream.__anext__(), timeout=max(left, 0.0))
        except StopAsyncIteration:
            break
        except asyncio.TimeoutError:
            raise BodyTooSlow(f"the request body did not arrive within {seconds:.0f} s ({size:,} bytes came): send "
                              "it at once") from None
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over this server's limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(raw: bytes | str) -> Any:
    """A body as JSON within the CLI's limits; InvalidInput naming the field (its JSON path) and the limit."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as err:
        raise InvalidInput(Problem("", f"the body is not UTF-8 text (bad byte at offset {err.start}): send JSON "
                                       "encoded as UTF-8")) from None
    if not text.strip():
        raise InvalidInput(Problem("", "the body is empty: send a JSON object"))
    try:
        return loads_limited(text)
    except InputRefused as err:
        raise InvalidInput(Problem(*_refused_where(text, str(err)))) from None
    except json.JSONDecodeError as err:
        if "is not JSON, write null or a number" in err.msg:  # NaN, Infinity
            path = _marked_path(text) or ""
            raise InvalidInput(Problem(path, err.msg)) from None
        raise InvalidInput(Problem("", f"the body is not JSON (line {err.lineno}, column {err.colno}: {err.msg}): "
                                       "send a JSON object")) from None


def _refused_where(text: str, message: str) -> tuple[str, str]:
    """(path, message) of what `loads_limited` refused in `text`: the field the nesting, the number or the lone
    surrogate is in."""
    if "levels deep" in message or "nested too deeply" in message:
        return _deep_path(text), message
    try:
        value = json.loads(text, parse_int=_Marked.integer, parse_float=_Marked.number, parse_constant=_Marked.word)
    except (ValueError, RecursionError):
        return "", message
    found = _first_refused(value)
    if found is None:
        return "", message
    path, item = found
    return path, (surrogate_message(item) if isinstance(item, str) else message)


def _marked_path(text: str) -> str | None:
    try:
        value = json.loads(text, parse_int=_Marked.integer, parse_float=_Marked.number, parse_constant=_Marked.word)
    except (ValueError, RecursionError):
        return None
    found = _first_refused(value)
    return found[0] if found is not None else None


class _Marked:
    """A number or word JSON input may not hold, left in place of its value so its path can be named."""

    @staticmethod
    def integer(digits: str) -> Any:
        return _Marked() if len(digits) > MAX_NUMBER_CHARS else int(digits)

    @staticmethod
    def number(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            return _Marked()
        value = float(literal)
        return _Marked() if value in (float("inf"), float("-inf")) else value

    @staticmethod
    def word(name: str) -> Any:
        return _Marked()


def _first_refused(value: Any) -> tuple[str, Any] | None:
    """(path, what) of the first value JSON input may not hold: a marked number or word, or text or a key with a
    lone surrogate (what: that text)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Marked):
            return path, item
        if isinstance(item, str) and _SURROGATE.search(item):
            return path, item
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if _SURROGATE.search(key):
                    return join_key(path, key), key
                stack.append((child, join_key(path, key)))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def _deep_path(text: str, shown: int = 6) -> str:
    """The path (its first `shown` parts) at which `text`'s nesting first goes past MAX_JSON_DEPTH, read without
    parsing (strings are skipped whole)."""
    parts: list[str | int] = []
    key: str | None = None
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == '"':
            match = _STRING.match(text, pos)
            if match is None:
                break
            key, pos = match.group(), match.end()
            continue
        if char in "[{":
            parts.append(0 if char == "[" else "?")
            if len(parts) > MAX_JSON_DEPTH:
                break
        elif char in "]}" and parts:
            parts.pop()
        elif char == "," and parts and isinstance(parts[-1], int):
            parts[-1] += 1
        elif char == ":" and parts and isinstance(parts[-1], str):
            parts[-1] = _key(key)
        match = _PLAIN.match(text, pos + 1)
        pos = match.end() if match else pos + 1
    path = ""
    for part in parts[:-1][:shown]:
        path = f"{path}[{part}]" if isinstance(part, int) else join_key(path, part)
    return path


def _key(token: str | None) -> str:
    try:
        return str(json.loads(token)) if token else "?"
    except ValueError:
        return "?"
