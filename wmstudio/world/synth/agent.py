"""The scripted agent of a synthetic world: the calls a reasonable agent makes (which may still meet a rule) and
the mistakes agents make (unknown ids, broken page tokens, a record in the wrong status, too large an amount, a
time outside the window, someone else's record, a stale session)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import Steering
from wmstudio.world.synth import names
from wmstudio.world.synth.blueprint import JSON, Blueprint, Entity, ToolPlan
from wmstudio.world.synth.handlers import field_at, matching, page_window, search
from wmstudio.world.synth.naming import parse_stamp, stamp, thing_label
from wmstudio.world.synth.records import each

WEIGHTS = {"get": 3, "search": 3, "action": 3, "create": 1.5, "update": 1.2, "delete": 0.8, "transfer": 1,
           "batch": 1, "find": 2, "owned": 2, "union": 2, "text": 2}


def live_token(bp: Blueprint, state: JSON) -> str | None:
    """The newest session token that has not expired, if any."""
    auth = bp.login
    live = [s[auth["token_key"]] for s in state[auth["sessions_key"]] if s[auth["expires_key"]] > state[bp.now_key]]
    return live[-1] if live else None


def _ids(state: JSON, entity: Entity) -> list[str]:
    return [record_id for record_id, _ in each(state, entity)]


def _unknown_id(bp: Blueprint, entity: Entity, state: JSON, rng: random.Random) -> str:
    made = entity.ids.make(rng)
    known = _ids(state, entity)
    roll = rng.random()
    if known and roll < 0.25:
        return known[0].lower() if known[0].lower() != known[0] else known[0][:-1]
    if roll < 0.4:
        return made.removeprefix(entity.ids.prefix) if entity.ids.prefix else made[:-2]
    return made


def _record_id(bp: Blueprint, entity: Entity, state: JSON, rng: random.Random) -> str:
    known = _ids(state, entity)
    return rng.choice(known) if known else _unknown_id(bp, entity, state, rng)


def valid_call(bp: Blueprint, state: JSON, rng: random.Random) -> Call:
    """A call a reasonable agent would make now (it may still meet a precondition)."""
    if bp.login is not None:
        token = live_token(bp, state)
        if token is None or rng.random() < 0.08:
            return login_call(bp, state)
    plans = [t for t in bp.tools if t.family != "login"]
    plan = rng.choices(plans, weights=[WEIGHTS[t.family] for t in plans])[0]
    args = MAKERS[plan.family](bp, plan, state, rng, True)
    return Call(plan.name, with_session(bp, plan, state, args))


def login_call(bp: Blueprint, state: JSON, secret: str | None = None) -> Call:
    auth = bp.login
    held = state[auth["credentials_key"]]
    return Call(auth["tool"], {auth["user"]: held[auth["user"]],
                               auth["secret"]: held[auth["secret"]] if secret is None else secret})


def with_session(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON) -> JSON:
    """`args` with the newest session token (a live one where there is one) first, where the tool takes one."""
    if bp.login is None or "session" not in plan.params:
        return args
    token = live_token(bp, state) or state[bp.login["sessions_key"]][0][bp.login["token_key"]]
    return {plan.params["session"]: token, **args}


def invalid_call(bp: Blueprint, state: JSON, rng: random.Random) -> Call:
    """A mistake of this world: an unknown id, a broken page token, a refused action, a stale session..."""
    if bp.login is not None and rng.random() < 0.25:
        auth = bp.login
        if rng.random() < 0.4:
            return login_call(bp, state, rng.choice(["password1", "letmein", "hunter2!", "Winter2024"]))
        plan = rng.choice([t for t in bp.tools if t.family != "login"])
        args = MAKERS[plan.family](bp, plan, state, rng, True)
        stale = rng.choice([state[auth["sessions_key"]][0][auth["token_key"]], auth["prefix"] + "x9Qk2",
                            "Bearer " + (live_token(bp, state) or "none")])
        return Call(plan.name, {plan.params["session"]: stale, **args})
    plans = [t for t in bp.tools if t.family != "login"]
    plan = rng.choice(plans)
    args = MAKERS[plan.family](bp, plan, state, rng, False)
    return Call(plan.name, with_session(bp, plan, state, args))


# --- arguments per family (`fair`: a reasonable call; else a mistake) -------------------------------------------


def get_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool,
             entity: Entity | None = None) -> JSON:
    """An id of one of `entity`'s records (the tool's own by default), or (unfair) one no record has."""
    make = _record_id if fair else _unknown_id
    return {plan.params["id"]: make(bp, entity or bp.entities[plan.entity], state, rng)}


def search_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    records = [record for _, record in each(state, entity)]
    args: JSON = {}
    for param, key in plan.filters:
        if rng.random() < 0.35:
            field = entity.field(key)
            if records and (field.kind == "ref" or rng.random() < 0.8):
                args[param] = field_at(rng.choice(records), key)
            elif field.kind in ("enum", "status"):  # a nested code or number: no list of values to draw from
                args[param] = rng.choice(field.values)
    if plan.contains[0] and rng.random() < 0.15 and records:
        label = str(rng.choice(records)[plan.contains[1]])
        args[plan.contains[0]] = label.split()[0][: rng.randrange(3, 6)].lower()
    if rng.random() < 0.4:
        args[plan.params["limit"]] = rng.choice([1, 2, 3, 5, 10, plan.default_limit, plan.max_limit])
    if not fair:
        roll = rng.random()
        if roll < 0.5:
            args[plan.params["token"]] = rng.choice(["abc123", "page2", "eyJvZmZzZXQiOjV9", "pt_MTA6ZmZmZmZmZmY"])
        elif roll < 0.75:
            other = search(bp, plan, state, {plan.params["limit"]: 1}, _NO_STEER).fields[plan.out["next"]]
            args[plan.params["token"]] = other or "cursor-0"
            args[plan.filters[0][0] if plan.filters else plan.params["limit"]] = \
                _different(entity, plan, rng) if plan.filters else 2
        else:
            args[plan.params["limit"]] = plan.max_limit + rng.choice([1, 50, 1000])
        return args
    if rng.random() < 0.3:  # continue from the first page, as an agent paging through does
        size, _ = page_window(bp, plan, args, _NO_STEER)
        if size < len(matching(bp, plan, state, args)):
            first = search(bp, plan, state, args, _NO_STEER).fields
            args[plan.params["token"]] = first[plan.out["next"]]
    return args


def _different(entity: Entity, plan: ToolPlan, rng: random.Random) -> Any:
    field = entity.field(plan.filters[0][1])
    return rng.choice(field.values) if field.values else "zz"


def create_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    p = plan.params
    labels = [record[entity.label] for _, record in each(state, entity)]
    args: JSON = {p["label"]: rng.choice(labels) if labels and rng.random() < (0.08 if fair else 0.4)
                  else thing_label(rng)}
    for role in ("owner", "parent"):
        if role in p:
            target = bp.entities[entity.field(p[role]).target]
            args[p[role]] = _record_id(bp, target, state, rng) if fair or rng.random() < 0.5 \
                else _unknown_id(bp, target, state, rng)
    if "price" in p:
        args[p["price"]] = rng.randrange(2, 400) * 100 + rng.choice([0, 50, 95, 99])
    if "quantity" in p and rng.random() < 0.8:
        args[p["quantity"]] = rng.randrange(1, 120)
    for key, schema in plan.parameters["properties"].items():
        if key not in args and "enum" in schema and rng.random() < 0.5:
            args[key] = rng.choice(schema["enum"])
        elif key not in args and schema.get("type") == "boolean" and rng.random() < 0.5:
            args[key] = rng.random() < 0.5
    return args


def update_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    args: JSON = {plan.params["id"]: _record_id(bp, entity, state, rng) if fair or rng.random() < 0.4
                  else _unknown_id(bp, entity, state, rng)}
    if not fair and rng.random() < 0.4:
        return args  # nothing to change
    for key in rng.sample(plan.updatable, rng.randrange(1, len(plan.updatable) + 1)):
        field = entity.field(key)
        if field.kind == "label":
            args[key] = thing_label(rng)
        elif field.kind == "enum":
            args[key] = rng.choice(field.values)
        elif field.kind == "bool":
            args[key] = rng.random() < 0.5
        elif field.kind == "tags":
            args[key] = rng.sample(names.TAGS, rng.randrange(0, 3))
        else:
            args[key] = rng.randrange(field.low, field.high + 1)
    return args


def delete_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    known = fair or rng.random() < 0.6
    record_id = _record_id(bp, entity, state, rng) if known else _unknown_id(bp, entity, state, rng)
    args = {plan.params["id"]: record_id}
    if "owner" in plan.params:
        args[plan.params["owner"]] = _owner_for(bp, entity, state, record_id, rng, right=fair and rng.random() < 0.85)
    return args


def _owner_for(bp: Blueprint, entity: Entity, state: JSON, record_id: str, rng: random.Random, right: bool) -> str:
    actor = bp.entities[entity.field(entity.owner).target]
    record = dict(each(state, entity)).get(record_id)
    actors = _ids(state, actor)
    if right and record is not None:
        return record[entity.owner]
    others = [a for a in actors if record is None or a != record[entity.owner]]
    return rng.choice(others or actors)


def action_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    p = plan.params
    records = list(each(state, entity))
    broken = "" if fair else rng.choice([pre.kind for pre in plan.preconditions] + ["not_found"])
    eligible = [(i, r) for i, r in records if plan.transition is None or r[entity.status] in plan.transition[0]]
    if broken == "status":
        eligible = [(i, r) for i, r in records if r[entity.status] not in plan.transition[0]] or eligible
    pool = eligible if eligible and (not fair or rng.random() < 0.85) else records
    if broken == "not_found" or not pool:
        record_id, record = _unknown_id(bp, entity, state, rng), None
    else:
        record_id, record = rng.choice(pool)
    args: JSON = {p["id"]: record_id}
    if "owner" in p:
        args[p["owner"]] = _owner_for(bp, entity, state, record_id, rng,
                                      right=broken != "owner" and (not fair or rng.random() < 0.92))
    if "when" in p:
        window = next(pre.seconds for pre in plan.preconditions if pre.kind == "window")
        now = parse_stamp(state[bp.now_key])
        inside = broken != "window" and (not fair or rng.random() < 0.92)
        offset = rng.randrange(600, window) if inside else rng.choice([-rng.randrange(3600, 30 * 86_400),
                                                                        window + rng.randrange(3600, 20 * 86_400)])
        args[p["when"]] = stamp((now + dt.timedelta(seconds=offset)).replace(second=0))
        if broken == "window" and rng.random() < 0.3:
            args[p["when"]] = rng.choice(["tomorrow 9am", stamp(now)[:10], "2025-13-01T00:00:00Z"])
    if "amount" in p:
        have = record[entity.quantity] // plan.usage if record is not None else 5
        enough = broken != "quantity" and (not fair or rng.random() < 0.88) and have >= 1
        args[p["amount"]] = rng.randrange(1, min(have, 12) + 1) if enough else have + rng.randrange(1, 8)
    return args


def transfer_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    p = plan.params
    records = list(each(state, entity))
    if len(records) < 2:
        return {p["source"]: _record_id(bp, entity, state, rng), p["target"]: _unknown_id(bp, entity, state, rng),
                p["amount"]: 1}
    (source_id, source), (target_id, _) = rng.sample(records, 2)
    if not fair and rng.random() < 0.3:
        target_id = source_id
    elif not fair and rng.random() < 0.3:
        target_id = _unknown_id(bp, entity, state, rng)
    have = source[entity.quantity]
    enough = (fair and rng.random() < 0.8 and have >= 1)
    return {p["source"]: source_id, p["target"]: target_id,
            p["amount"]: rng.randrange(1, min(have, 40) + 1) if enough else have + rng.randrange(1, 20)}


def batch_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    entity = bp.entities[plan.entity]
    known = _ids(state, entity)
    if fair and known:
        ids = rng.sample(known, min(len(known), rng.randrange(1, 5)))
        if rng.random() < 0.15:
            ids.append(_unknown_id(bp, entity, state, rng))
    else:
        ids = [_unknown_id(bp, entity, state, rng) for _ in range(rng.randrange(1, 3))]
    return {plan.params["ids"]: ids, plan.params["value"]: rng.choice(entity.field(plan.batch_field).values)}


def login_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    return login_call(bp, state, None if fair else "wrong-password").arguments


def find_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    """A value of a record's field as a user types it (its case changed, a phone written another way), or one no
    record holds."""
    entity, key = bp.entities[plan.entity], plan.params["by"]
    values = [record[key] for _, record in each(state, entity) if isinstance(record.get(key), str)]
    if not fair or not values:
        return {key: rng.choice(["nobody@example.org", "555-000-0000", "Unknown Name"])}
    value = rng.choice(values)
    digits = "".join(ch for ch in value if ch.isdigit())
    typed = rng.choice([value, value, value.lower(), value.upper(),
                        f"({digits[:3]}) {digits[3:6]}-{digits[6:]}" if len(digits) == 10 else value])
    return {key: typed}


def union_args(bp: Blueprint, plan: ToolPlan, state: JSON, rng: random.Random, fair: bool) -> JSON:
    return get_args(bp, plan, state, rng, fair, bp.entities[rng.choice(plan.out["kinds"].split(","))])


MAKERS = {"get": get_args, "search": search_args, "create": create_args, "update": update_args,
          "delete": delete_args, "action": action_args, "transfer": transfer_args, "batch": batch_args,
          "login": login_args, "find": find_args, "owned": get_args, "union": union_args, "text": get_args}


_NO_STEER = Steering()  # the agent reads pages as the world serves them by default
