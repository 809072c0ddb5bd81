"""Which error codes a world can explain at all: those it states (a rule, the error field's enum, a tool's or a
schema's description, an `inject_error` directive), the transient failures any service gives (rate limit, timeout,
outage, a gateway's or an upstream's fault), the request errors any API gives (a bad or missing argument, an unknown tool), and sign-in failures only
where the world has a sign-in (a login tool, a token or key argument, sessions or credentials in the state).

The outcome head chooses a pinned error's code among these, and the checks flag any other, naming it."""

from __future__ import annotations

import re
from typing import Any

from wmstudio.problems import InvalidInput
from wmstudio.world.rules.cel import rule_codes
from wmstudio.world.spec import WorldSpec
from wmstudio.world.steering.directives import Steering, parse_directive, steering
from wmstudio.world.tools.schema import schema_properties

TRANSIENT_CODES = frozenset({"RATE_LIMITED", "RATE_LIMIT_EXCEEDED", "TOO_MANY_REQUESTS", "TIMEOUT", "TIMED_OUT",
                             "GATEWAY_TIMEOUT", "DEADLINE_EXCEEDED", "SERVICE_UNAVAILABLE", "UNAVAILABLE",
                             "TEMPORARILY_UNAVAILABLE", "INTERNAL_ERROR", "INTERNAL", "BAD_GATEWAY", "UPSTREAM_ERROR"})
TRANSIENT_WORDS = re.compile(r"TIMEOUT|TIMED_OUT|UNAVAILABLE|RATE_LIMIT|THROTTL|TEMPORAR|OVERLOAD|BUSY|UPSTREAM|"
                             r"GATEWAY|RETRY|MAINTENANCE|INTERNAL|OUTAGE|DEPENDENCY")  # PAYMENT_GATEWAY_ERROR too
REQUEST_CODES = frozenset({"INVALID_ARGUMENT", "MISSING_ARGUMENT", "BAD_REQUEST", "UNKNOWN_TOOL"})
AUTH_CODES = frozenset({"UNAUTHENTICATED", "UNAUTHORIZED", "AUTH_FAILED", "AUTHENTICATION_FAILED", "TOKEN_EXPIRED",
                        "INVALID_TOKEN", "SESSION_EXPIRED", "INVALID_SESSION", "INVALID_CREDENTIALS",
                        "INVALID_API_KEY", "FORBIDDEN", "PERMISSION_DENIED", "ACCESS_DENIED", "NOT_AUTHORIZED"})
SIGN_IN = re.compile(r"(^|_)(login|log_in|sign_?in|auth|authenticate|token|session|api_?key|password|credentials?|"
                     r"bearer|authorization)($|_)", re.IGNORECASE)
CODE_WORD = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{5,}\b")  # ORDER_NOT_FOUND, FORBIDDEN: codes as prose names them


def stated_codes(world: WorldSpec) -> set[str]:
    """The codes the world itself states: its rules' (by cause or in their text), the enums of the error fields of
    its response schemas, the codes its tools' and schemas' descriptions name, and its `inject_error` directives."""
    stated = {code for rule in world.rules for code in rule_codes(rule)}
    for rule in world.rules:
        stated.update(CODE_WORD.findall(rule.text or ""))
    for tool in world.tools:
        stated.update(CODE_WORD.findall(tool.description or ""))
        for key, node in [("", tool.response or {}), *schema_properties(tool.response)]:
            if isinstance(node.get("description"), str):
                stated.update(CODE_WORD.findall(node["description"]))
            if key in ("error", "error_code", "errorCode", "code") and isinstance(node.get("enum"), list):
                stated.update(v for v in node["enum"] if isinstance(v, str) and v)
    stated.update(injected_codes(world))
    return stated


def injected_codes(world: WorldSpec) -> list[str]:
    """The codes the world's `inject_error` directives name."""
    codes = []
    for text in world.directives:
        try:
            directive = parse_directive(text)
        except InvalidInput:
            continue
        canonical = directive.text() if directive is not None else ""
        if canonical.startswith("inject_error:"):
            codes.append(canonical.split(":", 1)[1].strip())
    return codes


def signs_in(world: WorldSpec) -> bool:
    """Whether the world has a sign-in: a tool for it, a token, key or password a tool takes, or sessions,
    tokens or credentials its state holds."""
    for tool in world.tools:
        if SIGN_IN.search(tool.name) or any(SIGN_IN.search(str(name)) for name in
                                            ((tool.parameters or {}).get("properties") or {})):
            return True
    state = world.initial_state
    return isinstance(state, dict) and any(SIGN_IN.search(str(key)) for key in state)


def explains(world: WorldSpec, code: str) -> bool:
    """Whether the world can explain error `code` (see the module's doc)."""
    if code in stated_codes(world) or code in TRANSIENT_CODES \
            or code in REQUEST_CODES or TRANSIENT_WORDS.search(code):
        return True
    return code in AUTH_CODES and (signs_in(world) or _steered(world).auth_failure)


def _steered(world: WorldSpec) -> Steering:
    """What the world's vocabulary directives ask (`auth_failure` states a sign-in failure), free text aside."""
    try:
        return steering(world.directives)
    except InvalidInput:
        return Steering()


def unexplained_code(world: WorldSpec, response: Any) -> str | None:
    """The check's line for an error code the world cannot explain, naming it; None for any other answer."""
    code = response.get("error") if isinstance(response, dict) else None
    if not isinstance(code, str) or not code.strip() or explains(world, code):
        return None
    why = "the world has no sign-in, so no auth failure" if code in AUTH_CODES else \
        "no rule, error enum or description of the world states it, and it is no transient failure"
    return (f"error: {code!r} is a code the world cannot explain ({why}): pin a code the world states, or state "
            "this one in a rule or the tool's description")
