"""Requests a world refuses before it reads any state, as a real API does: arguments that break the tool's
parameters schema (a missing name, a wrong type, a page size above the maximum: world/tools/arguments.py), and a
page token or cursor that no earlier answer of the episode gave for this query (made up, like `page2`, or taken
from another search). The world's episode knows every token it issued, so a token it never issued names no page:
answering records for it would be inventing them.

The code is the one the world states for that refusal, read from its own words: a rule, the tool's description,
the error field's enum (`a missing argument MISSING_PARAMETER, a malformed one BAD_REQUEST`,
`INVALID_PAGE_TOKEN a page token of another search`); else the request codes any API gives (MISSING_ARGUMENT,
INVALID_ARGUMENT), which every world explains (world/checks/explained_codes.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.world.checks.explained_codes import AUTH_CODES, CODE_WORD, SIGN_IN
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import CREDENTIALS, json_leaves, page_token, pages_or_signs, plain_name
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools import Tool
from wmstudio.world.tools.arguments import argument_error

MISSING, INVALID, TOKEN = "missing", "invalid", "token"  # the kinds of refusal, each with its code
FALLBACK = {MISSING: "MISSING_ARGUMENT", INVALID: "INVALID_ARGUMENT", TOKEN: "INVALID_ARGUMENT"}
CLAUSE = re.compile(r"[;,()\n]|\.\s")  # a rule's or description's clauses: one code and what it is for
REQUEST_NOUNS = {"argument", "arguments", "parameter", "parameters", "params", "param", "request", "input", "field",
                 "one"}  # `a malformed one BAD_REQUEST`: what a request-error code is about (not `MALFORMED_TIME`)


@dataclass(frozen=True)
class Refusal:
    """Why the world refuses a request: the error code, and the message when the refusal itself words it (a bad
    argument's problem; None lets the world's own phrasing for the code be written)."""

    code: str
    message: str | None
    argument: str


def refused_request(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = ()) -> Refusal | None:
    """The refusal of a request the world turns away before reading its state (see the module), or None."""
    tool = next((t for t in world.tools if call.name in (t.name, t.original_name)), None)
    if tool is None or not isinstance(call.arguments, dict):
        return None
    parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
    try:
        problem = argument_error(parameters, call.arguments)
    except (TypeError, ValueError, AttributeError, KeyError):  # a schema outside the subset an API checks
        problem = None
    if problem is not None:
        quoted = re.search(r"'([^']+)'", problem.message)
        argument = quoted.group(1) if quoted else ""
        if signs_in(argument):
            return None  # no session, or a malformed one: the sign-in refuses it first, in the world's own way
        code = refusal_code(world, tool, MISSING if problem.code == "MISSING_ARGUMENT" else INVALID)
        return Refusal(code, problem.message, argument) if code else None
    name = unissued_token(call, history)
    if name is None:
        return None
    code = refusal_code(world, tool, TOKEN)
    return Refusal(code, None, name) if code else None


def unissued_token(call: Call, history: Sequence[HistoryStep]) -> str | None:
    """The page-token argument of `call` whose value no earlier answer gave for this query (the same tool's
    answer to other filters gave it for another search); None when every token it passes was issued for it."""
    for name, value in call.arguments.items():
        if not page_token(name) or not isinstance(value, str) or not value:
            continue
        issued = [step for step in history if value in _strings(step.response_value())]
        if not any(step.call.name != call.name or _query(step.call) == _query(call) for step in issued):
            return name
    return None


def refusal_code(world: WorldSpec, tool: Tool, kind: str) -> str | None:
    """The code `world` states for a refusal of `kind` (the tool's own words first, then the rules, then the other
    tools'); else the request code any API gives; None when the error field's enum admits neither."""
    allowed = _error_enum(tool)
    texts = [tool.description or "", *(rule.text or "" for rule in world.rules),
             *(t.description or "" for t in world.tools if t is not tool)]
    if allowed:
        texts.insert(0, " ; ".join(allowed))
    kinds = (kind, INVALID) if kind in (MISSING, TOKEN) else (kind,)
    for wanted in kinds:
        for text in texts:
            for clause in CLAUSE.split(text):
                for code in CODE_WORD.findall(clause):
                    if (not allowed or code in allowed) and _kind(code, clause) == wanted:
                        return code
    fallback = FALLBACK[kind]
    return fallback if not allowed or fallback in allowed else None


def _kind(code: str, clause: str) -> str | None:
    """What a code is for, by its own words and its clause's: a page token, a missing or a malformed argument."""
    words = set(re.findall(r"[a-z]+", clause.replace(code, " ").lower())) | set(code.lower().split("_"))
    if "cursor" in words or ("token" in words and words & {"page", "search", "next", "query"}):
        return TOKEN
    if words & {"token", "session", "credentials", "password", "key", "auth"}:
        return None  # a sign-in's refusal, not the request's
    if words & {"missing", "required"} and words & REQUEST_NOUNS:
        return MISSING
    if words & {"malformed", "invalid", "bad", "validation"} and words & REQUEST_NOUNS:
        return INVALID
    return None


def signs_in(argument: str) -> bool:
    """Whether an argument carries a sign-in (`session_token`, `sessionToken`, `api_key`), not a page token."""
    plain = plain_name(argument)
    return not page_token(argument) and (SIGN_IN.search(argument) is not None or plain in CREDENTIALS
                                         or plain.endswith(("token", "session", "password", "apikey")))


def sign_in_refusal(code: str | None) -> bool:
    """Whether an error code refuses the caller, not the request (`TOKEN_EXPIRED`, `NOT_SIGNED_IN`): an API checks
    who calls before what they send, so such a refusal comes first."""
    words = set((code or "").lower().split("_"))
    return code in AUTH_CODES or bool(words & {"session", "token", "auth", "login", "signed", "credentials",
                                               "unauthenticated", "unauthorized", "expired"})


def _query(call: Call) -> dict[str, Any]:
    """The part of a list call's arguments a page token belongs to: its filters (not its page, size or token)."""
    return {name: value for name, value in call.arguments.items() if not pages_or_signs(name)} \
        if isinstance(call.arguments, dict) else {}


def _strings(value: Any) -> set[str]:
    return {leaf for leaf in json_leaves(value) if isinstance(leaf, str)}


def _error_enum(tool: Tool) -> list[str]:
    """The codes the tool's response schema lists for its error field, if it lists them."""
    properties = (tool.response or {}).get("properties") if isinstance(tool.response, dict) else None
    error = (properties or {}).get("error") if isinstance(properties, dict) else None
    enum = error.get("enum") if isinstance(error, dict) else None
    return [value for value in enum if isinstance(value, str) and value] if isinstance(enum, list) else []
