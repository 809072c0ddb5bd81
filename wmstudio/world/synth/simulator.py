"""The generic simulator: executes any generated world from its blueprint, with the demo simulators' interface.

`initial_state(rng)`, `agent_call(state, rng, invalid)`, `step(state, call, directives)`, `world(initial,
directives)` and `query_state(state, call)` behave as in the five demo worlds (world/sims/base.py), so the corpus,
scenarios and evaluation use a synthetic world exactly like a demo one; only the words differ: argument errors,
unknown tools and injected faults answer in the world's own codes and voice."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Iterable
from typing import Any

from wmstudio.world.rules.cel import Rule
from wmstudio.world.sims.base import JSON, Reply, Simulator, fail, make_tool
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.directives import Directive, steering
from wmstudio.world.synth import agent
from wmstudio.world.synth.blueprint import Blueprint
from wmstudio.world.synth.entities import make_records
from wmstudio.world.synth.handlers import handle, matching, page_window, session_token
from wmstudio.world.synth.messages import say
from wmstudio.world.synth.naming import random_now, stamp
from wmstudio.world.synth.records import shaped, view
from wmstudio.world.synth.rules import world_rules
from wmstudio.world.synth.shapes import ERROR_TEXT
from wmstudio.world.tools import Tool

PASSWORDS = ("Larch-Bay-42!", "c0ral.Reef.7", "quiet#Harbor9", "Tundra_88_fox", "M1ll-Pond-Road")
LARGE_LISTING = (50, 66)  # records of the first listed entity in a large state


class SyntheticSimulator(Simulator):
    """Ground truth for one generated world: its blueprint's tools, rules, records and scripted agent."""

    def __init__(self, blueprint: Blueprint) -> None:
        self.blueprint = blueprint
        self.name = blueprint.ref
        plurals = [e.plural for e in blueprint.entities.values()]
        self.description = (f"Synthetic world {blueprint.index} of seed {blueprint.seed}: the API of "
                            f"{blueprint.domain}, {len(blueprint.tools)} tools over {', '.join(plurals)}.")
        self.task = (f"You work the API of {blueprint.domain} ({blueprint.host}). Look {plurals[1]} and "
                     f"{plurals[0]} up, page through listings completely, and change records only as the rules "
                     "allow." + (f" Sign in first with {blueprint.login['tool']} and the credentials in the "
                                 "environment state." if blueprint.login else ""))
        self.echo_fields = tuple({e.id_key for e in blueprint.entities.values()}
                                 | {key for t in blueprint.tools for role, key in t.params.items()
                                    if role in ("owner", "parent", "source", "target")})
        self.injected_errors = blueprint.transient  # the codes an inject_error directive names in this world
        self._plans = {plan.name: plan for plan in blueprint.tools}
        super().__init__()

    def __getattr__(self, name: str) -> Any:
        """`do_<tool>`: the handler of the tool's family, as the base class's `step` looks it up."""
        plans = self.__dict__.get("_plans", {})
        if name.startswith("do_") and name[3:] in plans:
            plan = plans[name[3:]]
            return lambda state, args, steer: handle(self.blueprint, plan, state, args, steer)
        raise AttributeError(name)

    def tools(self) -> list[Tool]:
        return [make_tool(p.name, p.description, p.parameters, p.response) for p in self.blueprint.tools]

    def rules(self) -> list[Rule]:
        return world_rules(self.blueprint)

    def initial_state(self, rng: random.Random, records: int | None = None) -> JSON:
        """A random state: 2-5 actors, 3-9 records of the first resource and 3-7 of the others (in a share of
        states, or when `records` is given, that many of the first listed resource: a long listing)."""
        bp = self.blueprint
        now = random_now(rng)
        listed = next(t.entity for t in bp.tools if t.family == "search")
        large = records if records is not None else (
            rng.randrange(*LARGE_LISTING) if rng.random() < bp.large_share else None)
        state: JSON = {bp.now_key: stamp(now)}
        targets: dict[str, list[str]] = {}
        for position, entity in enumerate(bp.entities.values()):
            count = rng.randrange(2, 6) if position == 0 else rng.randrange(3, 10 if position == 1 else 8)
            if entity.name == listed and large is not None:
                count = large
            made = make_records(entity, count, rng, now, bp.host, targets)
            targets[entity.name] = [r[entity.id_key] for r in made]
            state[entity.store] = shaped(entity, made)
        if bp.login is not None:
            auth, actor = bp.login, bp.entities[bp.actor]
            first = targets[actor.name][0]
            held = state[actor.store][first] if actor.storage == "map" else state[actor.store][0]
            user = held[actor.fields[1].key] if auth["user"] == bp.style.key("email") else \
                held[actor.label].split()[0].lower() + str(rng.randrange(10, 99))
            state[auth["credentials_key"]] = {auth["user"]: user.lower(), auth["secret"]: rng.choice(PASSWORDS),
                                              actor.id_key: first}
            expired = stamp(now - dt.timedelta(minutes=rng.randrange(5, 600)))
            state[auth["sessions_key"]] = [{auth["token_key"]: session_token(bp, f"old|{rng.random()}"),
                                            auth["expires_key"]: expired}]
        return state

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        return agent.valid_call(self.blueprint, state, rng)

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        return agent.invalid_call(self.blueprint, state, rng)

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        plan = self._plans.get(tool)
        if plan is None or plan.family != "search":
            return None
        size, offset = page_window(self.blueprint, plan, args, steering(()))
        if offset is None:
            return {plan.params["token"]: "does not decode for this search"}
        found = matching(self.blueprint, plan, state, args)
        entity = self.blueprint.entities[plan.entity]
        return {"matching": len(found), "offset": offset,
                "on_page": [view(entity, i, r, plan.view) for i, r in found[offset: offset + size]]}

    def check_auth(self, state: JSON, call: Call) -> Reply | None:
        bp = self.blueprint
        if bp.login is None or call.name == bp.login["tool"] or call.name not in self._plans:
            return None
        auth = bp.login
        token = call.arguments.get(auth["session"]) if isinstance(call.arguments, dict) else None
        voice = bp.style.voice
        if not isinstance(token, str) or not token:
            return fail(bp.codes["no_auth"], say(voice, "no_auth", session=auth["session"]))
        session = next((s for s in state[auth["sessions_key"]] if s[auth["token_key"]] == token), None)
        if session is None:
            return fail(bp.codes["bad_token"], say(voice, "bad_token"))
        if session[auth["expires_key"]] <= state[bp.now_key]:
            return fail(bp.codes["expired"], say(voice, "expired", at=session[auth["expires_key"]]))
        return None

    def auth_failure(self, call: Call) -> Reply:
        bp = self.blueprint
        if bp.login is None:
            return fail("UNAUTHENTICATED", say(bp.style.voice, "no_auth", session="credential"))
        if call.name == bp.login["tool"]:
            return fail(bp.codes["credentials"], say(bp.style.voice, "credentials", user=bp.login["user"],
                                                     secret=bp.login["secret"]))
        return fail(bp.codes["expired"], say(bp.style.voice, "expired", at="an earlier time"))

    def world(self, state: JSON | None = None, directives: Iterable[str] = ()) -> WorldSpec:
        spec = super().world(state if state is not None else self.initial_state(random.Random(0)), directives)
        spec.name = self.blueprint.name
        return spec

    def step(self, state: JSON, call: Call | JSON, directives: Iterable[str | Directive] = ()) -> tuple[JSON, Any]:
        """The base step, with the base's own words (argument errors, unknown tools, rate limits, injected faults)
        said in this world's codes and voice."""
        new_state, response = super().step(state, call, directives)
        call = call if isinstance(call, Call) else Call.from_json(call)
        if response.get("status") == "error":
            self._reword(response, call, directives)
        plan = self._plans.get(call.name)
        if plan is not None and plan.family == "text":  # a text tool writes its reply out as a string
            return new_state, response.get("text", "") if response["status"] != "error" else \
                f"{ERROR_TEXT}{response['message']}"
        return new_state, response

    def _response(self, tool_name: str, reply: Reply) -> JSON:
        """A union's answer is its variant's fields as the record gives them (an error: its three fields alone); a
        text tool's, the reply itself until step writes it out; any other tool's, the base's."""
        plan = self._plans.get(tool_name)
        if plan is None or plan.family not in ("union", "text"):
            return super()._response(tool_name, reply)
        fields = {} if reply.status == "error" else dict(reply.fields)
        return {**fields, "error": reply.error, "message": reply.message, "status": reply.status}

    def _reword(self, response: JSON, call: Call, directives: Iterable[str | Directive]) -> None:
        bp, code, message = self.blueprint, response["error"], response["message"]
        voice = bp.style.voice
        quoted = re.search(r"'([^']+)'", message)
        if code == "MISSING_ARGUMENT":
            response["error"] = bp.codes["missing"]
            response["message"] = say(voice, "missing", name=quoted.group(1) if quoted else "?")
        elif code == "INVALID_ARGUMENT":
            response["error"] = bp.codes["invalid"]
            response["message"] = message.replace("Argument ", bp.codes["argument_word"] + " ", 1)
        elif code == "UNKNOWN_TOOL":
            response["error"] = bp.codes["unknown_tool"]
            response["message"] = say(voice, "unknown_tool", name=call.name)
        elif code == "RATE_LIMITED":
            response["message"] = say(voice, "rate", seconds=bp.retry_seconds)
        elif message == f"The request failed with {code}." and steering(directives).inject_error == code:
            response["message"] = say(voice, "transient", code=code, service=bp.host.split(".")[0])

