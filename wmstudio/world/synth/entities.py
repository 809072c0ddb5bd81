"""Entity types of a synthetic world (an actor and two or three resources) and the records of a random state.

Fields come in every kind a real API has: formatted strings, integers, money in cents, enums, booleans,
timestamps, nested objects, lists and id-keyed maps; records reference their owner and parent by id, so some
answers sit in a neighbouring record."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from wmstudio.world.synth import names
from wmstudio.world.synth.blueprint import JSON, Entity, Field
from wmstudio.world.synth.naming import (
    Style,
    code_word,
    email,
    formatted,
    id_format,
    person,
    phone,
    stamp,
    thing_label,
)


def make_entities(rng: random.Random, theme: names.Theme, style: Style, money_suffix: str) -> list[Entity]:
    """The actor first, then two or three resources of the theme."""
    used: set[str] = set()
    actor_single, actor_plural = theme.actor
    actor = _entity(rng, style, actor_single, actor_plural, used)
    actor.fields = [_field(style, "person", rng.choice(["name", "full name", "display name"]))]
    actor.label = actor.fields[0].key
    actor.fields.append(_field(style, "email", rng.choice(["email", "contact email"])))
    for _ in range(rng.randrange(1, 3)):
        _add_extra(rng, style, actor, money_suffix)
    actor.immutable = tuple(f.key for f in actor.fields)
    count = 3 if rng.random() < 0.4 else 2
    resources = []
    for position, (single, plural) in enumerate(rng.sample(theme.resources, count)):
        entity = _entity(rng, style, single, plural, used)
        entity.label = _add(entity, _field(style, "label", rng.choice(names.LABEL_FIELDS)))
        if rng.random() < (0.9 if position == 0 else 0.6):
            statuses, verbs = rng.choice(names.LIFECYCLES)
            entity.lifecycle, entity.verbs = statuses, verbs
            words = rng.choice(["state", "stage", "phase", f"{single.split()[-1]} status"])  # never `status`: the
            entity.status = _add(entity, Field(style.key(words), "status", words, values=statuses))  # outcome's key
        if rng.random() < (0.85 if position == 0 else 0.5):
            words = rng.choice([actor_single, "owner"])
            entity.owner = _add(entity, Field(style.key(words, "id"), "ref", f"{words} id", target=actor.name))
        if position > 0 and rng.random() < 0.5:
            parent = resources[0]
            entity.parent = _add(entity, Field(style.key(parent.name, "id"), "ref", f"{parent.name} id",
                                               target=parent.name))
        if rng.random() < (0.75 if position == 0 else 0.45):
            words = rng.choice(names.QUANTITY_FIELDS)
            entity.quantity = _add(entity, Field(style.key(words), "int", words, low=0, high=150))
        if rng.random() < (0.7 if position == 0 else 0.45):
            words = f"{rng.choice(names.PRICE_FIELDS)} {money_suffix}"
            entity.price = _add(entity, Field(style.key(words), "money", words, low=2, high=400))
        if rng.random() < 0.6:
            words = rng.choice(["created at", "registered at", "opened at"])
            entity.created = _add(entity, Field(style.key(words), "time", words))
        for _ in range(rng.choice([1, 1, 2, 3])):
            _add_extra(rng, style, entity, money_suffix)
        if resources and rng.random() < 0.4:  # an array of ids, as real records list what they group or hold
            other = rng.choice(resources)
            _add(entity, Field(style.key(other.name, "ids"), "refs", f"{other.name} ids", target=other.name))
        entity.immutable = tuple(f.key for f in entity.fields
                                 if f.key not in (entity.status, entity.quantity) and f.kind not in ("tags", "map"))
        resources.append(entity)
    return [actor, *resources]


def _entity(rng: random.Random, style: Style, single: str, plural: str, used: set[str]) -> Entity:
    ids = id_format(rng, single)
    id_key = style.key(single, "id")
    used.add(id_key)
    code = code_word(single.split()[-1] if rng.random() < 0.5 else single)
    return Entity(name=single, plural=plural, store=style.key(plural), id_key=id_key, ids=ids,
                  storage="map" if rng.random() < 0.3 else "list", fields=[], code=code)


def _field(style: Style, kind: str, words: str, **details: Any) -> Field:
    return Field(style.key(words), kind, words, **details)


def _add(entity: Entity, field: Field) -> str:
    """Add `field` unless the entity has a field of that key already; its key either way."""
    if all(f.key != field.key for f in entity.fields) and field.key != entity.id_key:
        entity.fields.append(field)
    return field.key


def add_field(entity: Entity, field: Field) -> Field:
    """Add `field` to the entity's records (unless it has one of that key); the entity's field of that key."""
    return entity.field(_add(entity, field))


def _add_extra(rng: random.Random, style: Style, entity: Entity, money_suffix: str) -> None:
    """One more field of a random kind."""
    kind = rng.choices(["enum", "bool", "int", "money", "code", "contact", "object", "tags", "map", "float", "time"],
                       weights=[5, 4, 3, 2, 3, 2, 2, 2, 1, 1, 2])[0]
    if kind == "enum":
        words, values = rng.choice(names.ENUM_FIELDS)
        _add(entity, _field(style, "enum", words, values=values))
    elif kind == "bool":
        words = rng.choice(names.BOOL_FIELDS)
        _add(entity, _field(style, "bool", rng.choice([words, f"is {words}"]) if " " not in words else words))
    elif kind == "int":
        words, low, high = rng.choice(names.INT_FIELDS)
        _add(entity, _field(style, "int", words, low=low, high=high))
    elif kind == "money":
        _add(entity, _field(style, "money", f"{rng.choice(names.MONEY_FIELDS)} {money_suffix}", low=5, high=2000))
    elif kind == "code":
        words, pattern, maker = rng.choice(names.CODE_FIELDS)
        _add(entity, _field(style, "code", words, values=(maker,), pattern=pattern))
    elif kind == "contact":
        words, maker = rng.choice(names.CONTACT_FIELDS)
        _add(entity, _field(style, maker, words))
    elif kind == "object":
        words, parts = rng.choice(names.NESTED_OBJECTS)
        fields = tuple(Field(style.key(w), "int" if m == "int" else "code", w, values=(m,), low=1, high=900)
                       for w, m in parts)
        _add(entity, _field(style, "object", words, parts=fields))
    elif kind == "tags":
        _add(entity, _field(style, "tags", rng.choice(["tags", "labels", "keywords"])))
    elif kind == "map":
        words, maker = rng.choice(names.MAP_FIELDS)
        _add(entity, _field(style, "map", words, values=(maker,)))
    elif kind == "float":
        _add(entity, _field(style, "float", rng.choice(["rating", "score", "condition score"]), low=1, high=5))
    else:
        _add(entity, _field(style, "time", rng.choice(names.TIME_FIELDS)))


# --- records ------------------------------------------------------------------------------------------------


def make_records(entity: Entity, count: int, rng: random.Random, now: dt.datetime, host: str,
                 targets: dict[str, list[str]]) -> list[JSON]:
    """`count` records of `entity` with distinct ids and labels; `targets` lists the ids a ref may point to."""
    ids: set[str] = set()
    labels: set[str] = set()
    records = []
    while len(records) < count:
        record_id = entity.ids.make(rng)
        if record_id in ids:
            continue
        record = {entity.id_key: record_id}
        for f in entity.fields:
            record[f.key] = value_of(f, rng, now, host, targets, entity)
            if f.kind == "email" and entity.field(entity.label).kind == "person":  # the person's own address
                record[f.key] = email(rng, host, record[entity.label])
        if entity.label and record[entity.label] in labels:
            continue
        ids.add(record_id)
        labels.add(record.get(entity.label))
        records.append(record)
    return records


def value_of(f: Field, rng: random.Random, now: dt.datetime, host: str, targets: dict[str, list[str]],
             entity: Entity | None = None) -> Any:
    """A random value of field `f`."""
    kind = f.kind
    if kind == "label":
        return thing_label(rng)
    if kind == "person":
        return person(rng)
    if kind == "email":
        return email(rng, host)
    if kind == "phone":
        return phone(rng)
    if kind == "code":
        return formatted(f.values[0], rng) if f.values[0] != "int" else rng.randrange(f.low, f.high)
    if kind == "int":
        if entity is not None and f.key == entity.quantity and rng.random() < 0.1:
            return 0
        return rng.randrange(f.low, f.high + 1)
    if kind == "money":
        return rng.randrange(f.low, f.high) * 100 + rng.choice([0, 0, 25, 50, 95, 99])
    if kind == "float":
        return round(rng.uniform(f.low, f.high), 1)
    if kind in ("enum", "status"):
        weights = [4, 3, 2, 1] if kind == "status" else None
        return rng.choices(f.values, weights=weights[: len(f.values)] if weights else None)[0]
    if kind == "bool":
        return rng.random() < 0.4
    if kind == "time":
        return stamp(now - dt.timedelta(minutes=rng.randrange(60, 400 * 24 * 60)))
    if kind == "object":
        return {part.key: value_of(part, rng, now, host, targets) for part in f.parts}
    if kind == "tags":
        return rng.sample(names.TAGS, rng.choice([0, 1, 1, 2, 3]))
    if kind == "map":
        keys = {formatted(f.values[0], rng) if f.values[0] == "shelf" else _map_key(f.values[0], rng)
                for _ in range(rng.randrange(1, 4))}
        return {key: rng.randrange(0, 60) for key in sorted(keys)}
    if kind == "ref":
        return rng.choice(targets[f.target])
    if kind == "refs":
        pool = targets[f.target]
        return sorted(rng.sample(pool, min(len(pool), rng.choice([0, 1, 1, 2, 3]))))
    raise ValueError(kind)


def _map_key(maker: str, rng: random.Random) -> str:
    return rng.choice(["Z1", "Z2", "Z3", "Z4"]) if maker == "zone" else rng.choice(["north", "south", "east", "west"])
