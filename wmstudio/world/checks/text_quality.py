"""Repeated words in a response's text ("refunds close close after 30 days days"): a small model's stutter, counted
so an evaluation can report it beside its other text figures, and a sampler's repetition penalty be judged by it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


def repeated_words(text: str) -> list[str]:
    """Each word that repeats the word just before it, with only spaces between ("close close" -> ["close"]; "days
    days days" -> ["days", "days"]), case aside. "very, very" and "had. Had" do not count: punctuation parts them."""
    found, previous, previous_end = [], None, -1
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word == previous and text[previous_end:match.start()].isspace():
            found.append(word)
        previous, previous_end = word, match.end()
    return found


def response_repeats(response: Any) -> int:
    """Repeated words over every text value of a parsed response (keys and non-text values aside); a response that
    is not JSON is read as one text."""
    return sum(len(repeated_words(text)) for text in _texts(response))


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
