"""The prompt a model reads beside its canvas: the world, call and history rendered within the budget the model was
trained with, framed as `[bos] prompt [sep]` for our models or by a hub chat model's template, with the values the
copy head may point into."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from wmstudio.model.network.tokenizer import SEP_TOKEN, encode_prompt, encode_text, prompt_budget
from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.problems import InvalidInput
from wmstudio.world.grounding import NONE, Grounding
from wmstudio.world.heads.copy_candidates import copy_candidates
from wmstudio.world.heads.copy_sources import CopySource
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import RenderedPrompt, render
from wmstudio.world.spec import Call, WorldSpec

MIN_PROMPT_TOKENS = 32  # a prompt shorter than this cannot even hold the call


@dataclass
class Prompt:
    """A prompt as the model reads it: its ids, the rendering (what it shows, what was cut) and the values the
    copy head may point into."""

    ids: list[int]
    rendered: RenderedPrompt
    sources: list[CopySource]


def prepare_prompt(backend: Backend | ArBaseline, world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                   canvas_tokens: int = 0, prompt_tokens: int | None = None, grounding: Grounding = NONE,
                   retrieval: bool = True) -> Prompt:
    """The prompt beside a canvas of `canvas_tokens`, rendered within the budget the model was trained with (or
    `prompt_tokens`; in its own tokens, so any world fits its context) under `grounding`: our `[bos] prompt [sep]`
    framing, else the tokenizer's chat template; `retrieval` shows a listing's records found in the state."""
    tokenizer = backend.tokenizer
    budget = prompt_budget(tokenizer, backend.max_length, canvas_tokens, prompt_tokens or backend.prompt_tokens)
    if budget.limit < MIN_PROMPT_TOKENS:
        raise InvalidInput(
            f"the response canvas ({canvas_tokens} tokens) leaves {budget.limit} tokens for the prompt, so the two "
            f"are over the model's context of {backend.max_length}: use a smaller response schema, fewer array "
            "items or smaller span budgets, or a model with a longer context")
    rendered = render(world, call, history, budget, grounding, chat=reads_chat(tokenizer), retrieval=retrieval)
    ids = prompt_ids(tokenizer, rendered.text, rendered.chat()["messages"], budget.limit)
    return Prompt(ids, rendered, copy_candidates(rendered.shown))


def reads_chat(tokenizer: Any) -> bool:
    """Whether a model reads prompts through its chat template (a hub chat model) rather than our framing."""
    return getattr(tokenizer, "sep_token", None) != SEP_TOKEN and bool(getattr(tokenizer, "chat_template", None))


def prompt_ids(tokenizer: Any, text: str, messages: list[dict[str, str]], limit: int) -> list[int]:
    """A prompt's ids: `[bos] text [sep]` cut to `limit` tokens for our models, the chat template over `messages`
    for a hub chat model, else the plain text."""
    if getattr(tokenizer, "sep_token", None) == SEP_TOKEN:
        return encode_prompt(tokenizer, text, limit + 2)
    if reads_chat(tokenizer):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    return encode_text(tokenizer, text)
