"""Type names from other ecosystems (Python, Java, JavaScript, BFCL) mapped to JSON Schema fragments.

Tool files written by hand or generated from code say `float`, `dict`, `HashMap`, `list(str)` or
`Union[List[dict], dict]`; this module turns each into the JSON Schema it means and says what was lost."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

STANDARD_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


@dataclass(frozen=True)
class MappedType:
    """A JSON Schema fragment for a type name (`{}` = any value) and what the mapping lost, if anything."""

    schema: dict[str, Any]
    note: str | None = None  # None: an exact synonym (`float` -> number); else what was lost
    standard: bool = False  # the name was already a JSON Schema type


def _simple(kind: str, note: str | None = None, **extra: Any) -> MappedType:
    return MappedType({"type": kind, **extra}, note)


# Lower-cased names; exact synonyms carry no note.
_ALIASES: dict[str, MappedType] = {
    **{name: _simple("object") for name in (
        "dict", "map", "hashmap", "hashtable", "treemap", "linkedhashmap", "mapping", "jsonobject", "struct",
        "record", "obj")},
    "json": _simple("object", "'json' taken as an object"),
    **{name: _simple("array") for name in (
        "list", "arraylist", "linkedlist", "array", "sequence", "vector", "queue", "stack", "deque",
        "iterable", "collection", "jsonarray")},
    "tuple": _simple("array", "fixed length not kept"),
    **{name: _simple("array", uniqueItems=True) for name in ("set", "hashset", "frozenset", "treeset")},
    **{name: _simple("number") for name in (
        "float", "double", "decimal", "bigdecimal", "real", "num", "numeric", "float32", "float64")},
    **{name: _simple("integer") for name in (
        "int", "long", "short", "byte", "biginteger", "int32", "int64", "uint", "uint32", "uint64")},
    **{name: _simple("string") for name in ("str", "text", "unicode")},
    **{name: _simple("string", minLength=1, maxLength=1) for name in ("char", "character")},
    "bytes": _simple("string", "bytes taken as text"),
    "bool": _simple("boolean"),
    **{name: _simple("null") for name in ("none", "nonetype", "nil", "void")},
    **{name: MappedType({}, "any value") for name in ("any", "", "mixed", "unknown", "typing.any")},
    "datetime": _simple("string", format="date-time"),
    "date": _simple("string", format="date"),
    "time": _simple("string", format="time"),
}

_TOKEN = re.compile(r"\s*(\.\.\.|[A-Za-z_][\w.$]*|'[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?|[\[\]()<>,|]|\S)")


def map_type_name(text: str) -> MappedType | None:
    """The JSON Schema for a type name or expression (`list(str)`, `Optional[int]`, `String[]`); None if unknown."""
    stripped = text.strip()
    if stripped in STANDARD_TYPES:
        return MappedType({"type": stripped}, None, standard=True)
    lowered = stripped.lower()
    if lowered in STANDARD_TYPES:
        return _simple(lowered)
    if lowered in _ALIASES:
        return _ALIASES[lowered]
    if not re.search(r"[\[\]()<>|]", stripped):
        return None
    try:
        parser = _ExpressionParser(stripped)
        schema = parser.union()
        parser.expect_end()
    except ValueError:
        return None
    return MappedType(schema, "; ".join(parser.notes) or None)


class _ExpressionParser:
    """Recursive descent over `Base[args]`, `Base(args)`, `Base<args>`, `X | Y` and `X[]`."""

    def __init__(self, text: str):
        self.tokens = [m.group(1) for m in _TOKEN.finditer(text)]
        self.pos = 0
        self.notes: list[str] = []

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end")
        self.pos += 1
        return token

    def expect_end(self) -> None:
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()!r}")

    def union(self) -> dict[str, Any]:
        options = [self.term()]
        while self.peek() == "|":
            self.take()
            options.append(self.term())
        return options[0] if len(options) == 1 else _any_of(options)

    def term(self) -> dict[str, Any]:
        token = self.take()
        if token[0] in "'\"" or re.fullmatch(r"-?\d+(?:\.\d+)?", token):
            raise ValueError("a literal is not a type")
        base = token.split(".")[-1].lower() if token.lower().startswith("typing.") else token.lower()
        args: list[Any] = []
        if self.peek() in ("[", "(", "<") and not self._array_suffix():
            closing = {"[": "]", "(": ")", "<": ">"}[self.take()]
            args = self.arguments(closing, literal=base == "literal")
        schema = self.apply(base, token, args)
        while self._array_suffix():  # Java `String[]`
            self.pos += 2
            schema = {"type": "array", "items": schema}
        return schema

    def _array_suffix(self) -> bool:
        return self.peek() == "[" and self.tokens[self.pos + 1: self.pos + 2] == ["]"]

    def arguments(self, closing: str, literal: bool) -> list[Any]:
        args: list[Any] = []
        while self.peek() != closing:
            if literal:
                token = self.take()
                args.append(token[1:-1] if token[0] in "'\"" else _number_or_name(token))
            elif self.peek() == "...":
                args.append(self.take())
            else:
                args.append(self.union())
            if self.peek() == ",":
                self.take()
            elif self.peek() != closing:
                raise ValueError("expected , or closing bracket")
        self.take()
        return args

    def apply(self, base: str, token: str, args: list[Any]) -> dict[str, Any]:
        if base == "literal":
            return {"enum": args}
        if base in ("union", "optional"):
            options = args + ([{"type": "null"}] if base == "optional" else [])
            if not options:
                raise ValueError("empty union")
            return _any_of(options)
        mapped = map_type_name(token) if not args else None
        if not args:
            if mapped is None:
                self.notes.append(f"unknown type {token!r} taken as any value")
                return {}
            if mapped.note:
                self.notes.append(f"{token!r}: {mapped.note}")
            return dict(mapped.schema)
        kind = _ALIASES.get(base)
        if base == "tuple":
            if len(args) == 2 and args[1] == "...":
                return {"type": "array", "items": args[0]}
            items = [a for a in args if a != "..."]
            return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
        if kind is not None and kind.schema.get("type") == "array":
            return {**kind.schema, "items": args[0]} if len(args) == 1 else dict(kind.schema)
        if kind is not None and kind.schema.get("type") == "object":
            return {"type": "object", "additionalProperties": args[-1]} if len(args) == 2 else {"type": "object"}
        raise ValueError(f"{token} does not take arguments")


def _any_of(options: list[dict[str, Any]]) -> dict[str, Any]:
    """`{"type": [a, b]}` when every option is a bare type, else `{"anyOf": [...]}`; any value wins."""
    if any(option == {} for option in options):
        return {}
    if all(set(option) == {"type"} and isinstance(option["type"], str) for option in options):
        names = list(dict.fromkeys(option["type"] for option in options))
        return {"type": names[0]} if len(names) == 1 else {"type": names}
    return {"anyOf": options}


def _number_or_name(token: str) -> Any:
    try:
        return int(token)
    except ValueError:
        try:
            return float(token)
        except ValueError:
            return {"true": True, "false": False, "none": None}.get(token.lower(), token)
