"""What each tool family does to a synthetic world's state: the generic simulator's handlers.

Each handler gets the blueprint, the tool's plan, a copy of the state it may change, the call's (already
schema-checked) arguments and the steering, and answers a Reply; preconditions are checked in the plan's order and
each failing one answers its named code with nothing changed."""

from __future__ import annotations

import datetime as dt
import random

from wmstudio.world.records import normalised
from wmstudio.world.sims.base import OK, PARTIAL, Reply, fail
from wmstudio.world.steering.directives import Steering
from wmstudio.world.synth import formulas
from wmstudio.world.synth.blueprint import JSON, Blueprint, Entity, ToolPlan
from wmstudio.world.synth.entities import value_of
from wmstudio.world.synth.messages import say
from wmstudio.world.synth.naming import parse_stamp, period_text, slug, stamp
from wmstudio.world.synth.records import (
    count,
    decode_token,
    each,
    encode_token,
    find,
    fingerprint,
    insert,
    remove,
    view,
)


def handle(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    return FAMILIES[plan.family](bp, plan, state, args, steer)


def _now(bp: Blueprint, state: JSON) -> dt.datetime:
    return parse_stamp(state[bp.now_key])


def _words(bp: Blueprint, entity: Entity) -> dict[str, str]:
    return {"entity": entity.name, "plural": entity.plural, "actor": bp.actor}


def _missing(bp: Blueprint, plan: ToolPlan, entity: Entity, record_id: object) -> Reply:
    return fail(plan.errors["not_found"], say(bp.style.voice, "not_found", id=record_id, **_words(bp, entity)))


def _named(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering
           ) -> tuple[Entity, str, JSON | None]:
    """(the tool's entity, the id the call names, its record; None when none holds it or the world answers empty)."""
    entity = bp.entities[plan.entity]
    record_id = args[plan.params["id"]]
    return entity, record_id, None if steer.empty_result else find(state, entity, record_id)


def get(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity, record_id, found = _named(bp, plan, state, args, steer)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    return _got(bp, plan, state, entity, record_id, found)


def _got(bp: Blueprint, plan: ToolPlan, state: JSON, entity: Entity, record_id: str, found: JSON) -> Reply:
    """A record as a lookup answers it: the plan's view, its neighbours' values, under `nested` where it says."""
    shown = view(entity, record_id, found, plan.view)
    for key, ref, target_field in plan.joins:
        target = bp.entities[entity.field(ref).target]
        neighbour = find(state, target, found[ref])
        shown[key] = neighbour[target_field] if neighbour is not None else ""
    return Reply({plan.nested: shown} if plan.nested else shown,
                 message=say(bp.style.voice, "got", id=record_id, **_words(bp, entity)))


def find_by(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    """The first record whose field equals the given value (normalised), else the not-found error."""
    entity, key = bp.entities[plan.entity], plan.params["by"]
    wanted = normalised(args[key])
    hit = next(((record_id, record) for record_id, record in each(state, entity)
                if normalised(record.get(key, "")) == wanted), None)
    if hit is None or steer.empty_result:
        return _missing(bp, plan, entity, args[key])
    return _got(bp, plan, state, entity, *hit)


def owned(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    """A record with every record of the child kind whose reference names it, in the state's order."""
    entity, record_id, found = _named(bp, plan, state, args, steer)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    child = bp.entities[plan.params["child"]]
    own = tuple(k for k in plan.view if k in found)
    theirs = tuple(f.key for f in child.fields if f.key in plan.view)
    items = [view(child, child_id, record, theirs) for child_id, record in each(state, child)
             if record.get(plan.params["ref"]) == record_id]
    return Reply({**view(entity, record_id, found, own), plan.out["items"]: items},
                 message=say(bp.style.voice, "got", id=record_id, **_words(bp, entity)))


def union(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    """The record of whichever kind holds the id, every field of it."""
    record_id = args[plan.params["id"]]
    for name in plan.out["kinds"].split(","):
        entity = bp.entities[name]
        found = find(state, entity, record_id)
        if found is not None and not steer.empty_result:
            return Reply(view(entity, record_id, found, tuple(f.key for f in entity.fields)),
                         message=say(bp.style.voice, "got", id=record_id, **_words(bp, entity)))
    return fail(plan.errors["not_found"], say(bp.style.voice, "not_found", id=record_id, entity="record",
                                              plural="records", actor=bp.actor))


def text(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    """One field of the record, as text (the simulator writes the reply out as a string)."""
    entity, record_id, found = _named(bp, plan, state, args, steer)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    return Reply({"text": str(found[plan.view[0]])})


def matching(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON) -> list[tuple[str, JSON]]:
    """The records a search with these arguments pages through, in the state's order."""
    entity = bp.entities[plan.entity]
    needle_key, field = plan.contains
    needle = str(args.get(needle_key, "")).lower() if needle_key else ""
    return [(record_id, record) for record_id, record in each(state, entity)
            if all(param not in args or field_at(record, key) == args[param] for param, key in plan.filters)
            and (not needle or needle in str(record[field]).lower())]


def field_at(record: JSON, key: str) -> object:
    """A record's field, or a field of one of its objects (`address.city`)."""
    outer, _, inner = key.partition(".")
    return record[key] if not inner else (record.get(outer) or {}).get(inner)


def query_of(plan: ToolPlan, args: JSON) -> JSON:
    """The part of a search's arguments a page token is tied to: its filters."""
    keys = [param for param, _ in plan.filters] + ([plan.contains[0]] if plan.contains[0] else [])
    return {key: args[key] for key in keys if key in args}


def page_window(bp: Blueprint, plan: ToolPlan, args: JSON, steer: Steering) -> tuple[int, int | None]:
    """(page size, offset) of a search; offset None when its page token does not decode for this query."""
    size = min(steer.page_size or args.get(plan.params["limit"], plan.default_limit), plan.max_limit)
    token = plan.params["token"]
    if token not in args or args[token] == "":
        return size, 0
    return size, decode_token(bp.token_style, args[token], fingerprint(query_of(plan, args)))


def search(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    size, offset = page_window(bp, plan, args, steer)
    if offset is None:
        return fail(plan.errors["token"], say(bp.style.voice, "token"))
    found = [] if steer.empty_result else matching(bp, plan, state, args)
    page = found[offset: offset + size]
    more = offset + size < len(found)
    out = plan.out
    after = encode_token(bp.token_style, offset + size, fingerprint(query_of(plan, args))) if more else ""
    fields = {out["items"]: [view(entity, record_id, record, plan.view) for record_id, record in page],
              out["more"]: more, out["next"]: after}
    if "total" in out:
        fields[out["total"]] = len(found)
    return Reply(fields, message=say(bp.style.voice, "page", shown=len(page), matching=len(found),
                                     **_words(bp, entity)))


def create(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    p, out, voice = plan.params, plan.out, bp.style.voice
    label = args[p["label"]].strip()
    for role in ("owner", "parent"):
        if role in p:
            target = bp.entities[entity.field(p[role]).target]
            if find(state, target, args[p[role]]) is None:
                return fail(plan.errors[f"{role}_missing"], say(voice, "not_found", id=args[p[role]],
                                                                **_words(bp, target)))
    if any(str(record[entity.label]).lower() == label.lower() for _, record in each(state, entity)):
        return fail(plan.errors["duplicate"], say(voice, "duplicate", label=label, **_words(bp, entity)))
    now = _now(bp, state)
    record_id, salt = "", 0
    while not record_id or find(state, entity, record_id) is not None:
        record_id = entity.ids.derive(f"{state[bp.now_key]}|{entity.name}|{count(state, entity)}|{label}|{salt}")
        salt += 1
    rng = random.Random(record_id)
    targets = {name: [i for i, _ in each(state, other)] or [other.ids.derive("none")]
               for name, other in bp.entities.items()}
    made = {entity.id_key: record_id}
    for f in entity.fields:
        if f.key in args and f.key != entity.label:
            made[f.key] = args[f.key]
        elif f.key == entity.label:
            made[f.key] = label
        elif f.key == entity.status:
            made[f.key] = entity.lifecycle[0]
        elif f.key == entity.created:
            made[f.key] = stamp(now)
        elif f.key == entity.quantity:
            made[f.key] = 0
        else:
            made[f.key] = value_of(f, rng, now, bp.host, targets, entity)
    insert(state, entity, made)
    fields = {out["id"]: record_id, out["label"]: label}
    if "status" in out:
        fields[out["status"]] = entity.lifecycle[0]
    if "created" in out:
        fields[out["created"]] = stamp(now)
    if "link" in out:
        fields[out["link"]] = link_of(plan, entity, args, record_id)
    if "due" in out:
        fields[out["due"]] = stamp(now + dt.timedelta(seconds=plan.period))
    if "total" in out:
        fields[out["total"]] = formulas.evaluate(plan.formula, args.get(p.get("quantity", ""), 0), args[p["price"]])
    return Reply(fields, message=say(voice, "created", id=record_id, **_words(bp, entity)))


def link_of(plan: ToolPlan, entity: Entity, args: JSON, record_id: str) -> str:
    """A new record's URL (`https://host/v2/seed-packets/<id>`) or path (`/members/<owner>/seed-packets/<id>`)."""
    if plan.link.startswith("https://"):
        return plan.link + record_id
    return f"{plan.link}{args[plan.params['owner']]}/{slug(entity.plural)}/{record_id}"


def update(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    record_id = args[plan.params["id"]]
    found = find(state, entity, record_id)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    given = [key for key in plan.updatable if key in args]
    if not given:
        return fail(plan.errors["empty"], say(bp.style.voice, "empty_update"))
    if entity.lifecycle and found[entity.status] == entity.lifecycle[-1]:
        return fail(plan.errors["locked"], say(bp.style.voice, "locked", id=record_id, current=found[entity.status],
                                               **_words(bp, entity)))
    for key in given:
        found[key] = args[key]
    shown = view(entity, record_id, found, plan.view)
    fields = {plan.nested: shown} if plan.nested else dict(shown)
    fields.update({plan.out["changed"]: given, plan.out["stamp"]: state[bp.now_key]})
    return Reply(fields, message=say(bp.style.voice, "updated", id=record_id, **_words(bp, entity)))


def _precondition_failure(bp: Blueprint, plan: ToolPlan, entity: Entity, record_id: str, record: JSON,
                          args: JSON, state: JSON) -> Reply | None:
    """The first precondition of the plan that does not hold, as its error reply; None when all hold."""
    voice, words = bp.style.voice, _words(bp, entity)
    for pre in plan.preconditions:
        if pre.kind == "owner" and record[entity.owner] != args[plan.params["owner"]]:
            return fail(pre.code, say(voice, "owner", id=record_id, who=args[plan.params["owner"]], **words))
        if pre.kind == "status" and record[entity.status] not in pre.statuses:
            kind = "delete" if plan.family == "delete" else "status"
            return fail(pre.code, say(voice, kind, id=record_id, current=record[entity.status],
                                      expected=" or ".join(pre.statuses), **words))
        if pre.kind == "window":
            given, now = args[plan.params["when"]], _now(bp, state)
            when = parse_stamp(given)
            if when is None:
                return fail(bp.codes["time_format"], say(voice, "time_format", value=given))
            end = now + dt.timedelta(seconds=pre.seconds)
            if not now <= when <= end:
                return fail(pre.code, say(voice, "window", when=given, start=stamp(now), end=stamp(end)))
        if pre.kind == "quantity":
            need = args[plan.params["amount"]] * plan.usage
            have = record[entity.quantity]
            if have < need:
                return fail(pre.code, say(voice, "quantity", id=record_id, have=have, need=need,
                                          quantity=entity.field(entity.quantity).words, **words))
    return None


def delete(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    record_id = args[plan.params["id"]]
    found = find(state, entity, record_id)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    refused = _precondition_failure(bp, plan, entity, record_id, found, args, state)
    if refused is not None:
        return refused
    remove(state, entity, record_id)
    out = plan.out
    return Reply({out["id"]: record_id, out["deleted"]: True, out["remaining"]: count(state, entity)},
                 message=say(bp.style.voice, "deleted", id=record_id, **_words(bp, entity)))


def action(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    record_id = args[plan.params["id"]]
    found = find(state, entity, record_id)
    if found is None:
        return _missing(bp, plan, entity, record_id)
    refused = _precondition_failure(bp, plan, entity, record_id, found, args, state)
    if refused is not None:
        return refused
    out, status = plan.out, OK
    fields = {out["id"]: record_id}
    message = say(bp.style.voice, "acted", id=record_id, verb=plan.name, **_words(bp, entity))
    if "amount" in plan.params:
        asked = done = args[plan.params["amount"]]
        if steer.partial_success and asked >= 2:
            done, status = asked // 2, PARTIAL
            message = say(bp.style.voice, "partial", done=done, asked=asked)
        found[entity.quantity] -= done * plan.usage
        fields[out["remaining"]] = found[entity.quantity]
        if "charged" in out:
            fields[out["charged"]] = formulas.evaluate(plan.formula, done, found[entity.price])
        if "price" in out:
            fields[out["price"]] = found[entity.price]
    if plan.transition is not None:
        found[entity.status] = plan.transition[1]
        fields[out["status"]] = plan.transition[1]
    if "when" in out:
        given = args[plan.params["when"]]
        fields[out["when"]] = given
        if "until" in out:
            fields[out["until"]] = stamp(parse_stamp(given) + dt.timedelta(seconds=plan.period))
    if "stamp" in out:
        fields[out["stamp"]] = state[bp.now_key]
    return Reply(fields, message=message, status=status)


def transfer(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    p, out, voice = plan.params, plan.out, bp.style.voice
    source_id, target_id, asked = args[p["source"]], args[p["target"]], args[p["amount"]]
    source, target = find(state, entity, source_id), find(state, entity, target_id)
    for record_id, found in ((source_id, source), (target_id, target)):
        if found is None:
            return _missing(bp, plan, entity, record_id)
    if source_id == target_id:
        return fail(plan.errors["same"], say(voice, "same", **_words(bp, entity)))
    quantity = entity.field(entity.quantity)
    if source[entity.quantity] < asked:
        return fail(plan.preconditions[0].code, say(voice, "quantity", id=source_id, have=source[entity.quantity],
                                                    need=asked, quantity=quantity.words, **_words(bp, entity)))
    moved, status = asked, OK
    message = say(voice, "moved", amount=asked, source=source_id, target=target_id)
    if steer.partial_success and asked >= 2:
        moved, status = asked // 2, PARTIAL
        message = say(voice, "partial", done=moved, asked=asked)
    source[entity.quantity] -= moved
    target[entity.quantity] += moved
    return Reply({p["source"]: source_id, p["target"]: target_id, out["moved"]: moved,
                  out["source_left"]: source[entity.quantity], out["target_now"]: target[entity.quantity]},
                 message=message, status=status)


def batch(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    entity = bp.entities[plan.entity]
    ids, value = args[plan.params["ids"]], args[plan.params["value"]]
    known = [i for i in ids if find(state, entity, i) is not None]
    if not known:
        return fail(plan.errors["none"], say(bp.style.voice, "batch_none", count=len(ids), **_words(bp, entity)))
    locked = set(sorted(set(known))[1::2]) if steer.partial_success and len(set(known)) >= 2 else set()
    failed = [i for i in ids if i not in known or i in locked]
    for record_id in ids:
        if record_id not in failed:
            find(state, entity, record_id)[plan.batch_field] = value
    done = len(ids) - len(failed)
    return Reply({plan.batch_field: value, plan.out["count"]: done, plan.out["failed"]: failed},
                 message=say(bp.style.voice, "batched", count=done, **_words(bp, entity)),
                 status=PARTIAL if failed else OK)


def login(bp: Blueprint, plan: ToolPlan, state: JSON, args: JSON, steer: Steering) -> Reply:
    auth = bp.login
    held = state[auth["credentials_key"]]
    if (args[auth["user"]].strip().lower(), args[auth["secret"]]) != (held[auth["user"]], held[auth["secret"]]):
        return fail(bp.codes["credentials"], say(bp.style.voice, "credentials", user=auth["user"],
                                                 secret=auth["secret"]))
    sessions = state[auth["sessions_key"]]
    token = session_token(bp, f"{state[bp.now_key]}|{len(sessions)}")
    expires = stamp(_now(bp, state) + dt.timedelta(seconds=auth["ttl"]))
    sessions.append({auth["token_key"]: token, auth["expires_key"]: expires})
    return Reply({auth["token_key"]: token, auth["expires_key"]: expires,
                  plan.out["actor"]: held[plan.out["actor"]]},
                 message=say(bp.style.voice, "signed_in", period=period_text(auth["ttl"])))


def session_token(bp: Blueprint, text: str) -> str:
    """A session token in the world's format: prefix + letters/digits (or hex), fixed by `text`."""
    return bp.login["format"].derive(f"{bp.name}|{text}")


FAMILIES = {"get": get, "search": search, "create": create, "update": update, "delete": delete, "action": action,
            "transfer": transfer, "batch": batch, "login": login, "find": find_by, "owned": owned, "union": union,
            "text": text}
