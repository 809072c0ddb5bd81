"""A world-model answer to chat-format turns, as OpenAI-style clients and the paper's GRPO plugins send them.

When the user turn is the paper's `State: <messages>\\n\\nAction: <[tool call]>` and the server knows the world
(given with the request or the server's default), the call is answered like a world step: on the tool's response
skeleton, checked. Otherwise the model denoises a free JSON canvas after the turns. `chat_stream` yields the text
settled so far (a prefix that only grows, as streaming clients need), then the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from wmstudio.model.backends import ArBaseline, Backend
from wmstudio.model.canvas import FREE, Canvas
from wmstudio.model.chat_response import chat_prompt_ids, free_canvas, respond_to_chat
from wmstudio.model.generation import Generation, generate_stream
from wmstudio.model.sampler import Frame, SamplerSettings, denoise
from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.spec import WorldSpec
from wmstudio.world.trajectories import STATE_PREFIX, chat_row_step

DEFAULT_FREE_TOKENS = 256  # a free canvas's length at most, whatever max_tokens says (pads trail a shorter answer)
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class ChatAnswer:
    """The text answered, how (`skeleton` for a world step, `free` otherwise), its check report when there was a
    world, and the token counts OpenAI clients expect in `usage`."""

    text: str
    mode: str
    prompt_tokens: int
    completion_tokens: int
    checks: dict[str, Any] | None = None


def read_messages(raw: Any, where: str = "messages") -> list[dict[str, str]]:
    """Chat turns `[{"role", "content"}]` with text content (OpenAI's list of text parts is joined); InvalidInput
    names the bad turn."""
    if not isinstance(raw, list) or not raw:
        raise InvalidInput(Problem(where, 'must be a non-empty list of {"role": ..., "content": ...} turns'))
    turns, problems = [], []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            problems.append(Problem(f"{where}[{i}].role", f"must be one of {', '.join(ROLES)}"))
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        if content is None and message.get("tool_calls"):
            content = ""
        if not isinstance(content, str):
            problems.append(Problem(f"{where}[{i}].content", "must be text (or a list of text parts)"))
            continue
        turns.append({"role": message["role"], "content": content})
    if problems:
        raise InvalidInput(problems)
    return turns


def chat_stream(backend: Backend | ArBaseline, messages: list[dict[str, str]], max_tokens: int,
                settings: SamplerSettings = SamplerSettings(), world: WorldSpec | None = None,
                free_tokens: int = DEFAULT_FREE_TOKENS) -> Iterator[str | ChatAnswer]:
    """Yield the settled prefix of the answer as it grows (text), then the ChatAnswer."""
    step = _world_step(messages, world)
    if step is not None:
        yield from _skeleton_answer(backend, world, *step, settings)
        return
    prompt_text = "\n\n".join(m["content"] for m in messages if m["role"] in ("system", "user"))
    length = max(1, min(max_tokens, free_tokens))
    if isinstance(backend, ArBaseline):
        text = respond_to_chat(backend, prompt_text, messages, length, settings)
        yield ChatAnswer(text, "autoregressive", 0, _count(backend, text))
        return
    ids = chat_prompt_ids(backend, prompt_text, messages, length)
    canvas = free_canvas(backend, length)
    tokens = list(canvas.tokens)
    for frame in denoise(backend, ids, canvas, settings):
        tokens = frame.tokens[0]
        yield settled_prefix(canvas, tokens, backend.mask_id)
    text = canvas.decode(tokens)
    yield ChatAnswer(text, FREE, len(ids), _count(backend, text))


def chat_answer(backend: Backend | ArBaseline, messages: list[dict[str, str]], max_tokens: int,
                settings: SamplerSettings = SamplerSettings(), world: WorldSpec | None = None,
                free_tokens: int = DEFAULT_FREE_TOKENS) -> ChatAnswer:
    """`chat_stream` run to the end."""
    for item in chat_stream(backend, messages, max_tokens, settings, world, free_tokens):
        if isinstance(item, ChatAnswer):
            return item
    raise RuntimeError("chat_stream ended without an answer")  # pragma: no cover - it always yields one


def settled_prefix(canvas: Canvas, tokens: list[int], mask_id: int) -> str:
    """The text of the canvas up to its first masked slot: what no later step can change. A trailing partial
    UTF-8 character is held back."""
    first = next((i for i, token in enumerate(tokens) if token == mask_id), len(tokens))
    text = canvas.decode(tokens[:first] + [mask_id] * (len(tokens) - first))
    return text.rstrip("\ufffd")


def _world_step(messages: list[dict[str, str]], world: WorldSpec | None):
    """(history, call) when the turns are a State/Action row whose tool the world has, else None."""
    if world is None or not any(m["role"] == "user" and m["content"].startswith(STATE_PREFIX) for m in messages):
        return None
    history, call, _ = chat_row_step(messages)
    try:
        world.tool(call.name)
    except KeyError:
        known = ", ".join(t.name for t in world.tools)
        raise InvalidInput(Problem("Action", f"calls {call.name!r}, which world {world.name!r} does not have: "
                                             f"call one of {known}")) from None
    return history, call


def _skeleton_answer(backend, world, history, call, settings) -> Iterator[str | ChatAnswer]:
    canvas = None
    for item in generate_stream(backend, world, call, (), history, settings):
        if isinstance(item, Canvas):
            canvas = item
        elif isinstance(item, Frame) and canvas is not None and not settings.repair:
            yield settled_prefix(canvas, item.tokens[0], backend.mask_id)
        elif isinstance(item, Generation):
            sample = item.samples[0]
            yield ChatAnswer(sample.response, item.mode, item.prompt_tokens, _count(backend, sample.response),
                             sample.checks.to_json())


def _count(backend: Backend | ArBaseline, text: str) -> int:
    return len(backend.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0
