"""The response canvas: anchor tokens the model must keep and masked spans it fills in (docs/architecture.md).

Skeleton mode lays a response schema out as compact JSON (layout.py has the rules): keys and
punctuation are anchors, each value a masked span with a length budget and a grammar constraint,
user anchors pin values. Free mode is one free span with optional anchor text. Pads fill unused
slots and are dropped by `Canvas.decode`, so values have variable length; an end token in an array's
`end` span cuts the items from there on, so arrays of objects have variable length too."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from wmstudio.model.canvas.constraints import Vocabulary, completable, vocabulary_for
from wmstudio.model.canvas.layout import (
    END,
    FREE_TAIL,
    KEY,
    ItemsEnd,
    Layout,
    Span,
    SpanBudgets,
    ascii_json,
    dump,
    lay_out_free,
)
from wmstudio.model.canvas.limits import MAX_CANVAS_TOKENS
from wmstudio.model.network.tokenizer import encode_text
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import is_number, is_whole
from wmstudio.world.jsonpath import format_path, parse_path
from wmstudio.world.steering.anchors import Anchor, anchor_problems

SKELETON, FREE = "skeleton", "free"
OUTCOME_KEY = "status"  # the response's outcome (ok / error): decided from the prompt, the other values follow it
OUTCOME_VALUES = ("ok", "error")  # the outcomes every simulated world answers with
# who writes a value before the model denoises (Canvas.written_by), as the view names them
WRITERS = {
    "state": "copied from the state",  # the named record, a listing's page, a folder, a text answer
    "call": "from the call",  # the call's own ids and the values it asks for
    "episode": "what the write leaves",  # a minted id, a status moved to, a running total
    "outcome": "the outcome head",  # status, error code and message
    "rule": "fixed by a rule",  # fields the world's rules fix under the outcome
}
__all__ = ["FREE", "FREE_TAIL", "MAX_CANVAS_TOKENS", "OUTCOME_KEY", "SKELETON", "WRITERS", "Canvas", "Span",
           "SpanBudgets", "build_canvas", "check_fits", "skeleton_target"]


@dataclass
class Canvas:
    """The response being denoised: `tokens` (anchors, and `mask_id` at masked slots) and its spans.

    `span_of[i]` is the span index of position i, or -1 for an anchor position."""

    tokens: list[int]
    span_of: list[int]
    spans: list[Span]
    mode: str
    vocab: Vocabulary = field(repr=False)
    mask_id: int
    pad_id: int
    tokenizer: Any = field(default=None, repr=False)
    anchors: list[Anchor] = field(default_factory=list)
    end_id: int | None = None  # the token an `end` span holds to close its array there
    written_by: dict[int, str] = field(default_factory=dict)  # position -> who wrote it before denoising (WRITERS)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def masked_positions(self) -> list[int]:
        return [i for i, s in enumerate(self.span_of) if s >= 0]

    def outcome_span(self) -> Span | None:
        """The top-level outcome value (`status` with its options) when it is left to the model: outcome-first
        decoding settles it before any other value."""
        return next((span for span in self.spans if span.path == OUTCOME_KEY and span.kind == "enum"), None)

    def kinds(self) -> list[str]:
        """`"anchor"` or `"masked"` for each position (what the UI shades differently)."""
        return ["masked" if s >= 0 else "anchor" for s in self.span_of]

    def decode(self, tokens: Sequence[int]) -> str:
        """The response text: pads removed, arrays cut at an end token, masks (if any are left) shown as nothing."""
        keep = [True] * len(tokens)
        for span in self.spans:
            if span.kind == END and keep[span.start] and tokens[span.start] == self.end_id:
                keep[span.start : span.until] = [False] * (span.until - span.start)
        return self.vocab.decode([t for t, kept in zip(tokens, keep) if kept and t != self.mask_id])

    def piece(self, token: int) -> str:
        """Display text of one token (a partial UTF-8 byte shows as U+FFFD); '' for pads."""
        return self.vocab.decode([token])

    def with_values(self, values: dict[str, Any], by: dict[str, str] | None = None) -> Canvas:
        """This canvas with the spans named in `values` ({path: value}) holding those values in their own slots,
        right-padded, as anchors. Unlike a pinned anchor (its text in place of the span), the layout stays the one
        the model was trained on, so what follows is not shifted. A value its span cannot hold is left out. `by`
        ({path: a WRITERS key}) says who wrote each value, kept per position for the view."""
        tokens, span_of, spans = list(self.tokens), list(self.span_of), []
        written_by = dict(self.written_by)
        renumber: dict[int, int] = {}
        for index, span in enumerate(self.spans):
            ids = _tokens_for(self.tokenizer, span, values[span.path]) if span.path in values else None
            if ids is not None and len(ids) <= span.length:
                ids = ids + [self.pad_id] * (span.length - len(ids))
                if span.grammar is None or completable(self.vocab.table(span.grammar), ids):
                    tokens[span.start : span.end] = ids
                    span_of[span.start : span.end] = [-1] * span.length
                    if by and span.path in by:
                        written_by.update(dict.fromkeys(range(span.start, span.end), by[span.path]))
                    continue
            renumber[index] = len(spans)
            spans.append(span)
        span_of = [renumber[s] if s >= 0 else -1 for s in span_of]
        return replace(self, tokens=tokens, span_of=span_of, spans=spans, written_by=written_by)

    def fill(self, value: Any, cut_strings: bool = False) -> list[int] | None:
        """The canvas with every span holding `value`'s tokens (right-padded): a skeleton training target.

        Array items `value` lacks are pads, their end spans the end token (the item is not there).
        None when `value` does not fit: a missing field, a wrong type, or a value longer than its span
        (with `cut_strings`, a too-long string keeps the tokens that fit instead)."""
        tokens = list(self.tokens)
        for span in self.spans:
            where = _item_state(value, span.path)
            if span.kind == END:
                ids = [self.pad_id if where == PRESENT else self.end_id]
            elif where != PRESENT:
                ids = [self.pad_id] * span.length
            else:
                if span.kind == KEY:
                    ids = encode_text(self.tokenizer, dump(_entry_key(value, span.path))[1:-1])
                else:
                    ids = _value_tokens(self.tokenizer, span, value)
                if ids is not None and len(ids) > span.length and cut_strings and span.kind == "string":
                    ids = ids[: span.length]
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
    anchors: Iterable[Anchor] = (),
    mode: str = SKELETON,
    free_length: int = 64,
    text_anchors: Sequence[tuple[int, str]] = (),
    budgets: SpanBudgets = SpanBudgets(),
    vocab_size: int | None = None,
    shape: Any = None,
    mask_id: int | None = None,
    pad_id: int | None = None,
    end_id: int | None = None,
    free_json: bool = True,
) -> Canvas:
    """The canvas for a response `schema` (skeleton mode) or a free span of `free_length` (free mode).

    `anchors` pin response fields (`status="error"`); `text_anchors` are (offset, text) pieces fixed in a
    free canvas; `vocab_size` is the model's number of logits; `shape` (a response value) makes objects
    and arrays take that value's keys and lengths (for training targets); `mask_id`/`pad_id` override
    the tokenizer's (LLaDA's mask id is not in its tokenizer); `end_id` closes variable-length arrays
    (default: the first of eos/sep/bos that is neither mask nor pad; none: arrays get fixed item counts);
    `free_json` False leaves a free span any text (a free span is one JSON value by default).
    InvalidInput on bad anchors."""
    pinned = list(anchors)
    mask_id = tokenizer.mask_token_id if mask_id is None else mask_id
    if mask_id is None:
        raise InvalidInput("the tokenizer has no mask token: a canvas needs one (use a masked diffusion model)")
    try:
        vocab = vocabulary_for(tokenizer, vocab_size, pad_id)
    except ValueError as err:
        raise InvalidInput(str(err)) from None
    if end_id is None:
        specials = (getattr(tokenizer, f"{name}_token_id", None) for name in ("eos", "sep", "bos"))
        end_id = next((t for t in specials if t is not None and t not in (mask_id, vocab.pad_id)), None)
    builder = Layout(tokenizer, vocab, budgets, optional_items=end_id is not None)
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
        lay_out_free(builder, free_length, text_anchors, pinned, free_json)
    else:
        raise InvalidInput(Problem("mode", f"unknown canvas mode {mode!r}: use skeleton or free"))
    canvas = _assemble(builder, mode, mask_id, vocab.pad_id, pinned)
    canvas.end_id = end_id
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


def _assemble(layout: Layout, mode: str, mask_id: int, pad_id: int, anchors: list[Anchor]) -> Canvas:
    """Tokenise each anchor-text run whole and give each span its slots of `mask_id`."""
    tokens, span_of, spans = [], [], []
    items_end: dict[str, int] = {}
    for piece in layout.pieces:
        if isinstance(piece, ItemsEnd):
            items_end[piece.path] = len(tokens)
        elif isinstance(piece, str):
            ids = encode_text(layout.tokenizer, piece)
            tokens += ids
            span_of += [-1] * len(ids)
        else:
            spans.append(replace(piece, start=len(tokens)))
            tokens += [mask_id] * piece.length
            span_of += [len(spans) - 1] * piece.length
    for span in spans:
        if span.kind == END:
            span.until = items_end[format_path(parse_path(span.path)[:-1])]
    return Canvas(tokens, span_of, spans, mode, layout.vocab, mask_id, pad_id, layout.tokenizer, anchors)


def _value_tokens(tokenizer: Any, span: Span, root_value: Any) -> list[int] | None:
    """The tokens a span holds for the value at its path in `root_value` (None if absent or mistyped)."""
    try:
        value = _at(root_value, span.path)
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return _tokens_for(tokenizer, span, value)


def _tokens_for(tokenizer: Any, span: Span, value: Any) -> list[int] | None:
    """The tokens a span holds for `value` (None if mistyped)."""
    kind = span.kind
    if kind == "string" and not isinstance(value, str):
        return None
    if kind == "integer" and not is_whole(value):
        return None
    if kind == "number" and not is_number(value):
        return None
    if kind == "array" and not isinstance(value, list):
        return None
    text = ascii_json(value) if kind == "enum" else dump(value)
    if span.quoted:
        if not isinstance(value, str):
            return None
        text = text[1:-1]
    return encode_text(tokenizer, text)


PRESENT, MISSING = "present", "missing"


def _item_state(value: Any, path: str) -> str:
    """Whether `path` lies in array items (or map entries) `value` has (PRESENT) or in or at one past its end
    (MISSING). A missing object key reads as PRESENT, so the caller's lookup reports the misfit."""
    node = value
    for part in parse_path(path) if path else []:
        if isinstance(part, int) and isinstance(node, (list, dict)):
            if part >= len(node):
                return MISSING
            node = node[part] if isinstance(node, list) else list(node.values())[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return PRESENT
    return PRESENT


def _at(value: Any, path: str) -> Any:
    """The value at `path`; an index into an object takes its entry in that place (a map's entry slot)."""
    if not path:
        return value
    node = value
    for part in parse_path(path):
        node = list(node.values())[part] if isinstance(part, int) and isinstance(node, dict) else node[part]
    return node


def _entry_key(value: Any, path: str) -> str:
    """The key of the map entry a key span's path names (`methods[1]`: the second key of `methods`)."""
    parts = parse_path(path)
    return list(_at(value, format_path(parts[:-1])).keys())[parts[-1]]
