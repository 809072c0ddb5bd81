"""The repetition penalty inside text spans: a small model stutters in a message ("refunds close close after 30 days
days"), so the sampler penalises, at a text span's slots, the tokens that span already holds (CTRL's penalty, as
`sampler.penalise_repeats` applies over a whole response when asked). Always on, at the paper's serving value."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from wmstudio.model.canvas.canvas import Canvas

TEXT_REPETITION_PENALTY = 1.3  # 1.0 turns it off (benchmarks/pinned_error_coherence.py --text-penalty)
TEXT_SPAN = re.compile(r"message|description|reason|detail|summary|comment|note")  # keys of prose, not data


def text_spans(canvas: Canvas) -> list[tuple[int, int]]:
    """(start, end) of the canvas's text spans: string values whose key says prose (message, reason, ...)."""
    spans = []
    for span in canvas.spans:
        key = span.path.rsplit(".", 1)[-1].split("[", 1)[0].lower()
        if span.kind == "string" and TEXT_SPAN.search(key):
            spans.append((span.start, span.end))
    return spans


def penalise_span_repeats(logits: torch.Tensor, tokens: torch.Tensor, filled: torch.Tensor,
                          spans: Sequence[tuple[int, int]], penalty: float, pad_id: int) -> torch.Tensor:
    """CTRL repetition penalty inside each span: the slots of a span get the tokens that span already holds (pads
    aside) penalised, as penalise_repeats does over a whole response."""
    if penalty == 1.0 or not spans:
        return logits
    logits = logits.clone()
    for start, end in spans:
        held = filled[:, start:end] & (tokens[:, start:end] != pad_id)
        if not bool(held.any()):
            continue
        present = torch.zeros((logits.shape[0], logits.shape[-1]), dtype=torch.bool, device=logits.device)
        present.scatter_(1, torch.where(held, tokens[:, start:end], torch.zeros_like(tokens[:, start:end])), held)
        block = logits[:, start:end]
        penalised = torch.where(block > 0, block / penalty, block * penalty)
        logits[:, start:end] = torch.where(present.unsqueeze(1), penalised, block)
    return logits
