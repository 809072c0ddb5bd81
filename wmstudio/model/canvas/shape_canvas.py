"""The shape canvas: a model trained for it writes the sketch of a response's schema before the response itself.

For a tool without a response schema (and no earlier answers to infer one from), a free canvas leaves a small
model to place every key where the values before it push it, and it loses them. A model trained with shape
canvases (`train-wm --shape-share`, its config says `writes_shape`) first denoises one: the lead text `shape:`
then a JSON span in which it writes the tool's sketch (world/heads/schema_sketch.py: keys and placeholders, the same text
every time the tool answers), from the prompt alone. The sketch's schema then lays out an ordinary skeleton."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from wmstudio.model.canvas.canvas import FREE, Canvas, build_canvas
from wmstudio.model.network.tokenizer import encode_text
from wmstudio.world.heads.schema_sketch import schema_from_sketch_text

SHAPE_LEAD = "shape:"  # the canvas's fixed first text: what tells the model to write a sketch, not a response
SHAPE_LENGTH = 96  # slots for the sketch (the simulated worlds' longest is 66 tokens)


@dataclass
class WrittenSketch:
    """What the model wrote on a shape canvas: the sketch text and the schema it describes (None: not a sketch)."""

    text: str
    schema: dict[str, Any] | None


def lead_ids(tokenizer: Any) -> list[int]:
    """The lead text's tokens, as training lays them before a sketch."""
    return encode_text(tokenizer, SHAPE_LEAD)


def shape_canvas(backend: Any, length: int = SHAPE_LENGTH) -> Canvas:
    """A canvas of the lead text (an anchor) and a JSON span of `length` slots for the sketch."""
    free = build_canvas(backend.tokenizer, None, mode=FREE, free_length=length, vocab_size=backend.vocab_size,
                        mask_id=backend.mask_id, pad_id=backend.span_pad_id)
    lead = lead_ids(backend.tokenizer)
    spans = [replace(span, start=span.start + len(lead)) for span in free.spans]
    return replace(free, tokens=lead + free.tokens, span_of=[-1] * len(lead) + free.span_of, spans=spans)


def read_sketch(canvas: Canvas, tokens: list[int]) -> WrittenSketch:
    """The sketch a denoised shape canvas holds (the lead left out) and its schema."""
    lead = len(lead_ids(canvas.tokenizer))
    text = canvas.vocab.decode([t for t in tokens[lead:] if t not in (canvas.pad_id, canvas.mask_id)])
    return WrittenSketch(text, schema_from_sketch_text(text))
