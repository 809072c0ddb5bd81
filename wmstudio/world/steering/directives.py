"""The fixed steering vocabulary: directives that the built-in simulators obey exactly.

A world may carry any free-text directive for the prompt; only the words below steer a simulator, so
a corpus row's directive and its ground-truth response always agree."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from wmstudio.problems import InvalidInput, Problem

MAX_PAGE_SIZE = 50

DIRECTIVE_VOCABULARY: dict[str, str] = {
    "inject_error": (
        "inject_error: <CODE> - the call fails with error code <CODE> (e.g. inject_error: CARD_DECLINED); "
        "nothing changes and the response carries its neutral values"
    ),
    "empty_result": (
        "empty_result - listings and searches return no items (total 0); looking up one item answers "
        "its not-found error"
    ),
    "page_size": (
        "page_size: <N> - listings and searches return at most N items per page (1-50), whatever the "
        "call asked for; totals stay exact"
    ),
    "rate_limit": "rate_limit - the call is refused with RATE_LIMITED; nothing changes",
    "auth_failure": (
        "auth_failure - the call is refused with the world's authentication error (UNAUTHENTICATED, "
        "or TOKEN_EXPIRED / INVALID_CREDENTIALS where the world has logins); nothing changes"
    ),
    "partial_success": (
        "partial_success - a write that can partly succeed does so (half a refund, half the seats, "
        "half the records, part of a recursive delete) and answers status \"partial\"; other calls "
        "are unaffected"
    ),
    "verbose": "verbose - successful responses also explain themselves in their `message` field",
}

KINDS = tuple(DIRECTIVE_VOCABULARY)
_VALUED = {"inject_error", "page_size"}
_SHAPE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:[:=]\s*(.*?))?\s*$")
_ERROR_CODE = re.compile(r"^[A-Z][A-Z0-9_]{1,47}$")


@dataclass(frozen=True)
class Directive:
    """One vocabulary directive: its kind and, for inject_error / page_size, its value."""

    kind: str
    value: str | int | None = None

    def text(self) -> str:
        """Canonical text, as written into worlds and corpus rows (`page_size: 2`)."""
        return self.kind if self.value is None else f"{self.kind}: {self.value}"


@dataclass(frozen=True)
class Steering:
    """Everything the vocabulary directives of one step ask of a simulator, in one place."""

    inject_error: str | None = None
    empty_result: bool = False
    page_size: int | None = None
    rate_limit: bool = False
    auth_failure: bool = False
    partial_success: bool = False
    verbose: bool = False


def parse_directive(text: str) -> Directive | None:
    """The Directive that `text` names, or None for free text (which steers the prompt only).

    A vocabulary word with a bad value (`page_size: lots`, `inject_error` without a code) raises
    InvalidInput saying what to write instead, because silently ignoring it would surprise the user."""
    if not isinstance(text, str):
        raise InvalidInput(Problem("directives", f"a directive must be text, got {type(text).__name__}"))
    match = _SHAPE.match(text)
    if not match or match.group(1).lower() not in KINDS:
        return None
    kind, value = match.group(1).lower(), match.group(2)
    value = value if value else None
    if kind not in _VALUED:
        if value is not None:
            raise InvalidInput(Problem("directives", f"{kind!r} takes no value: write just `{kind}`"))
        return Directive(kind)
    if value is None:
        example = "inject_error: NOT_FOUND" if kind == "inject_error" else "page_size: 3"
        raise InvalidInput(Problem("directives", f"{kind!r} needs a value: write e.g. `{example}`"))
    if kind == "page_size":
        if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE_SIZE:
            raise InvalidInput(
                Problem("directives", f"page_size {value!r} is not a whole number 1-{MAX_PAGE_SIZE}: e.g. `page_size: 3`")
            )
        return Directive(kind, int(value))
    code = value.strip().upper()
    if not _ERROR_CODE.match(code):
        raise InvalidInput(
            Problem("directives", f"error code {value!r} must be letters, digits and _ (e.g. `inject_error: NOT_FOUND`)")
        )
    return Directive(kind, code)


def parse_directives(texts: Iterable[str | Directive]) -> list[Directive]:
    """The vocabulary directives among `texts` (free text is skipped); Directive objects pass through."""
    found = []
    for item in texts:
        directive = item if isinstance(item, Directive) else parse_directive(item)
        if directive is not None:
            found.append(directive)
    return found


def steering(directives: Iterable[str | Directive]) -> Steering:
    """Fold the directives of one step into a Steering (a later directive of the same kind wins)."""
    fields: dict[str, object] = {}
    for directive in parse_directives(directives):
        fields[directive.kind] = directive.value if directive.kind in _VALUED else True
    return Steering(**fields)
