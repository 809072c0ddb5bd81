"""An error's message in the world's own words, for a code no learned template covers: what the tool's description
or a rule says of that code ("Errors: ... FORBIDDEN not the owner; ..." -> "Not the owner"; "ORDER_NOT_FOUND:
unknown order id"; "... only its curator (else FORBIDDEN)"), else plain words for a transient or sign-in failure,
else the code read as words ("Order not found"), followed by the ids the call sent. Never bytes the denoiser made
up for a world it never saw."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.world.spec import Call, WorldSpec

MAX_PHRASE_CHARS = 90
MAX_IDS = 3
PLAIN = {  # failures any service gives, in the words services use
    "RATE_LIMITED": "Too many requests; retry later",
    "RATE_LIMIT_EXCEEDED": "Too many requests; retry later",
    "TOO_MANY_REQUESTS": "Too many requests; retry later",
    "TIMEOUT": "The request timed out",
    "TIMED_OUT": "The request timed out",
    "GATEWAY_TIMEOUT": "The upstream service timed out",
    "DEADLINE_EXCEEDED": "The request took too long",
    "SERVICE_UNAVAILABLE": "The service is unavailable; try again later",
    "UNAVAILABLE": "The service is unavailable; try again later",
    "INTERNAL_ERROR": "An internal error occurred",
    "UNAUTHENTICATED": "Authentication failed",
    "UNAUTHORIZED": "Authentication failed",
    "TOKEN_EXPIRED": "The session token has expired",
    "INVALID_TOKEN": "The token is not valid",
    "INVALID_ARGUMENT": "An argument is not valid",
    "MISSING_ARGUMENT": "A required argument is missing",
}


def composed_message(world: WorldSpec, call: Call, code: str) -> str:
    """The message of an error `code` answering `call`, from the world's own words and the call's ids."""
    phrase = stated_phrase(world, call, code) or PLAIN.get(code) or code.replace("_", " ").lower()
    phrase = phrase.strip().rstrip(".;:,")
    phrase = phrase[:1].upper() + phrase[1:]
    ids = [f"{value}" for key, value in (call.arguments if isinstance(call.arguments, dict) else {}).items()
           if isinstance(value, str) and _names_a_record(key, value)][:MAX_IDS]
    return f"{phrase}: {', '.join(ids)}." if ids else f"{phrase}."


def stated_phrase(world: WorldSpec, call: Call, code: str) -> str | None:
    """What the called tool's description, its response's error description or a rule says of `code`."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    texts = [tool.description or ""] if tool is not None else []
    texts += [_error_description(tool.response)] if tool is not None else []
    texts += [rule.text or "" for rule in world.rules]
    escaped = re.escape(code)
    for text in texts:
        after = re.search(rf"(?<![A-Z_]){escaped}(?![A-Z_])\s*(?:[:=\-–—]\s*|\s+)([^;.()\n]+)", text)
        if after is not None and _words(after.group(1)):
            return after.group(1)[:MAX_PHRASE_CHARS]
        before = re.search(rf"([^;:.()\n]+)\(\s*else\s+{escaped}\s*\)", text)
        if before is not None and _words(before.group(1)):
            return before.group(1)[:MAX_PHRASE_CHARS]
    return None


def _error_description(schema: Any) -> str:
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    error = (properties or {}).get("error") if isinstance(properties, dict) else None
    return error.get("description", "") if isinstance(error, dict) and isinstance(error.get("description"), str) \
        else ""


def _words(text: str) -> bool:
    """Whether `text` reads as words (two letters or more, not another code)."""
    text = text.strip()
    return len(re.findall(r"[a-z]{2,}", text)) >= 1 and not re.fullmatch(r"[A-Z0-9_,\s]+", text)


def _names_a_record(key: str, value: str) -> bool:
    """Whether an argument names a record or a path: an id-like key or value, short enough to quote; never a
    credential (a session token, a password), which no service repeats in its errors."""
    if len(value) > 60 or not value.strip() or re.search(r"token|password|secret|session|api_?key", key, re.I):
        return False
    return bool(re.search(r"(^|_)(id|ids|key|code|number|ref|path|name)$", key, re.IGNORECASE)
                or re.search(r"Id$", key) or re.search(r"\d", value) or value.startswith("/"))
