"""Tools of the shapes a user's own world has and the base generator never makes (the `:shapes` worlds,
registry.py): a lookup by a field that is not the id (an email, a phone, a name, any case), a record with the
records it owns (a customer's bills), a union answer (one lookup for ids of several kinds, `anyOf` their records),
a plain-text answer (a field's value as text, errors as `Error: ...`) and a listing filtered by a nested field
(`address.city`).

They are drawn from a stream of their own, after the base tools, so a `:shapes` world is its base world with
these tools added: the same entities, records and rules."""

from __future__ import annotations

import random

from wmstudio.world.sims.base import array, params, record, response_schema, string
from wmstudio.world.synth import names
from wmstudio.world.synth.blueprint import Blueprint, Entity, Field, ToolPlan
from wmstudio.world.synth.entities import add_field
from wmstudio.world.synth.schemas import field_schema, id_schema, view_schema
from wmstudio.world.synth.tools import get_tool, search_tool

FINDABLE = ("label", "person", "email", "phone")  # kinds whose values tell one record from another
TEXT_KINDS = ("label", "person", "email", "phone", "int", "money", "status", "enum", "time")
ERROR_TEXT = "Error: "  # how a text tool's refusal opens


def plan_shapes(rng: random.Random, bp: Blueprint) -> list[ToolPlan]:
    """One tool of each shape the world's entities allow: find, owned, union, text and a nested filter."""
    actor, *resources = bp.entities.values()
    listed = rng.choice(resources)
    nested = _object_field(rng, bp, listed)  # first: every record view below then shows it
    plans = []
    findable = [(e, f) for e in bp.entities.values() for f in e.fields if f.kind in FINDABLE]
    if findable:
        plans.append(find_tool(rng, bp, *rng.choice(findable)))
    owners = [(e, c) for e in bp.entities.values() for c in resources
              if c is not e and any(f.kind == "ref" and f.target == e.name for f in c.fields)]
    if owners:
        plans.append(owned_tool(rng, bp, *rng.choice(owners)))
    plans.append(union_tool(rng, bp, _distinct_ids([actor, *resources], rng)))
    told = [(e, f) for e in resources for f in e.fields if f.kind in TEXT_KINDS]
    plans.append(text_tool(rng, bp, *rng.choice(told)))
    plans.append(nested_search_tool(rng, bp, listed, nested))
    return plans


def _object_field(rng: random.Random, bp: Blueprint, entity: Entity) -> Field:
    """The entity's object field (an address, a location), added to its records where it has none."""
    held = next((f for f in entity.fields if f.kind == "object"), None)
    if held is not None:
        return held
    words, parts = rng.choice(names.NESTED_OBJECTS)
    made = tuple(Field(bp.style.key(w), "int" if m == "int" else "code", w, values=(m,), low=1, high=9)
                 for w, m in parts)
    return add_field(entity, Field(bp.style.key(words), "object", words, parts=made))


def _distinct_ids(entities: list[Entity], rng: random.Random) -> list[Entity]:
    """Two or three entities whose ids do not look alike (each id says which collection holds it)."""
    chosen: list[Entity] = []
    for entity in rng.sample(entities, len(entities)):
        if all(entity.ids.pattern() != other.ids.pattern() for other in chosen):
            chosen.append(entity)
    return chosen[: rng.choice([2, 3])] if len(chosen) > 1 else entities[:2]


def find_tool(rng: random.Random, bp: Blueprint, entity: Entity, by: Field) -> ToolPlan:
    """Look one record up by a field that is not its id, matched whatever its case (a phone by its digits)."""
    plan = get_tool(rng, bp, entity)
    plan.name = bp.style.key(rng.choice(["find", "lookup", "get"]), entity.name, "by", by.words)
    plan.family = "find"
    plan.parameters = params({by.key: string(f"The {entity.name}'s {by.words} (any case)")}, [by.key])
    plan.params = {"by": by.key}
    plan.description = f"Find the {entity.name} whose {by.words} this is" + plan.description.removeprefix(
        f"Look up one {entity.name} by id")
    return plan


def owned_tool(rng: random.Random, bp: Blueprint, owner: Entity, child: Entity) -> ToolPlan:
    """One record with every record of another kind that points to it (a customer with their bills)."""
    ref = next(f.key for f in child.fields if f.kind == "ref" and f.target == owner.name)
    own = tuple(f.key for f in owner.fields if f.kind not in ("map", "refs"))
    theirs = tuple(f.key for f in child.fields if f.kind not in ("map", "refs"))
    items = bp.style.key(child.plural)
    fields = {**view_schema(owner, own, bp.entities),
              items: array(record(view_schema(child, theirs, bp.entities)))}
    return ToolPlan(
        name=bp.style.key(rng.choice(["get", "fetch", "show"]), owner.name, "with", child.plural),
        family="owned", entity=owner.name,
        description=f"Look up one {owner.name} by id with all of its {child.plural}.",
        parameters=params({owner.id_key: id_schema(owner, False)}, [owner.id_key]), response=response_schema(fields),
        params={"id": owner.id_key, "child": child.name, "ref": ref}, out={"items": items}, view=own + theirs,
        errors={"not_found": rng.choice(names.NOT_FOUND_CODES).format(E=owner.code)})


def union_tool(rng: random.Random, bp: Blueprint, kinds: list[Entity]) -> ToolPlan:
    """One lookup for ids of several kinds: the answer is the record of whichever kind holds the id (`anyOf`)."""
    key = bp.style.key(rng.choice(["id", "ref", "object id", "lookup id"]))
    variants = [response_schema(view_schema(e, tuple(f.key for f in e.fields), bp.entities)) for e in kinds]
    described = ", ".join(f"{e.name} ({e.ids.derive(f'example/{e.name}')})" for e in kinds)
    return ToolPlan(
        name=bp.style.key(rng.choice(["resolve", "lookup any", "get object"])), family="union", entity=kinds[0].name,
        description=f"Look up any record by its id: a {described}; the answer is that record.",
        parameters=params({key: string("An id of any kind above")}, [key]),
        response={"anyOf": [*variants, response_schema({})]}, params={"id": key},
        out={"kinds": ",".join(e.name for e in kinds)},
        errors={"not_found": rng.choice(("NOT_FOUND", "UNKNOWN_ID", "RESOURCE_NOT_FOUND"))})


def text_tool(rng: random.Random, bp: Blueprint, entity: Entity, told: Field) -> ToolPlan:
    """One field of a record, answered as plain text; an unknown id answers `Error: ...`."""
    return ToolPlan(
        name=bp.style.key(rng.choice(["get", "read"]), entity.name, told.words), family="text", entity=entity.name,
        description=f"The {entity.name}'s {told.words}, as plain text.",
        parameters=params({entity.id_key: id_schema(entity, False)}, [entity.id_key]),
        response={"type": "string", "description": f"The {told.words}, or {ERROR_TEXT}<what went wrong>"},
        params={"id": entity.id_key}, view=(told.key,),
        errors={"not_found": rng.choice(names.NOT_FOUND_CODES).format(E=entity.code)})


def nested_search_tool(rng: random.Random, bp: Blueprint, entity: Entity, nested: Field) -> ToolPlan:
    """A listing filtered by a field inside an object field of the records (`city` of their `address`)."""
    part = rng.choice(nested.parts)
    plan = search_tool(rng, bp, entity)
    plan.name = bp.style.key(rng.choice(["list", "search"]), entity.plural, "by", part.words)
    plan.family = "search"
    param = bp.style.key(part.words)
    plan.filters = (*plan.filters, (param, f"{nested.key}.{part.key}"))
    plan.parameters["properties"] = {param: {**field_schema(part, bp.entities, False),
                                             "description": f"Only {entity.plural} whose {nested.words} "
                                                            f"{part.words} is this"},
                                     **plan.parameters["properties"]}
    if nested.key not in plan.view:
        plan.view = (*plan.view, nested.key)
        item = plan.response["properties"][plan.out["items"]]["items"]
        item["properties"][nested.key] = field_schema(nested, bp.entities, True)
        item["required"] = [*item["required"], nested.key]
    plan.description = f"List {entity.plural} by their {nested.words}'s {part.words}. " + plan.description
    return plan
