"""A world-model answer to chat-format turns, as OpenAI-style clients and the paper's GRPO plugins send them.

When the user turn is a `State: ...\\n\\nAction: ...` row (the paper's message-list layout or ours, the state
possibly ending with the call itself), the call is answered like a world step in the world the request states
(studio/request_world.py: its system sections over the served world): on the tool's response skeleton, checked.
Otherwise the model denoises a free JSON canvas after the turns. `chat_stream` yields the text settled so far (a
prefix that only grows, as streaming clients need) by stage, as the Simulate tab draws them (what the helpers wrote
before the model's first step, then each denoising step), then the answer, which says the grounding and the
sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from wmstudio.model.canvas.canvas import FREE, Canvas
from wmstudio.model.denoising.sampler import Frame, SamplerSettings, denoise
from wmstudio.model.generation.chat_response import chat_prompt_ids, free_canvas, respond_to_chat
from wmstudio.model.generation.generation import Generation, generate_stream
from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.problems import InvalidInput, Problem
from wmstudio.studio.request_budget import limit_history, limit_state
from wmstudio.studio.request_world import request_world
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.row_turns import Turns, read_row
from wmstudio.world.prompt.sections import read_sections
from wmstudio.world.spec import Call, WorldSpec

DEFAULT_FREE_TOKENS = 256  # a free canvas's length at most, whatever max_tokens says (pads trail a shorter answer)
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class ChatAnswer:
    """The text answered, how (`skeleton` for a world step, `free` otherwise), its check report when there was a
    world, the token counts OpenAI clients expect in `usage`, the grounding and where the world's parts came from."""

    text: str
    mode: str
    prompt_tokens: int
    completion_tokens: int
    checks: dict[str, Any] | None = None
    grounding: str = "none"
    sources: dict[str, Any] | None = None

    def report(self) -> dict[str, Any]:
        """What the server adds to its answer about how it was made."""
        return {"mode": self.mode, "grounding": self.grounding, "checks": self.checks, "sources": self.sources}


BEFORE_DENOISING = "before denoising"  # the stage of what the pins, copies, heads and rules wrote


@dataclass(frozen=True)
class Settled:
    """The answer's text settled so far, and the stage that settled it: BEFORE_DENOISING (with how many tokens each
    helper wrote, by Canvas.written_by's names) or `denoising step N`."""

    text: str
    stage: str
    written_by: dict[str, int] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        """What a streamed chunk says of its stage."""
        return {"stage": self.stage, **({"written_by": self.written_by} if self.written_by else {})}


def denoising_step(frame: Frame) -> str:
    return f"denoising step {frame.step + 1}"


@dataclass
class WorldTurn:
    """A chat or proxy request read as a world step: the world the request states (over the served one), the call,
    the steps before it and where each part of the world came from."""

    world: WorldSpec
    call: Call
    history: list[HistoryStep] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict)


def world_turn(system: str, turns: Turns, base: WorldSpec | None, system_where: str,
               state_where: str) -> WorldTurn:
    """The world step a request's system prompt and turns ask for, in the world they state over `base`; the
    request's state and history held to the request limits (InvalidInput at `system_where` / `state_where`)."""
    stated = read_sections(system, system_where)
    if stated is not None and stated.state is not None:
        limit_state(stated.state, system_where)
    made = request_world(base, stated, turns.call, turns.history, turns.task)
    limit_history(made.history, state_where)
    if turns.pending_dropped:
        made.sources["state_ended_with_the_call"] = True
    return WorldTurn(made.world, turns.call, made.history, made.sources)


def chat_world_turn(messages: list[dict[str, Any]], base: WorldSpec | None,
                    where: str = "messages") -> WorldTurn | None:
    """The world step a chat request's `State: ...\\n\\nAction: ...` user turn asks for, or None (free mode)."""
    row = read_row(messages, where)
    if row is None or row.turns is None:
        return None
    system_at = next((i for i, m in enumerate(messages) if m.get("role") == "system"), row.user_index)
    return world_turn(row.system, row.turns, base, f"{where}[{system_at}].content",
                      f"{where}[{row.user_index}].content State")


def read_messages(raw: Any, where: str = "messages") -> list[dict[str, str]]:
    """Chat turns `[{"role", "content"}]` with text content (OpenAI's list of text parts is joined); InvalidInput
    names the bad turn."""
    if not isinstance(raw, list) or not raw:
        raise InvalidInput(Problem(where, 'must be a non-empty list of {"role": ..., "content": ...} turns'))
    turns, problems = [], []
    for i, message in enumerate(raw):
        if not isinstance(message, dict):
            problems.append(Problem(f"{where}[{i}]", 'must be a message {"role": ..., "content": ...}'))
            continue
        if message.get("role") not in ROLES:
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
                free_tokens: int = DEFAULT_FREE_TOKENS, turn: WorldTurn | None = None) -> Iterator[Settled | ChatAnswer]:
    """Yield the settled prefix of the answer as it grows, by stage, then the ChatAnswer. `turn` (a request already
    read as a world step) is answered as given; else `messages` are read, `world` standing in for what they leave
    out."""
    turn = turn if turn is not None else chat_world_turn(messages, world)
    if turn is not None:
        yield from _skeleton_answer(backend, turn, settings)
        return
    prompt_text = "\n\n".join(m["content"] for m in messages if m["role"] in ("system", "user"))
    length = max(1, min(max_tokens, free_tokens))
    if isinstance(backend, ArBaseline):
        text = respond_to_chat(backend, prompt_text, messages, length, settings)
        yield ChatAnswer(text, "autoregressive", 0, _count(backend, text), grounding=settings.grounding)
        return
    ids = chat_prompt_ids(backend, prompt_text, messages, length)
    canvas = free_canvas(backend, length)
    tokens = list(canvas.tokens)
    for frame in denoise(backend, ids, canvas, settings):
        tokens = frame.tokens[0]
        yield Settled(settled_prefix(canvas, tokens, backend.mask_id), denoising_step(frame))
    text = canvas.decode(tokens)
    yield ChatAnswer(text, FREE, len(ids), _count(backend, text), grounding=settings.grounding)


def chat_answer(backend: Backend | ArBaseline, messages: list[dict[str, str]], max_tokens: int,
                settings: SamplerSettings = SamplerSettings(), world: WorldSpec | None = None,
                free_tokens: int = DEFAULT_FREE_TOKENS, turn: WorldTurn | None = None) -> ChatAnswer:
    """`chat_stream` run to the end."""
    for item in chat_stream(backend, messages, max_tokens, settings, world, free_tokens, turn):
        if isinstance(item, ChatAnswer):
            return item
    raise RuntimeError("chat_stream ended without an answer")  # pragma: no cover - it always yields one


def settled_prefix(canvas: Canvas, tokens: list[int], mask_id: int) -> str:
    """The text of the canvas up to its first masked slot: what no later step can change. A trailing partial
    UTF-8 character is held back."""
    first = next((i for i, token in enumerate(tokens) if token == mask_id), len(tokens))
    text = canvas.decode(tokens[:first] + [mask_id] * (len(tokens) - first))
    return text.rstrip("\ufffd")


def settled_stretches(sent: str, text: str) -> list[str]:
    """What `text` adds to `sent` (a prefix of it), cut after each top-level field's comma outside strings: a canvas
    that settles a whole answer in one step still streams field by field, one delta a settled field."""
    added, pieces, depth, quoted, escaped = text[len(sent):], [], 0, False, False
    for ch in sent:  # the state where the added text starts
        depth, quoted, escaped = _json_step(ch, depth, quoted, escaped)
    start = 0
    for i, ch in enumerate(added):
        depth, quoted, escaped = _json_step(ch, depth, quoted, escaped)
        if ch == "," and not quoted and depth == 1:
            pieces.append(added[start:i + 1])
            start = i + 1
    return [piece for piece in [*pieces, added[start:]] if piece]


def _json_step(ch: str, depth: int, quoted: bool, escaped: bool) -> tuple[int, bool, bool]:
    """(depth, inside a string, after a backslash) after `ch`."""
    if quoted:
        return depth, ch != '"' or escaped, ch == "\\" and not escaped
    if ch == '"':
        return depth, True, False
    return depth + (ch in "[{") - (ch in "]}"), False, False


def _skeleton_answer(backend: Backend | ArBaseline, turn: WorldTurn,
                     settings: SamplerSettings) -> Iterator[Settled | ChatAnswer]:
    canvas = None
    for item in generate_stream(backend, turn.world, turn.call, (), turn.history, settings):
        if isinstance(item, Canvas):
            canvas = item
            if not settings.repair:
                yield Settled(settled_prefix(canvas, canvas.tokens, backend.mask_id), BEFORE_DENOISING,
                              _written_by(canvas, backend.mask_id))
        elif isinstance(item, Frame) and canvas is not None and not settings.repair:
            yield Settled(settled_prefix(canvas, item.tokens[0], backend.mask_id), denoising_step(item))
        elif isinstance(item, Generation):
            sample = item.samples[0]
            yield ChatAnswer(sample.response, item.mode, item.prompt_tokens, _count(backend, sample.response),
                             sample.checks.to_json(), settings.grounding, turn.sources)


def _written_by(canvas: Canvas, mask_id: int) -> dict[str, int]:
    """How many tokens each helper wrote into `canvas` before denoising."""
    counts: dict[str, int] = {}
    for position, who in canvas.written_by.items():
        if canvas.tokens[position] not in (mask_id, canvas.pad_id):
            counts[who] = counts.get(who, 0) + 1
    return dict(sorted(counts.items()))


def _count(backend: Backend | ArBaseline, text: str) -> int:
    return len(backend.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0
