"""The blueprint of a synthetic world: what its records hold and what each tool does, as plain data.

The generator draws a Blueprint from (seed, index); the world file, its rules and the generic simulator are all
read off the same Blueprint, so the rules the prompt states are the rules the simulator obeys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.synth.naming import IdFormat, Style

JSON = dict[str, Any]


@dataclass(frozen=True)
class Field:
    """One field of an entity's records.

    kind: label | person | email | phone | code | int | money | float | enum | status | bool | time | object |
    tags | map | ref | refs. `values`: an enum's or a status's values, a code's maker, a map's key maker; `parts`:
    an object's fields; `target`: the entity a ref (one id) or refs (an array of ids) points to."""

    key: str
    kind: str
    words: str  # the field in words, for rules and messages ("unit price")
    values: tuple = ()
    low: int = 0
    high: int = 0
    pattern: str | None = None
    target: str = ""
    parts: tuple[Field, ...] = ()


@dataclass
class Entity:
    """A kind of record: its words, where the state keeps it (a list, or a map keyed by id), its id and fields.

    The roles name fields the tools reason about: `label` (its name), `status` (a lifecycle), `owner` (the actor
    it belongs to), `parent` (another resource it sits in), `quantity` (a stock or balance that must suffice),
    `price` (money per unit)."""

    name: str  # "seed packet"
    plural: str
    store: str  # its key in the state
    id_key: str  # its id field in records, responses and parameters
    ids: IdFormat
    storage: str  # "list" or "map"
    fields: list[Field]
    code: str  # SEED_PACKET, in error codes
    label: str = ""
    status: str = ""
    owner: str = ""
    parent: str = ""
    quantity: str = ""
    price: str = ""
    created: str = ""
    lifecycle: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()  # verb into lifecycle[i + 1]
    immutable: tuple[str, ...] = ()  # fields no tool ever changes (the rules compare them with the state)

    def field(self, key: str) -> Field:
        """The field of this key; `address.city`, a part of an object field."""
        outer, _, inner = key.partition(".")
        found = next(f for f in self.fields if f.key == (outer if inner else key))
        return next(p for p in found.parts if p.key == inner) if inner else found


@dataclass(frozen=True)
class Formula:
    """An integer computed from shown numbers: `family` with constants `k`; operands named `a` (the call's
    amount), `p` (a price or quantity read from the record) — see formulas.py."""

    family: str
    k: tuple[int, ...] = ()


@dataclass(frozen=True)
class Precondition:
    """What must hold before an action changes anything, and the error code when it does not.

    kind: status (the record is in one of `statuses`), quantity (its quantity covers the amount), window (the
    given time is from now to now + `seconds`), owner (the given actor owns the record)."""

    kind: str
    code: str
    statuses: tuple[str, ...] = ()
    seconds: int = 0


@dataclass
class ToolPlan:
    """One tool: its family, schemas and everything its handler and its rules need.

    family: get | search | create | update | delete | action | transfer | batch | login. `params` maps a role
    (id, owner, amount, when, token, limit, ids, value, session, user, secret, filters...) to the parameter's key;
    `out` maps a role to the response key; `view` lists the record fields a response shows."""

    name: str
    family: str
    entity: str  # the entity's name ("" for login)
    description: str
    parameters: JSON
    response: JSON
    params: dict[str, str] = field(default_factory=dict)
    out: dict[str, str] = field(default_factory=dict)
    view: tuple[str, ...] = ()
    nested: str = ""  # the key the record view sits under ("" = at the top level)
    joins: tuple[tuple[str, str, str], ...] = ()  # (response key, ref field, target field): a neighbour's value
    filters: tuple[tuple[str, str], ...] = ()  # (parameter key, field key) a search matches exactly
    contains: tuple[str, str] = ("", "")  # (parameter key, field key) a search matches by substring
    preconditions: tuple[Precondition, ...] = ()
    transition: tuple[tuple[str, ...], str] | None = None  # (from statuses, to status)
    formula: Formula | None = None  # the action's charge / create's total
    usage: int = 1  # quantity used per unit of amount
    period: int = 0  # seconds a derived timestamp lies after its base
    link: str = ""  # a URL or path prefix the new id is joined to
    default_limit: int = 0
    max_limit: int = 0
    updatable: tuple[str, ...] = ()  # update: the fields it may change
    batch_field: str = ""  # batch: the enum field it sets
    max_ids: int = 0
    partial: bool = False  # may answer status "partial"
    errors: dict[str, str] = field(default_factory=dict)  # kind -> code (not_found, token, duplicate, ...)


@dataclass
class Blueprint:
    """Everything a synthetic world is: where it came from, its style, entities, tools, auth and error words."""

    seed: int
    index: int
    name: str
    domain: str
    host: str
    style: Style
    now_key: str
    actor: str  # the actor entity's name
    entities: dict[str, Entity]
    tools: list[ToolPlan] = field(default_factory=list)
    login: JSON | None = None  # auth settings when the world has sessions
    codes: dict[str, str] = field(default_factory=dict)  # missing, invalid, unknown_tool, rate, no_auth...
    transient: tuple[str, ...] = ()  # error codes an inject_error directive uses in this world
    retry_seconds: int = 30
    money: str = "cents"  # the word money fields end in
    token_style: str = "b64"  # how page tokens are written: b64, prefixed or hex
    large_share: float = 0.0  # share of initial states with one long listing (50+ records)
    shapes: bool = False  # also the tools of shapes.py (a `:shapes` world)

    @property
    def ref(self) -> str:
        from wmstudio.world.synth.registry import synthetic_ref

        return synthetic_ref(self.seed, self.index, self.shapes)

    def tool(self, name: str) -> ToolPlan:
        return next(t for t in self.tools if t.name == name)

    def mutating(self) -> list[str]:
        """The tools that may change the state (a rule that reads the initial state holds until one succeeds)."""
        return [t.name for t in self.tools if t.family not in ("get", "search")]
