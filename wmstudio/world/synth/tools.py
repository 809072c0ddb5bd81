"""The tools of a synthetic world, drawn from the families real APIs have, with random names and parameters.

get by id, search with paging (`limit`, `page_token`, `has_more` or this world's words for them), create,
update, delete, state-changing actions with preconditions (a status, a sufficient quantity, a date window,
ownership), transfers between records and batch updates that count what they did (login: sessions.py)."""

from __future__ import annotations

import random

from wmstudio.world.sims.base import (
    ERROR,
    OK,
    PARTIAL,
    array,
    boolean,
    integer,
    params,
    record,
    response_schema,
    string,
)
from wmstudio.world.synth import formulas, names
from wmstudio.world.synth.blueprint import Blueprint, Entity, Precondition, ToolPlan
from wmstudio.world.synth.naming import RFC3339_PATTERN, code_word, period_text, slug
from wmstudio.world.synth.schemas import field_schema, id_schema, optional, view_schema
from wmstudio.world.synth.sessions import login_tool, require_session

PERIODS = (900, 2700, 5400, 7200, 21_600, 43_200, 129_600, 259_200, 604_800, 1_209_600, 1_814_400)
WINDOWS = (2 * 86_400, 5 * 86_400, 10 * 86_400, 14 * 86_400, 45 * 86_400, 60 * 86_400, 90 * 86_400)


def plan_tools(rng: random.Random, bp: Blueprint) -> list[ToolPlan]:
    """The world's tools: a get and a search at least, then a random mix of the other families."""
    actor, *resources = bp.entities.values()
    first = resources[0]
    plans = [get_tool(rng, bp, first), search_tool(rng, bp, first)]
    for other in resources[1:]:
        if rng.random() < 0.6:
            plans.append(get_tool(rng, bp, other))
        if rng.random() < 0.3:
            plans.append(search_tool(rng, bp, other))
    if rng.random() < 0.25:
        plans.append(get_tool(rng, bp, actor))
    for entity in resources:
        for step in _transitions(rng, entity):
            plans.append(action_tool(rng, bp, entity, step))
        if entity.quantity and not entity.lifecycle and rng.random() < 0.8:
            plans.append(action_tool(rng, bp, entity, None))
    chosen = rng.sample(resources, len(resources))
    if rng.random() < 0.6:
        plans.append(create_tool(rng, bp, chosen[0]))
    if rng.random() < 0.45:
        plans.append(update_tool(rng, bp, chosen[-1]))
    if rng.random() < 0.35:
        plans.append(delete_tool(rng, bp, rng.choice(resources)))
    stocked = [e for e in resources if e.quantity]
    if stocked and rng.random() < 0.3:
        plans.append(transfer_tool(rng, bp, rng.choice(stocked)))
    enumerated = [e for e in resources if any(f.kind == "enum" for f in e.fields)]
    if enumerated and rng.random() < 0.4:
        plans.append(batch_tool(rng, bp, rng.choice(enumerated)))
    unique: dict[str, ToolPlan] = {}
    for plan in plans:
        unique.setdefault(plan.name, plan)
    plans = list(unique.values())
    if bp.login is not None:
        plans.insert(0, login_tool(bp))
        require_session(bp, plans[1:])
    for plan in plans:
        plan.description += errors_note(bp, plan)
    return plans


def errors_note(bp: Blueprint, plan: ToolPlan) -> str:
    """The error codes a tool answers with and when, for its description (shown whenever the tool is called)."""
    when = {"not_found": "unknown id", "token": "a page token of another search", "duplicate": "name in use",
            "owner_missing": "unknown owner", "parent_missing": "unknown parent", "empty": "nothing to change",
            "locked": "read-only", "same": "same record twice", "none": "no id known"}
    notes = [f"{code} {when[kind]}" for kind, code in plan.errors.items()]
    entity = bp.entities.get(plan.entity)
    for pre in plan.preconditions:
        if pre.kind == "status":
            notes.append(f"{pre.code} not {'/'.join(pre.statuses)}")
        elif pre.kind == "quantity":
            notes.append(f"{pre.code} too little {entity.field(entity.quantity).words}")
        elif pre.kind == "window":
            notes.append(f"{pre.code} time outside the window; {bp.codes['time_format']} not a time")
        elif pre.kind == "owner":
            notes.append(f"{pre.code} not the owner")
    if plan.family == "login":
        notes.append(f"{bp.codes['credentials']} wrong credentials")
    return f" Errors: {'; '.join(notes)}." if notes else ""


def _name(bp: Blueprint, verb: str, entity: Entity) -> str:
    plural = verb.endswith(" s")
    return bp.style.key(verb.removesuffix(" s"), entity.plural if plural else entity.name)


def _example(entity: Entity) -> str:
    return entity.ids.derive(f"example/{entity.name}")


def _id_param(entity: Entity) -> dict:
    return {entity.id_key: id_schema(entity, False, _example(entity))}


def _not_found(bp: Blueprint, rng: random.Random, entity: Entity) -> str:
    return rng.choice(names.NOT_FOUND_CODES).format(E=entity.code)


def get_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Look one record up by id: its fields, and values joined from the records it references."""
    view = tuple(f.key for f in entity.fields)
    joins = []
    for key, words in ((entity.owner, "owner"), (entity.parent, "parent")):
        if key and rng.random() < 0.6:
            target = bp.entities[entity.field(key).target]
            joins.append((bp.style.key(target.name, target.label), key, target.label))
    extra = {key: string() for key, _, _ in joins}
    properties = view_schema(entity, view, bp.entities, extra)
    nested = bp.style.key(entity.name) if rng.random() < 0.5 else ""
    fields = {nested: record(properties)} if nested else properties
    return ToolPlan(
        name=_name(bp, rng.choice(names.GET_VERBS), entity), family="get", entity=entity.name,
        description=f"Look up one {entity.name} by id" + (", with its neighbours' names." if joins else "."),
        parameters=params(_id_param(entity), [entity.id_key]), response=response_schema(fields),
        params={"id": entity.id_key}, view=view, nested=nested, joins=tuple(joins),
        errors={"not_found": _not_found(bp, rng, entity)})


def search_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """List records matching exact filters, a page at a time, in the state's order."""
    style = bp.style
    filters, properties = [], {}
    if entity.status and rng.random() < 0.8:
        filters.append((entity.status, entity.status))
        properties[entity.status] = string(enum=list(entity.field(entity.status).values))
    if entity.owner and rng.random() < 0.6:
        filters.append((entity.owner, entity.owner))
        properties[entity.owner] = string(f"Only {entity.plural} of this {entity.field(entity.owner).words[:-3]}")
    enums = [f for f in entity.fields if f.kind == "enum"]
    if enums and rng.random() < 0.6:
        chosen = rng.choice(enums)
        filters.append((chosen.key, chosen.key))
        properties[chosen.key] = string(enum=list(chosen.values))
    contains = ("", "")
    if entity.label and rng.random() < 0.35:
        key = style.key(rng.choice([f"{entity.field(entity.label).words} contains", "query", "q"]))
        contains = (key, entity.label)
        properties[key] = string("Case-insensitive part of the " + entity.field(entity.label).words)
    default, most = rng.choice([3, 4, 5, 5, 10]), rng.choice([50, 50, 100, 200])
    limit, token = style.key(rng.choice(names.LIMIT_PARAMS)), style.key(rng.choice(names.TOKEN_PARAMS))
    properties[limit] = integer(f"{entity.plural.capitalize()} per page (default {default})", 1, most)
    properties[token] = string("From the previous page's response, to read the next page")
    summary = [entity.label] + [k for k in (entity.status, entity.quantity, entity.price) if k and rng.random() < 0.6]
    summary += [key for key, _ in filters if key not in summary]
    items = style.key(rng.choice(names.ITEMS_KEYS + (entity.plural,)))
    more, after = style.key(rng.choice(names.MORE_KEYS)), style.key(rng.choice(names.NEXT_KEYS))
    fields = {items: array(record(view_schema(entity, tuple(k for k in summary if k), bp.entities))),
              more: boolean(), after: string()}
    out = {"items": items, "more": more, "next": after}
    if rng.random() < 0.6:
        out["total"] = style.key(rng.choice(names.TOTAL_KEYS))
        fields[out["total"]] = integer(minimum=0)
    return ToolPlan(
        name=_name(bp, rng.choice(names.SEARCH_VERBS), entity), family="search", entity=entity.name,
        description=f"List {entity.plural} matching the filters, {default} per page unless `{limit}` says "
                    f"(at most {most}); pass `{after}` back as `{token}` for the next page.",
        parameters=params(properties), response=response_schema(fields),
        params={"limit": limit, "token": token}, out=out, view=tuple(k for k in summary if k), filters=tuple(filters),
        contains=contains, default_limit=default, max_limit=most,
        errors={"token": rng.choice(names.TOKEN_CODES)})


def create_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Add a record: the caller names it and gives its owner, parent, price and amount; the rest is derived."""
    style = bp.style
    named = string(f"The new {entity.name}'s {entity.field(entity.label).words}")
    properties = {entity.label: {**named, "minLength": 1}}
    required, p = [entity.label], {"label": entity.label}
    for role, key in (("owner", entity.owner), ("parent", entity.parent)):
        if key:
            properties[key] = string(f"{entity.field(key).words.capitalize()}, e.g. "
                                     f"{_example(bp.entities[entity.field(key).target])}")
            required.append(key)
            p[role] = key
    if entity.price:
        properties[entity.price] = integer(f"{entity.field(entity.price).words} (cents)", 1)
        required.append(entity.price)
        p["price"] = entity.price
    if entity.quantity:
        properties[entity.quantity] = integer(f"Starting {entity.field(entity.quantity).words}", 0, 500)
        p["quantity"] = entity.quantity
    for f in entity.fields:
        if f.kind in ("enum", "bool") and rng.random() < 0.5:
            properties[f.key] = field_schema(f, bp.entities, False)
    fields = {entity.id_key: id_schema(entity, True, strict=True), entity.label: string()}
    out = {"id": entity.id_key, "label": entity.label}
    if entity.status:
        fields[entity.status] = field_schema(entity.field(entity.status), bp.entities, True)
        out["status"] = entity.status
    if entity.created:
        fields[entity.created] = field_schema(entity.field(entity.created), bp.entities, True)
        out["created"] = entity.created
    plan = ToolPlan(name=_name(bp, rng.choice(names.CREATE_VERBS), entity), family="create", entity=entity.name,
                    description="", parameters={}, response={}, params=p, out=out,
                    errors={"duplicate": rng.choice(names.DUPLICATE_CODES).format(E=entity.code)})
    if rng.random() < 0.6:
        plan.link = (f"https://{bp.host}/{rng.choice(['v1', 'v2', 'api'])}/{slug(entity.plural)}/"
                     if rng.random() < 0.5 or not entity.owner else
                     f"/{slug(bp.entities[bp.actor].plural)}/")
        out["link"] = style.key(rng.choice(["url", "href", "path", "location"]))
        fields[out["link"]] = string()
    if rng.random() < 0.45:
        plan.period = rng.choice(PERIODS)
        out["due"] = style.key(rng.choice(["due at", "review by", "hold until", "expires at"]))
        fields[out["due"]] = string(pattern=optional(RFC3339_PATTERN))
    if entity.price and entity.quantity and rng.random() < 0.7:
        plan.formula = formulas.draw_formula(rng)
        out["total"] = style.key(rng.choice(["total", "opening value", "estimated cost"]), bp.money)
        fields[out["total"]] = integer(minimum=0)
    for role in ("owner", "parent"):
        if role in p:
            plan.errors[f"{role}_missing"] = rng.choice(names.NOT_FOUND_CODES).format(
                E=bp.entities[entity.field(p[role]).target].code)
    plan.parameters, plan.response = params(properties, required), response_schema(fields)
    starts = f"; it starts {entity.lifecycle[0]}" if entity.lifecycle else ""
    due = f" and is due {period_text(plan.period)} later" if plan.period else ""
    plan.description = f"Create a {entity.name}{starts}{due}."
    return plan


def update_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Change some of a record's editable fields; records at the end of their lifecycle are read-only."""
    editable = [f for f in entity.fields if f.kind in ("label", "enum", "bool", "tags")
                or (f.kind == "int" and f.key not in (entity.quantity,))]
    chosen = rng.sample(editable, min(len(editable), rng.randrange(1, 4)))
    properties = {**_id_param(entity), **{f.key: field_schema(f, bp.entities, False) for f in chosen}}
    keys = tuple(f.key for f in chosen) + ((entity.status,) if entity.status else ())
    nested = bp.style.key(entity.name) if rng.random() < 0.5 else ""
    changed, stamp_key = bp.style.key(rng.choice(["updated fields", "changed"])), bp.style.key("updated at")
    view = view_schema(entity, keys, bp.entities)
    fields = {nested: record(view)} if nested else dict(view)
    fields.update({changed: array(string()), stamp_key: string(pattern=optional(RFC3339_PATTERN))})
    errors = {"not_found": _not_found(bp, rng, entity), "empty": rng.choice(names.EMPTY_UPDATE_CODES)}
    if entity.lifecycle:
        errors["locked"] = rng.choice(names.LOCKED_CODES).format(E=entity.code)
    return ToolPlan(
        name=_name(bp, rng.choice(names.UPDATE_VERBS), entity), family="update", entity=entity.name,
        description=f"Change a {entity.name}'s " + ", ".join(f.words for f in chosen) +
                    (f"; {entity.lifecycle[-1]} {entity.plural} are read-only." if entity.lifecycle else "."),
        parameters=params(properties, [entity.id_key]), response=response_schema(fields),
        params={"id": entity.id_key}, out={"changed": changed, "stamp": stamp_key}, view=keys, nested=nested,
        updatable=tuple(f.key for f in chosen), errors=errors)


def delete_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Remove a record, when its status allows and (maybe) only by its owner; says how many are left."""
    style = bp.style
    properties, required, p = _id_param(entity), [entity.id_key], {"id": entity.id_key}
    pre = []
    if entity.owner and rng.random() < 0.45:
        properties[entity.owner] = string("Who asks: must own it")
        required.append(entity.owner)
        p["owner"] = entity.owner
        pre.append(Precondition("owner", rng.choice(names.OWNER_CODES).format(E=entity.code, A=code_word(bp.actor))))
    if entity.lifecycle:
        pre.append(Precondition("status", rng.choice(names.DELETE_CODES).format(E=entity.code),
                                statuses=entity.lifecycle[: rng.choice([1, 2])]))
    out = {"id": entity.id_key, "deleted": style.key(rng.choice(["deleted", "removed"])),
           "remaining": style.key(rng.choice(["remaining", f"{entity.plural} left"]))}
    fields = {out["id"]: string(), out["deleted"]: boolean(), out["remaining"]: integer(minimum=0)}
    allowed = f" Only {'/'.join(pre[-1].statuses)} {entity.plural} can go." if entity.lifecycle else ""
    return ToolPlan(
        name=_name(bp, rng.choice(names.DELETE_VERBS), entity), family="delete", entity=entity.name,
        description=f"Delete a {entity.name}.{allowed}", parameters=params(properties, required),
        response=response_schema(fields), params=p, out=out, preconditions=tuple(pre),
        errors={"not_found": _not_found(bp, rng, entity)})


def _transitions(rng: random.Random, entity: Entity) -> list[int]:
    """Which lifecycle steps (into status i + 1) get an action tool: one or two of them."""
    if not entity.lifecycle:
        return []
    steps = list(range(len(entity.verbs)))
    return sorted(rng.sample(steps, rng.choice([1, 1, 2])))


def action_tool(rng: random.Random, bp: Blueprint, entity: Entity, step: int | None) -> ToolPlan:
    """A state-changing action: a lifecycle step (status precondition) and/or using up some of a quantity, maybe
    at a time within a window and only by the record's owner."""
    style = bp.style
    verb = entity.verbs[step] if step is not None else rng.choice(["redeem", "allocate", "draw", "consume", "claim"])
    properties, required, p = _id_param(entity), [entity.id_key], {"id": entity.id_key}
    pre, out, fields = [], {"id": entity.id_key}, {entity.id_key: string()}
    plan = ToolPlan(name=_name(bp, verb, entity), family="action", entity=entity.name, description="",
                    parameters={}, response={}, errors={"not_found": _not_found(bp, rng, entity)})
    words = []
    if entity.owner and rng.random() < 0.45:
        properties[entity.owner] = string(f"Who asks: must own the {entity.name}")
        required.append(entity.owner)
        p["owner"] = entity.owner
        pre.append(Precondition("owner", rng.choice(names.OWNER_CODES).format(E=entity.code, A=code_word(bp.actor))))
        words.append(f"only its {entity.field(entity.owner).words[:-3]} may")
    if step is not None:
        source, target = entity.lifecycle[step], entity.lifecycle[step + 1]
        sources = (source,) if step == 0 or rng.random() < 0.7 else (entity.lifecycle[step - 1], source)
        plan.transition = (sources, target)
        pre.append(Precondition("status", rng.choice(names.STATUS_CODES).format(E=entity.code,
                                                                                S=code_word(source)),
                                statuses=sources))
        out["status"] = entity.status
        fields[entity.status] = field_schema(entity.field(entity.status), bp.entities, True)
        words.append(f"{'/'.join(sources)} -> {target}")
    if rng.random() < 0.35:
        when = style.key(rng.choice(["scheduled for", "starts at", "pickup at", "effective at"]))
        seconds = rng.choice(WINDOWS)
        properties[when] = string("RFC 3339 UTC time, e.g. 2025-04-01T09:00:00Z", pattern=f"^{RFC3339_PATTERN}$")
        required.append(when)
        p["when"] = when
        pre.append(Precondition("window", rng.choice(names.WINDOW_CODES), seconds=seconds))
        out["when"] = when
        fields[when] = string(pattern=optional(RFC3339_PATTERN))
        words.append(f"{when} within {period_text(seconds)} from now")
        if rng.random() < 0.6:
            plan.period = rng.choice(PERIODS)
            out["until"] = style.key(rng.choice(["ends at", "return by", "valid until"]))
            fields[out["until"]] = string(pattern=optional(RFC3339_PATTERN))
    if entity.quantity and (step is None or rng.random() < 0.5):
        amount = style.key(rng.choice(["quantity", "units", "count", "amount"]))
        properties[amount] = integer(f"How many (uses {entity.field(entity.quantity).words})", 1, 1000)
        required.append(amount)
        p["amount"] = amount
        plan.usage = rng.choice(formulas.USAGES)
        pre.append(Precondition("quantity", rng.choice(names.QUANTITY_CODES).format(
            Q=code_word(entity.field(entity.quantity).words))))
        out["remaining"] = style.key(f"{entity.field(entity.quantity).words} remaining"
                                     if rng.random() < 0.5 else "remaining")
        fields[out["remaining"]] = integer(minimum=0)
        plan.partial = True
        words.append(f"uses {plan.usage} {entity.field(entity.quantity).words} per unit")
        if entity.price and rng.random() < 0.8:
            plan.formula = formulas.draw_formula(rng)
            out["charged"] = style.key(rng.choice(["amount due", "cost", "billed", "fee total"]), bp.money)
            fields[out["charged"]] = integer(minimum=0)
            if rng.random() < 0.5:
                out["price"] = entity.price
                fields[entity.price] = integer(minimum=0)
    if rng.random() < 0.3:
        out["stamp"] = style.key(rng.choice(["processed at", "recorded at"]))
        fields[out["stamp"]] = string(pattern=optional(RFC3339_PATTERN))
    plan.parameters = params(properties, required)
    plan.response = response_schema(fields, statuses=(OK, PARTIAL, ERROR) if plan.partial else (OK, ERROR))
    plan.params, plan.out, plan.preconditions = p, out, tuple(pre)
    plan.description = f"{verb.replace('_', ' ').capitalize()} a {entity.name}" + (
        f" ({'; '.join(words)})" if words else "") + "."
    return plan


def transfer_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Move some quantity from one record to another; the source must hold enough."""
    style = bp.style
    q = entity.field(entity.quantity)
    source, target = style.key("from", entity.id_key), style.key("to", entity.id_key)
    amount = style.key(rng.choice(["amount", "quantity", "units"]))
    properties = {source: string(f"{entity.name.capitalize()} to take from"),
                  target: string(f"{entity.name.capitalize()} to add to"), amount: integer(f"How much {q.words}", 1)}
    out = {"moved": style.key(rng.choice(["moved", "transferred"])), "source_left": style.key("from", q.words),
           "target_now": style.key("to", q.words)}
    fields = {source: string(), target: string(), **{key: integer(minimum=0) for key in out.values()}}
    return ToolPlan(
        name=_name(bp, rng.choice(names.TRANSFER_VERBS), entity),
        family="transfer", entity=entity.name,
        description=f"Move {q.words} from one {entity.name} to another.",
        parameters=params(properties, [source, target, amount]),
        response=response_schema(fields, statuses=(OK, PARTIAL, ERROR)),
        params={"source": source, "target": target, "amount": amount}, out=out, partial=True,
        preconditions=(Precondition("quantity", rng.choice(names.QUANTITY_CODES).format(Q=code_word(q.words))),),
        errors={"not_found": _not_found(bp, rng, entity),
                "same": rng.choice(names.SAME_CODES).format(E=entity.code)})


def batch_tool(rng: random.Random, bp: Blueprint, entity: Entity) -> ToolPlan:
    """Set one enum field on many records at once; unknown (or locked) ids are reported back and counted."""
    style = bp.style
    target = rng.choice([f for f in entity.fields if f.kind == "enum"])
    most = rng.choice([5, 10, 20, 25])
    ids = style.key(entity.name, "ids")
    out = {"count": style.key(rng.choice(names.COUNT_KEYS)), "failed": style.key(rng.choice(names.FAILED_KEYS))}
    properties = {ids: {**array(string(), f"{entity.name.capitalize()} ids", most), "minItems": 1},
                  target.key: string(enum=list(target.values))}
    fields = {target.key: string(), out["count"]: integer(minimum=0), out["failed"]: array(string())}
    return ToolPlan(
        name=style.key(rng.choice(["bulk set", "batch set", "mass update"]), entity.name, target.words),
        family="batch", entity=entity.name,
        description=f"Set {target.words} on up to {most} {entity.plural}; ids that fail are listed back.",
        parameters=params(properties, [ids, target.key]),
        response=response_schema(fields, statuses=(OK, PARTIAL, ERROR)),
        params={"ids": ids, "value": target.key}, out=out, batch_field=target.key, max_ids=most, partial=True,
        errors={"none": rng.choice(names.BATCH_NONE_CODES)})
