"""The response canvas: anchor tokens the model must keep and masked spans it fills in (DESIGN.md §3).

Skeleton mode lays a response schema out as compact JSON: braces, keys, quotes, colons and commas
are anchors, each value is a masked span with a length budget by type and a grammar constraint
(constraints.py), and user anchors pin values. Free mode is one free span with optional anchor text.
Pads fill unused slots and are dropped by `Canvas.decode`, so values have variable length.

Layout rules (documented choices):
- objects list every schema property in schema order (plus anchored extra keys); `const` and `null`
  values are anchors; `anyOf`/`oneOf` take the first non-null branch; local `$ref`s are followed.
- arrays of objects (or arrays an anchor indexes into) get `array_items` item skeletons (more when an
  anchor names a later index); arrays of scalars are one span holding a typed `[...]` list; arrays
  and objects the schema leaves open are one span of bounded JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from wmstudio.model.constraints import Vocabulary, completable, vocabulary_for
from wmstudio.model.grammars import ArrayText, JsonText, NumberText, Options, QuotedText, TextContent
from wmstudio.model.tokenizer import encode_text
from wmstudio.world.anchors import Anchor, anchor_problems, parse_anchors
from wmstudio.world.jsonpath import format_path, parse_path
from wmstudio.world.problems import InvalidInput, Problem

SKELETON, FREE = "skeleton", "free"
MAX_CANVAS_TOKENS = 4096
MAX_DEPTH = 12
LONG_TEXT_WORDS = ("message", "description", "reason", "detail", "summary", "text", "note", "error", "content")
FORMAT_BUDGETS = {"date": 10, "date-time": 20, "time": 8, "email": 14, "uri": 20, "url": 20, "uuid": 28}
FREE_TAIL = 8  # slots after anchor text placed at the end of a free canvas (to close the JSON)


@dataclass(frozen=True)
class SpanBudgets:
    """How many token slots each kind of value gets (pads fill what a value does not use)."""

    integer: int = 6
    number: int = 8
    string: int = 12
    long_string: int = 24  # strings whose key says message/description/reason/...
    array: int = 16  # an array of scalars, written as one span
    json: int = 16  # a value the schema leaves open
    array_items: int = 2  # item skeletons for an array of objects
    max_string: int = 48  # cap for budgets taken from maxLength


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

    @property
    def end(self) -> int:
        return self.start + self.length


@dataclass
class Canvas:
    """The response being denoised: `tokens` (anchors, and `mask_id` at masked slots) and its spans.

    `span_of[i]` is the span index of position i, or -1 for an anchor position."""

    tokens: list[int]
    span_of: list[int]
    spans: list[Span]
    mode: str
    vocab: Vocabulary
    mask_id: int
    pad_id: int
    tokenizer: Any = None
    anchors: list[Anchor] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def masked_positions(self) -> list[int]:
        return [i for i, s in enumerate(self.span_of) if s >= 0]

    def kinds(self) -> list[str]:
        """`"anchor"` or `"masked"` for each position (what the UI shades differently)."""
        return ["masked" if s >= 0 else "anchor" for s in self.span_of]

    def decode(self, tokens: Sequence[int]) -> str:
        """The response text: pads removed, masks (if any are left) shown as nothing."""
        return self.vocab.decode([t for t in tokens if t != self.mask_id])

    def piece(self, token: int) -> str:
        """Display text of one token (a partial UTF-8 byte shows as U+FFFD); '' for pads."""
        return self.vocab.decode([token])

    def fill(self, value: Any) -> list[int] | None:
        """The canvas with every span holding `value`'s tokens (right-padded): a skeleton training target.

        None when `value` does not fit: a missing field, a wrong type, or a value longer than its span."""
        tokens = list(self.tokens)
        for span in self.spans:
            ids = _value_tokens(self.tokenizer, span, value)
            if ids is None or len(ids) > span.length:
                return None
            ids = ids + [self.pad_id] * (span.length - len(ids))
            if span.grammar is not None and not completable(self.vocab.table(span.grammar), ids):
                return None
            tokens[span.start : span.end] = ids
        return tokens


def build_canvas(
    tokenizer: Any,
    schema: dict[str, Any] | None,
    anchors: Iterable[Anchor | str] = (),
    mode: str = SKELETON,
    free_length: int = 64,
    text_anchors: Sequence[tuple[int, str]] = (),
    budgets: SpanBudgets = SpanBudgets(),
    vocab_size: int | None = None,
    shape: Any = None,
) -> Canvas:
    """The canvas for a response `schema` (skeleton mode) or a free span of `free_length` (free mode).

    `anchors` pin response fields (`status="error"`); `text_anchors` are (offset, text) pieces fixed in a
    free canvas; `vocab_size` is the model's number of logits; `shape` (a response value) makes objects
    and arrays take that value's keys and lengths (for training targets). InvalidInput on bad anchors."""
    pinned = parse_anchors(anchors)
    vocab = vocabulary_for(tokenizer, vocab_size)
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise InvalidInput("the tokenizer has no mask token: a canvas needs one (use a masked diffusion model)")
    builder = _Builder(tokenizer, vocab, budgets)
    if mode == SKELETON:
        if not isinstance(schema, dict):
            raise InvalidInput("the tool has no response schema, so there is no skeleton: use free mode (--free)")
        problems = anchor_problems(pinned, schema)
        if problems:
            raise InvalidInput(problems)
        builder.value(schema, schema, [], {a.path: a.value for a in pinned}, shape, 0)
    elif mode == FREE:
        if free_length < 1:
            raise InvalidInput(Problem("free_length", f"{free_length} slots: give at least 1"))
        _lay_out_free(builder, free_length, text_anchors, pinned)
    else:
        raise InvalidInput(Problem("mode", f"unknown canvas mode {mode!r}: use skeleton or free"))
    canvas = builder.finish(mode, mask_id, tokenizer.pad_token_id, pinned)
    if len(canvas) > MAX_CANVAS_TOKENS:
        raise InvalidInput(
            f"the response canvas has {len(canvas)} tokens, over {MAX_CANVAS_TOKENS}: use a smaller response "
            "schema, fewer array items or smaller span budgets"
        )
    return canvas


def skeleton_target(tokenizer: Any, schema: dict[str, Any], value: Any, budgets: SpanBudgets = SpanBudgets(),
                    vocab_size: int | None = None) -> tuple[Canvas, list[int]] | None:
    """(canvas shaped like `value`, its filled tokens) for training; None when `value` does not fit `schema`."""
    try:
        canvas = build_canvas(tokenizer, schema, mode=SKELETON, budgets=budgets, vocab_size=vocab_size, shape=value)
    except InvalidInput:
        return None
    tokens = canvas.fill(value)
    return (canvas, tokens) if tokens is not None else None


def check_fits(prompt_tokens: int, canvas_tokens: int, max_length: int) -> None:
    """InvalidInput naming both lengths and what to lower when prompt + canvas exceed the model's context."""
    if prompt_tokens + canvas_tokens > max_length:
        raise InvalidInput(
            f"prompt ({prompt_tokens} tokens) + response canvas ({canvas_tokens} tokens) = "
            f"{prompt_tokens + canvas_tokens} tokens, over the model's context of {max_length}: shorten the "
            "history (max_chars), lower --free-length or the span budgets, or use a model with a longer context"
        )


# ----------------------------------------------------------------------------------------------------


class _Builder:
    """Accumulates anchor text and spans; text is tokenised in maximal runs between spans."""

    def __init__(self, tokenizer: Any, vocab: Vocabulary, budgets: SpanBudgets):
        self.tokenizer, self.vocab, self.budgets = tokenizer, vocab, budgets
        self.pieces: list[str | Span] = []

    def text(self, text: str) -> None:
        if self.pieces and isinstance(self.pieces[-1], str):
            self.pieces[-1] += text
        elif text:
            self.pieces.append(text)

    def span(self, path: list, kind: str, length: int, grammar: Any = None, quoted: bool = False) -> None:
        self.pieces.append(Span(format_path(path), kind, 0, max(1, length), grammar, quoted))

    def finish(self, mode: str, mask_id: int, pad_id: int, anchors: list[Anchor]) -> Canvas:
        tokens, span_of, spans = [], [], []
        for piece in self.pieces:
            if isinstance(piece, str):
                ids = encode_text(self.tokenizer, piece)
                tokens += ids
                span_of += [-1] * len(ids)
            else:
                spans.append(replace(piece, start=len(tokens)))
                tokens += [mask_id] * piece.length
                span_of += [len(spans) - 1] * piece.length
        return Canvas(tokens, span_of, spans, mode, self.vocab, mask_id, pad_id, self.tokenizer, anchors)

    def tokens_of(self, text: str) -> int:
        return len(encode_text(self.tokenizer, text))

    # -- skeleton ------------------------------------------------------------------------------------

    def value(self, schema: Any, root: dict, path: list, pins: dict[str, Any], shape: Any, depth: int) -> None:
        """Lay out the value at `path`: pinned text, a structure of anchors, or a span."""
        here = format_path(path)
        if path and here in pins:
            self.text(_dump(pins[here]))
            return
        schema = _resolve(schema, root)
        deeper = any(_is_under(p, path) for p in pins)
        kinds = _types(schema)
        if "const" in schema:
            self.text(_dump(schema["const"]))
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
            signed = not (isinstance(schema.get("minimum"), (int, float)) and schema["minimum"] >= 0)
            self.span(path, "integer", self._number_budget(schema, self.budgets.integer), NumberText(True, signed))
        elif "number" in kinds:
            signed = not (isinstance(schema.get("minimum"), (int, float)) and schema["minimum"] >= 0)
            self.span(path, "number", self._number_budget(schema, self.budgets.number), NumberText(False, signed))
        elif "string" in kinds:
            self.text('"')
            self.span(path, "string", self._string_budget(schema, path), TextContent(), quoted=True)
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
        if isinstance(shape, dict):
            keys = [k for k in keys if k in shape] + [k for k in shape if k not in keys]
        elif shape is not None:
            raise InvalidInput("value is not an object")
        if not keys and not properties:
            self.span(path, "json", self.budgets.json, JsonText(1, "{"))
            return
        self.text("{")
        for i, key in enumerate(keys):
            self.text(("," if i else "") + _dump(key) + ":")
            child = properties.get(key, _additional(schema))
            sub = shape.get(key) if isinstance(shape, dict) else None
            self.value(child, root, path + [key], pins, sub, depth + 1)
        self.text("}")

    def _array(self, schema: dict, root: dict, path: list, pins: dict, shape: Any, depth: int) -> None:
        items = _resolve(schema.get("items") if isinstance(schema.get("items"), dict) else {}, root)
        indexed = [_child_key(p, path) for p in pins]
        indexed = [i for i in indexed if isinstance(i, int)]
        item_kinds = _types(items)
        structured = "object" in item_kinds or isinstance(items.get("properties"), dict) or indexed
        if shape is not None and not isinstance(shape, list):
            raise InvalidInput("value is not a list")
        if not structured:
            grammar = _item_grammar(items)
            self.span(path, "array", self.budgets.array, ArrayText(grammar) if grammar else ArrayText(JsonText(0)))
            return
        count = len(shape) if isinstance(shape, list) else _item_count(schema, self.budgets.array_items, indexed)
        self.text("[")
        for i in range(count):
            if i:
                self.text(",")
            sub = shape[i] if isinstance(shape, list) else None
            self.value(items, root, path + [i], pins, sub, depth + 1)
        self.text("]")

    def _enum(self, options: list, path: list) -> None:
        if all(isinstance(o, str) for o in options):
            texts = tuple(dict.fromkeys(_ascii(o)[1:-1] for o in options))
            self.text('"')
            self._options(texts, path, "enum", quoted=True)
            self.text('"')
        else:
            self._options(tuple(dict.fromkeys(_ascii(o) for o in options)), path, "enum")

    def _options(self, texts: tuple[str, ...], path: list, kind: str, quoted: bool = False) -> None:
        longest = max(self.tokens_of(t) for t in texts) if texts else 1
        self.span(path, kind, longest, Options(texts), quoted=quoted)

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
        budget = b.long_string if any(word in key.lower() for word in LONG_TEXT_WORDS) else b.string
        if isinstance(schema.get("maxLength"), int) and schema["maxLength"] >= 0:
            budget = max(1, min(schema["maxLength"], b.max_string))
        return budget


def _lay_out_free(builder: _Builder, length: int, text_anchors: Sequence[tuple[int, str]], pins: list[Anchor]) -> None:
    """Free span of `length` slots cut at each text anchor's offset; path anchors go at the end."""
    pieces = sorted(((min(max(int(o), 0), length), str(t)) for o, t in text_anchors), key=lambda p: p[0])
    if pins:
        pinned = ",".join(f"{_dump(parse_path(a.path)[-1])}:{_dump(a.value)}" for a in pins)
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


def _value_tokens(tokenizer: Any, span: Span, root_value: Any) -> list[int] | None:
    """The tokens a span holds for the value at its path in `root_value` (None if absent or mistyped)."""
    try:
        value = _at(root_value, span.path)
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    kind = span.kind
    if kind == "string" and not isinstance(value, str):
        return None
    if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        return None
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return None
    if kind == "array" and not isinstance(value, list):
        return None
    text = _ascii(value) if kind == "enum" else _dump(value)
    if span.quoted:
        if not isinstance(value, str):
            return None
        text = text[1:-1]
    return encode_text(tokenizer, text)


def _at(value: Any, path: str) -> Any:
    if not path:
        return value
    node = value
    for part in parse_path(path):
        node = node[part]
    return node


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ascii(value: Any) -> str:
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


def _resolve(schema: Any, root: dict, depth: int = 0) -> dict:
    """Follow local `$ref`s and take the first non-null anyOf/oneOf/allOf branch."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target: Any = root if ref == "#" else None
        if ref.startswith("#/"):
            target = root
            for raw in ref[2:].split("/"):
                key = raw.replace("~1", "/").replace("~0", "~")
                target = target.get(key) if isinstance(target, dict) else None
        merged = {**(_resolve(target, root, depth + 1) if isinstance(target, dict) else {}),
                  **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key, []) if isinstance(b, dict)]
        if branches:
            chosen = next((b for b in branches if _types(_resolve(b, root, depth + 1)) != {"null"}), branches[0])
            own = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}
            return {**_resolve(chosen, root, depth + 1), **own}
    return schema


def _additional(schema: dict) -> Any:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def _item_grammar(items: dict) -> Any:
    if isinstance(items.get("enum"), list) and items["enum"]:
        return Options(tuple(dict.fromkeys(_ascii(o) for o in items["enum"])))
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


def _is_under(pinned: str, path: list) -> bool:
    parts = parse_path(pinned)
    return len(parts) > len(path) and parts[: len(path)] == path


def _child_key(pinned: str, path: list) -> str | int | None:
    parts = parse_path(pinned)
    return parts[len(path)] if len(parts) > len(path) and parts[: len(path)] == path else None


def _next_is_key(pins: dict, path: list) -> bool:
    return any(isinstance(_child_key(p, path), str) for p in pins)
