"""Laying a response out as a canvas: which text is fixed (anchors) and which values are masked spans.

Skeleton rules (documented choices):
- a response schema is written as compact JSON; braces, keys, quotes, colons and commas are anchors;
  each value is a span with a length budget by type (SpanBudgets) and a grammar (grammars.py);
- objects list every schema property in schema order (plus anchored extra keys); `const` and `null`
  values are anchors; `anyOf`/`oneOf` take the first non-null branch; local `$ref`s are followed;
- objects keyed by id (no `properties`, an `additionalProperties` schema) get `array_items` entry slots, each a
  key span and the entry's value skeleton, closed by end spans like array items (a path names an entry by its
  place: `methods[0]`);
- arrays of objects (or arrays an anchor indexes into) get `array_items` item skeletons, kept within
  minItems..maxItems and extended to every anchored index; each item past the required ones (minItems,
  anchored indices) is preceded by a one-slot `end` span: the end token there says the item is not
  there (training puts it before every missing item; Canvas.decode cuts the array at the first one), a
  pad keeps the item, so object arrays have variable length too;
  arrays of scalars are one span holding a typed `[...]` list; open objects and values are one span of
  bounded JSON.
Free mode is one span holding one JSON value (grammar-constrained); with text anchors it is cut by them, and pinned
fields go at its end, followed by FREE_TAIL slots (then the text between anchors is free)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from wmstudio.model.canvas.constraints import END, Vocabulary
from wmstudio.model.canvas.grammars import (
    ArrayText,
    JsonText,
    NumberText,
    Options,
    QuotedText,
    TextContent,
    pattern_grammar,
)
from wmstudio.model.network.tokenizer import encode_text
from wmstudio.problems import InvalidInput
from wmstudio.world.jsonpath import format_path, parse_path
from wmstudio.world.rules.patterns import shortest_text
from wmstudio.world.steering.anchors import Anchor

MAX_DEPTH = 12
CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")  # where a camelCase key's next word starts: endsAt -> ends_at
# a string's budget by what its key says it holds (first match wins), measured on the simulated worlds' corpus
KEY_KINDS = (
    (re.compile(r"token|secret|api_?key|password|signature|hash"), "secret"),
    (re.compile(r"message|description|reason|detail|summary|text|note|content|comment"), "long_string"),
    (re.compile(r"(_at|time|timestamp)$"), "timestamp"),
    (re.compile(r"path|source|destination|url|uri|file|folder|dir"), "location"),
    (re.compile(r"(^|_)ids?$"), "identifier"),
)


class _NullShape:
    """A shape saying the value is null (a nullable field the copied record holds as null): laid out as `null`."""

    def __repr__(self) -> str:
        return "NULL_SHAPE"


NULL_SHAPE = _NullShape()


class ExactItems(list):
    """An array's shape whose items are all there is: laid out with exactly these item slots and no end spans."""


class ExactEntries(dict):
    """A map's shape whose entries are all there is: laid out as an object with these keys, each value a slot."""


class AtLeastItems(list):
    """An array's shape whose items are all kept: these item slots are required, end spans may add more after."""


@dataclass(frozen=True)
class Holds:
    """A leaf's shape: the value its slot is to hold, so the slot is made long enough for it (up to MAX_HELD)."""

    value: Any

    @property
    def text(self) -> str:
        text = dump(self.value)
        return text[1:-1] if isinstance(self.value, str) else text


MAX_HELD = 64  # the longest slot a held value widens a span to


class Chosen(dict):
    """An object's shape that also names the anyOf/oneOf branch its value takes (`branch`, a resolved schema)."""

    def __init__(self, shape: dict, branch: dict):
        super().__init__(shape)
        self.branch = branch

KEY = "key"  # the kind of a span holding a map entry's key (its path is the entry's, as for an array item)
FORMAT_BUDGETS = {"date": 10, "date-time": 20, "time": 8, "email": 14, "uri": 20, "url": 20, "uuid": 28}
FREE_TAIL = 8  # slots after anchor text placed at the end of a free canvas (to close the JSON)


@dataclass(frozen=True)
class SpanBudgets:
    """How many token slots each kind of value gets (pads fill what a value does not use)."""

    integer: int = 6
    number: int = 8
    string: int = 12
    long_string: int = 24  # keys saying message/description/reason/content/...
    secret: int = 32  # keys saying token/api_key/secret/...
    timestamp: int = 20  # keys ending in _at/time
    location: int = 20  # keys saying path/source/destination/url/...
    identifier: int = 16  # keys id/ids or ending in _id
    array: int = 16  # an array of scalars, written as one span
    json: int = 16  # a value the schema leaves open
    array_items: int = 5  # item slots for an array of objects (the simulated worlds page by 5)
    max_string: int = 64  # cap for budgets taken from maxLength (a short file's text, read whole)


@dataclass
class Span:
    """One masked value: canvas positions `start..start+length`, its JSON path and its grammar.

    `quoted` spans hold a string's content (the quotes are anchors); `grammar` None means free text."""

    path: str
    kind: str  # string | integer | number | boolean | enum | array | json | free
    start: int
    length: int
    grammar: Any = None
    quoted: bool = False
    until: int = 0  # an `end` span: the position where its array's optional items stop (its `]`)

    @property
    def end(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class ItemsEnd:
    """Where the optional items of the array at `path` stop (just before its `]`): how far an end span cuts."""

    path: str


class Layout:
    """A canvas being laid out: anchor text and spans in order (text runs are tokenised whole later).

    `optional_items` False (no end token to spare) gives arrays of objects a fixed number of items."""

    def __init__(self, tokenizer: Any, vocab: Vocabulary, budgets: SpanBudgets, optional_items: bool = True):
        self.tokenizer, self.vocab, self.budgets = tokenizer, vocab, budgets
        self.optional_items = optional_items
        self.pieces: list[str | Span | ItemsEnd] = []

    def text(self, text: str) -> None:
        """Append anchor text (merged with the text before it)."""
        if self.pieces and isinstance(self.pieces[-1], str):
            self.pieces[-1] += text
        elif text:
            self.pieces.append(text)

    def span(self, path: list, kind: str, length: int, grammar: Any = None, quoted: bool = False) -> None:
        """Append a masked span of `length` slots for the value at `path`."""
        self.pieces.append(Span(format_path(path), kind, 0, max(1, length), grammar, quoted))

    def tokens_of(self, text: str) -> int:
        """How many tokens `text` takes on its own."""
        return len(encode_text(self.tokenizer, text))

    def value(self, schema: Any, root: dict, path: list, pins: dict[str, Any], shape: Any, depth: int) -> None:
        """Lay out the value at `path`: pinned text, a structure of anchors, or a span."""
        here = format_path(path)
        if path and here in pins:
            self.text(dump(pins[here]))
            return
        if shape is NULL_SHAPE:
            self.text("null")
            return
        schema = shape.branch if isinstance(shape, Chosen) else resolve_schema(schema, root)
        deeper = any(_is_under(p, path) for p in pins)
        kinds = _types(schema)
        if "const" in schema:
            self.text(dump(schema["const"]))
        elif isinstance(schema.get("enum"), list) and schema["enum"]:
            self._enum(schema["enum"], path)
        elif depth >= MAX_DEPTH:
            self.span(path, "json", self.budgets.json, JsonText(1))
        elif "object" in kinds or (not kinds and isinstance(schema.get("properties"), dict)) or (
            deeper and _next_is_key(pins, path)
        ):
            self._object(schema, root, path, pins, shape, depth)
        elif "array" in kinds or (deeper and not kinds):
            self._array(schema, root, path, pins, shape, depth)
        elif kinds == {"null"}:
            self.text("null")
        elif "boolean" in kinds and len(kinds) == 1:
            self._options(("true", "false"), path, "boolean")
        elif "integer" in kinds:
            low = schema.get("minimum") if isinstance(schema.get("minimum"), (int, float)) else None
            grammar = NumberText(True, signed=low is None or low < 0, at_least_one=low is not None and low >= 1)
            self.span(path, "integer", self._held(shape, self._number_budget(schema, self.budgets.integer)), grammar)
        elif "number" in kinds:
            signed = not (isinstance(schema.get("minimum"), (int, float)) and schema["minimum"] >= 0)
            self.span(path, "number", self._held(shape, self._number_budget(schema, self.budgets.number)),
                      NumberText(False, signed))
        elif "string" in kinds:
            self.text('"')
            self.span(path, "string", self._held(shape, self._string_budget(schema, path)),
                      pattern_grammar(schema) or TextContent(),
                      quoted=True)
            self.text('"')
        else:
            self.span(path, "json", self.budgets.json, JsonText(1))

    def _object(self, schema: dict, root: dict, path: list, pins: dict, shape: Any, depth: int) -> None:
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        keys = list(properties)
        for pinned in pins:
            key = _child_key(pinned, path)
            if isinstance(key, str) and key not in keys:
                keys.append(key)
        if shape is not None and not isinstance(shape, dict):
            raise InvalidInput("value is not an object")
        entries = resolve_schema(schema.get("additionalProperties"), root) if not properties else {}
        if not properties and entries and not any(_is_under(p, path) for p in pins) and self.optional_items \
                and not isinstance(shape, ExactEntries):
            self._map(entries, root, path, pins, shape, depth)
            return
        if isinstance(shape, dict):
            keys = [k for k in keys if k in shape] + [k for k in shape if k not in keys]
        if not keys and not properties:
            self.span(path, "json", self.budgets.json, JsonText(1, "{"))
            return
        self.text("{")
        for i, key in enumerate(keys):
            self.text(("," if i else "") + dump(key) + ":")
            child = properties.get(key, _additional(schema))
            sub = shape.get(key) if isinstance(shape, dict) else None
            self.value(child, root, path + [key], pins, sub, depth + 1)
        self.text("}")

    def _map(self, entries: dict, root: dict, path: list, pins: dict, shape: Any, depth: int) -> None:
        """An object keyed by ids (`additionalProperties`): entry slots like an array's items, each a key span and
        the entry's value laid out from its schema, closed by an end span so the map has any size up to them."""
        count = max(len(shape), self.budgets.array_items) if isinstance(shape, dict) else self.budgets.array_items
        values = list(shape.values()) if isinstance(shape, dict) else []
        self.text("{")
        for i in range(count):
            self.span(path + [i], END, 1)
            self.text(',"' if i else '"')
            self.span(path + [i], KEY, self.budgets.identifier, TextContent(), quoted=True)
            self.text('":')
            self.value(entries, root, path + [i], pins, values[i] if i < len(values) else None, depth + 1)
        self.pieces.append(ItemsEnd(format_path(path)))
        self.text("}")

    def _array(self, schema: dict, root: dict, path: list, pins: dict, shape: Any, depth: int) -> None:
        items = resolve_schema(schema.get("items") if isinstance(schema.get("items"), dict) else {}, root)
        indexed = [_child_key(p, path) for p in pins]
        indexed = [i for i in indexed if isinstance(i, int)]
        item_kinds = _types(items)
        exact = isinstance(shape, ExactItems)
        structured = "object" in item_kinds or isinstance(items.get("properties"), dict) or indexed \
            or isinstance(shape, (ExactItems, AtLeastItems))  # a copied record's ids, item by item
        if shape is not None and not isinstance(shape, list):
            raise InvalidInput("value is not a list")
        if not structured:
            grammar = _item_grammar(items)
            self.span(path, "array", self.budgets.array, ArrayText(grammar) if grammar else ArrayText(JsonText(0)))
            return
        slots = _item_count(schema, self.budgets.array_items, indexed)
        required = max(_required_items(schema, indexed), len(shape) if isinstance(shape, AtLeastItems) else 0)
        if exact:
            count = max([len(shape), *[i + 1 for i in indexed]])
        else:
            count = max(len(shape), slots) if isinstance(shape, list) else slots
        optional = self.optional_items and required < count and not exact
        self.text("[")
        for i in range(count):
            if optional and i >= required:
                self.span(path + [i], END, 1)
            if i:
                self.text(",")
            sub = shape[i] if isinstance(shape, list) and i < len(shape) else None
            self.value(items, root, path + [i], pins, sub, depth + 1)
        if optional:
            self.pieces.append(ItemsEnd(format_path(path)))
        self.text("]")

    def _enum(self, options: list, path: list) -> None:
        if all(isinstance(o, str) for o in options):
            texts = tuple(dict.fromkeys(ascii_json(o)[1:-1] for o in options))
            self.text('"')
            self._options(texts, path, "enum", quoted=True)
            self.text('"')
        else:
            self._options(tuple(dict.fromkeys(ascii_json(o) for o in options)), path, "enum")

    def _options(self, texts: tuple[str, ...], path: list, kind: str, quoted: bool = False) -> None:
        longest = max(self.tokens_of(t) for t in texts) if texts else 1
        self.span(path, kind, longest, Options(texts), quoted=quoted)

    def _held(self, shape: Any, budget: int) -> int:
        """A span's length: its budget, widened to fit the value a Holds shape says it holds."""
        return max(budget, min(self.tokens_of(shape.text), MAX_HELD)) if isinstance(shape, Holds) else budget

    def _number_budget(self, schema: dict, default: int) -> int:
        bounds = [abs(schema[k]) for k in ("minimum", "maximum") if isinstance(schema.get(k), (int, float))]
        if "maximum" in schema and "minimum" in schema and all(float(b).is_integer() for b in bounds):
            return max(1, min(default, max(len(str(int(b))) for b in bounds) + 1))
        return default

    def _string_budget(self, schema: dict, path: list) -> int:
        b = self.budgets
        if isinstance(schema.get("format"), str) and schema["format"] in FORMAT_BUDGETS:
            return FORMAT_BUDGETS[schema["format"]]
        key = next((p for p in reversed(path) if isinstance(p, str)), "")
        key = CAMEL_HUMP.sub("_", key).lower()  # endsAt reads as ends_at
        kind = next((name for pattern, name in KEY_KINDS if pattern.search(key)), "string")
        budget = getattr(b, kind)
        if isinstance(schema.get("maxLength"), int) and schema["maxLength"] >= 0:
            return max(1, min(schema["maxLength"], b.max_string))
        shortest = shortest_text(schema["pattern"]) if isinstance(schema.get("pattern"), str) else None
        return max(budget, min(len(shortest), b.max_string)) if shortest else budget  # room for one of its shape


FREE_JSON_DEPTH = 4  # nesting a free canvas's JSON grammar allows


def lay_out_free(builder: Layout, length: int, text_anchors: Sequence[tuple[int, str]], pins: list[Anchor],
                 json_value: bool = True) -> None:
    """Free span of `length` slots cut at each text anchor's offset; path anchors go at the end. With neither (and
    `json_value`), the span holds one JSON value (bounded depth), so free-mode output always parses."""
    if json_value and not text_anchors and not pins:
        builder.span([], "free", length, JsonText(FREE_JSON_DEPTH))
        return
    pieces = sorted(((min(max(int(o), 0), length), str(t)) for o, t in text_anchors), key=lambda p: p[0])
    if pins:
        pinned = ",".join(f"{dump(parse_path(a.path)[-1])}:{dump(a.value)}" for a in pins)
        pieces.append((length, pinned))
    at = 0
    for offset, text in pieces:
        if offset > at:
            builder.span([], "free", offset - at)
            at = offset
        builder.text(text)
    if at < length:
        builder.span([], "free", length - at)
    if pins:
        builder.span([], "free", FREE_TAIL)


def dump(value: Any) -> str:
    """Compact JSON text as the canvas writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ascii_json(value: Any) -> str:
    """Option text with non-ASCII escaped (grammars see every non-ASCII character as one class)."""
    return json.dumps(value, separators=(",", ":"))


def _types(schema: dict) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        named = [t for t in declared if isinstance(t, str)]
        first = next((t for t in named if t != "null"), None)
        return {first} if first else set(named)
    return set()


def resolve_schema(schema: Any, root: dict, depth: int = 0) -> dict:
    """Follow local `$ref`s and take the first non-null anyOf/oneOf/allOf branch."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = ref_target(ref, root)
        merged = {**(resolve_schema(target, root, depth + 1) if isinstance(target, dict) else {}),
                  **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key, []) if isinstance(b, dict)]
        if branches:
            chosen = next((b for b in branches if _types(resolve_schema(b, root, depth + 1)) != {"null"}), branches[0])
            own = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}
            return {**resolve_schema(chosen, root, depth + 1), **own}
    return schema


def ref_target(ref: str, root: dict) -> Any:
    """What a local `$ref` (`#`, `#/$defs/Order`) points at in `root`; None for any other reference."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for raw in ref[2:].split("/"):
        target = target.get(raw.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    return target


def nullable(schema: Any, root: dict, depth: int = 0) -> bool:
    """Whether `schema` admits null: a `null` type, or an anyOf/oneOf branch (or a `$ref`'s target) that does."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return False
    declared = schema.get("type")
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str) and nullable(ref_target(ref, root), root, depth + 1):
        return True
    return any(nullable(branch, root, depth + 1) for key in ("anyOf", "oneOf")
               for branch in schema.get(key, []) if isinstance(branch, dict))


def _additional(schema: dict) -> Any:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def _item_grammar(items: dict) -> Any:
    if isinstance(items.get("enum"), list) and items["enum"]:
        return Options(tuple(dict.fromkeys(ascii_json(o) for o in items["enum"])))
    kinds = _types(items)
    if "string" in kinds:
        return QuotedText()
    if "integer" in kinds:
        return NumberText(integer=True)
    if "number" in kinds:
        return NumberText()
    if "boolean" in kinds:
        return Options(("true", "false"))
    return None


def _item_count(schema: dict, default: int, indexed: list[int]) -> int:
    """Item skeletons for an array: the default within minItems..maxItems, and enough for every anchored index."""
    count = default
    if isinstance(schema.get("minItems"), int):
        count = max(count, min(schema["minItems"], 8))
    if isinstance(schema.get("maxItems"), int):
        count = min(count, max(schema["maxItems"], 0))
    return max([count, *[i + 1 for i in indexed]])


def _required_items(schema: dict, indexed: list[int]) -> int:
    """Items an array must keep: minItems (capped like the slots) and every anchored index."""
    least = min(schema["minItems"], 8) if isinstance(schema.get("minItems"), int) else 0
    return max([least, *[i + 1 for i in indexed]])


def _is_under(pinned: str, path: list) -> bool:
    parts = parse_path(pinned)
    return len(parts) > len(path) and parts[: len(path)] == path


def _child_key(pinned: str, path: list) -> str | int | None:
    parts = parse_path(pinned)
    return parts[len(path)] if len(parts) > len(path) and parts[: len(path)] == path else None


def _next_is_key(pins: dict, path: list) -> bool:
    return any(isinstance(_child_key(p, path), str) for p in pins)
