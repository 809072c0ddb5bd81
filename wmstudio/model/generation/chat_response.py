"""A model's answer to a chat row written by someone else: no world, no schema, only the turns before the response.

How a corpus in the public chat format (the Patronus paper's, say) is scored: the MDLM denoises a free JSON canvas
after the row's system and user turns, the AR baseline writes until it stops. The same prompt framing as
`generate` (our `[bos] prompt [sep]`, or a hub model's chat template), cut from the start when too long."""

from __future__ import annotations

from typing import Any

from wmstudio.model.canvas.canvas import FREE, Canvas, build_canvas, check_fits
from wmstudio.model.denoising.sampler import SamplerSettings, denoise
from wmstudio.model.generation.prompting import prompt_ids
from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.problems import InvalidInput, Problem


def respond_to_chat(backend: Backend | ArBaseline, prompt_text: str, messages: list[dict[str, str]],
                    length: int, settings: SamplerSettings = SamplerSettings()) -> str:
    """The response `backend` writes after a chat row's turns, in at most `length` tokens.

    InvalidInput when the prompt and `length` cannot both fit the model's context."""
    ids = chat_prompt_ids(backend, prompt_text, messages, length)
    if isinstance(backend, ArBaseline):
        out = backend.generate(ids, max_new_tokens=length, temperature=settings.temperature,
                               repetition_penalty=settings.repetition_penalty, samples=1, seed=settings.seed)
        return backend.tokenizer.decode(out[0], skip_special_tokens=True)
    canvas = free_canvas(backend, length)
    final: Any = None
    for frame in denoise(backend, ids, canvas, settings):
        final = frame
    return canvas.decode(final.tokens[0] if final is not None else canvas.tokens)


def chat_prompt_ids(backend: Backend | ArBaseline, prompt_text: str, messages: list[dict[str, str]],
                    length: int) -> list[int]:
    """The prompt's ids beside a response of `length` tokens, cut from the start to fit the model's context."""
    limit = min(backend.prompt_tokens, backend.max_length - length) - 2
    if limit < 8:
        raise InvalidInput(Problem("length", f"{length} response tokens leave no room for a prompt in the model's "
                                             f"context of {backend.max_length}: ask for fewer"))
    ids = prompt_ids(backend.tokenizer, prompt_text, messages, limit)
    check_fits(len(ids), length, backend.max_length)
    return ids


def free_canvas(backend: Backend, length: int) -> Canvas:
    """One free span of `length` slots under the JSON grammar: the canvas of a response with no schema."""
    return build_canvas(backend.tokenizer, None, mode=FREE, free_length=length, vocab_size=backend.vocab_size,
                        mask_id=backend.mask_id, pad_id=backend.span_pad_id)
