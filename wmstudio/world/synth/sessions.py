"""Sessions of a synthetic world that has them: a login tool whose token expires after a stated period, and the
session parameter every other tool then requires (a missing, unknown or expired token answers the world's code)."""

from __future__ import annotations

import random
from typing import Any

from wmstudio.world.sims.base import params, response_schema, string
from wmstudio.world.synth import names
from wmstudio.world.synth.blueprint import Blueprint, ToolPlan
from wmstudio.world.synth.naming import RFC3339_PATTERN, IdFormat, period_text
from wmstudio.world.synth.schemas import optional

SESSION_TTLS = (900, 1800, 7200, 28_800, 43_200, 86_400, 604_800)  # never an hour: a demo world's


def draw_login(rng: random.Random, bp: Blueprint) -> dict[str, Any]:
    """The world's sign-in: the tool's and keys' names, the token's format and lifetime, where the state keeps
    the credentials and the sessions."""
    style = bp.style
    prefix = rng.choice(["sess_", "tok-", "st.", "at_", ""])
    kind, length = rng.choice([("prefixed62", 32), ("prefixed62", 24), ("hex", 40), ("hex", 32)])
    token = IdFormat(kind, length, prefix)
    return {"tool": style.key(rng.choice(names.LOGIN_NAMES)), "user": style.key(rng.choice(names.USER_PARAMS)),
            "secret": style.key(rng.choice(names.SECRET_PARAMS)),
            "session": style.key(rng.choice(names.SESSION_PARAMS)),
            "token_key": style.key(rng.choice(["session token", "access token", "token"])),
            "expires_key": style.key(rng.choice(["expires at", "valid until"])), "prefix": prefix, "format": token,
            "pattern": token.pattern(), "ttl": rng.choice(SESSION_TTLS),
            "describe": f"{length} {'hex digits' if kind == 'hex' else 'letters and digits'}",
            "credentials_key": style.key(rng.choice(["credentials", "login", "api user"])),
            "sessions_key": style.key(rng.choice(["sessions", "active sessions"]))}


def login_tool(bp: Blueprint) -> ToolPlan:
    """Sign in with the credentials the state shows: a session token that expires after a stated period."""
    auth = bp.login
    actor = bp.entities[bp.actor]
    fields = {auth["token_key"]: string(f"{auth['prefix']}... ; \"\" on failure",
                                        pattern=optional(auth["pattern"])),
              auth["expires_key"]: string(pattern=optional(RFC3339_PATTERN)), actor.id_key: string()}
    return ToolPlan(
        name=auth["tool"], family="login", entity="",
        description=f"Sign in; the {auth['token_key']} is valid for {period_text(auth['ttl'])}.",
        parameters=params({auth["user"]: string(), auth["secret"]: string()}, [auth["user"], auth["secret"]]),
        response=response_schema(fields), params={"user": auth["user"], "secret": auth["secret"]},
        out={"token": auth["token_key"], "expires": auth["expires_key"], "actor": actor.id_key})


def require_session(bp: Blueprint, plans: list[ToolPlan]) -> None:
    """Every tool but login takes the session token as its first, required parameter."""
    key = bp.login["session"]
    for plan in plans:
        properties = {key: string(f"From {bp.login['tool']}"), **plan.parameters["properties"]}
        plan.parameters = params(properties, [key, *plan.parameters.get("required", [])])
        plan.params["session"] = key
