"""Training data for the world models: corpus rows -> token sequences laid out as the sampler sees them.

A row becomes one prompt (rendered and encoded exactly as at generation time) plus the response laid
out as canvases: skeleton-style (the canvas `build_canvas` makes, values filled in) and free-style
(the whole text, padded), and as plain response tokens for the AR baseline."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from wmstudio.problems import InvalidInput, Problem

MAX_ROW_BYTES = 2_000_000
FREE_LENGTHS = (64, 96, 128, 192, 256)  # free canvas sizes a user picks; a response is padded up to one of them
MIN_PROMPT_TOKENS = 64
SKELETON_COPIES = 3  # noisy copies of the skeleton per row: they share one prompt pass, so they come cheap
SPLITS = ("train", "eval", "test")
MIN_MASK_RATIO = 1e-3  # t ~ U(0,1] is drawn as eps + (1 - eps) u so 1/t stays bounded (as LLaDA does)


@dataclass
class CorpusRow:
    """One corpus row: the prompt text the model sees, the true response text, and `meta` when present."""

    prompt_text: str
    response_text: str
    meta: dict[str, Any] | None = None
    where: str = ""  # file:line, for messages


@dataclass
class CanvasTarget:
    """A response laid out as a canvas: the true tokens and which positions the objective may mask."""

    tokens: list[int]
    maskable: list[bool]
    style: str  # "skeleton" or "free"


@dataclass
class TrainingExample:
    """One row, tokenised: `[bos] prompt [sep]`, its canvases (MDLM) and its response tokens + eos (AR)."""

    prompt_ids: list[int]
    canvases: list[CanvasTarget] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)


@dataclass
class ExampleSet:
    """Examples built from rows, with a note for each row that could not be used and why."""

    examples: list[TrainingExample]
    skipped: list[str] = field(default_factory=list)
    skeleton_canvases: int = 0
    free_canvases: int = 0


def read_corpus_split(corpus: Path, split: str, max_rows: int | None = None, required: bool = True) -> list[CorpusRow]:
    """Read `<corpus>/<split>.jsonl`: wmstudio rows (with `meta`) or public chat rows (`messages` only).

    InvalidInput names the file, line and field of every malformed row (up to 20), and the fix."""
    path = Path(corpus) / f"{split}.jsonl"
    if not Path(corpus).is_dir():
        raise InvalidInput(Problem(str(corpus), "not a folder: give the folder `wmstudio corpus --out` wrote"))
    if not path.exists():
        if required:
            raise InvalidInput(Problem(str(path), f"missing: a corpus folder holds {', '.join(s + '.jsonl' for s in SPLITS)}"))
        return []
    rows: list[CorpusRow] = []
    problems: list[Problem] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if max_rows is not None and len(rows) >= max_rows:
                break
            if not raw.strip():
                continue
            where = f"{path.name}:{number}"
            if len(raw) > MAX_ROW_BYTES:
                problems.append(Problem(where, f"row is {len(raw):,} bytes, over {MAX_ROW_BYTES:,}: drop or trim it"))
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
                rows.append(parse_row(data, where))
            except UnicodeDecodeError:
                problems.append(Problem(where, "not UTF-8 text: write the corpus as UTF-8"))
            except json.JSONDecodeError as err:
                problems.append(Problem(where, f"invalid JSON ({err.msg} at column {err.colno}): one object per line"))
            except InvalidInput as err:
                problems.extend(err.problems)
            if len(problems) >= 20:
                break
    if problems:
        raise InvalidInput(problems, source=str(path))
    return rows


def parse_row(data: Any, where: str) -> CorpusRow:
    """A row `{"messages": [system?, user, assistant], "meta"?: {...}}` -> CorpusRow (prompt from meta if any)."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InvalidInput(Problem(where, 'expected {"messages": [{"role": ..., "content": ...}, ...]}'))
    messages = data["messages"]
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InvalidInput(Problem(f"{where}.messages[{i}]", 'expected {"role": ..., "content": <text>}'))
    if not roles or roles[-1] != "assistant" or "user" not in roles:
        raise InvalidInput(Problem(f"{where}.messages", "needs a user turn and ends with the assistant's response"))
    response = messages[-1]["content"]
    meta = data.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise InvalidInput(Problem(f"{where}.meta", "must be an object (world, initial_state, call, ...) or absent"))
    if meta:
        prompt = prompt_from_meta(meta, f"{where}.meta")
    else:
        prompt = "\n\n".join(m["content"] for m in messages[:-1] if m["role"] in ("system", "user"))
    return CorpusRow(prompt_text=prompt, response_text=response, meta=meta or None, where=where)


def world_from_meta(meta: dict[str, Any], where: str = "meta"):
    """Rebuild the simulated world a row was made in: its simulator's world with the row's state and directives."""
    from wmstudio.world.sims import get_simulator

    try:
        simulator = get_simulator(meta["world"])
    except KeyError as err:
        raise InvalidInput(Problem(f"{where}.world", str(err).strip("'\""))) from None
    return simulator.world(meta.get("initial_state"), [str(d) for d in meta.get("directives") or []])


def prompt_from_meta(meta: dict[str, Any], where: str = "meta") -> str:
    """The sections prompt for a wmstudio row, rendered exactly as generation renders it."""
    from wmstudio.world.history import parse_history
    from wmstudio.world.prompt import PROMPT_MAX_CHARS, render_prompt
    from wmstudio.world.spec import Call

    world = world_from_meta(meta, where)
    call = Call.from_json(meta.get("call"), f"{where}.call")
    history = parse_history(meta.get("history"), f"{where}.history")
    return render_prompt(world, call, history, max_chars=PROMPT_MAX_CHARS,
                         grounding=bool(meta.get("grounding", True)))


def response_schema_for(row: CorpusRow) -> dict[str, Any] | None:
    """The called tool's response schema, when the row names a simulated world and a known tool."""
    if not row.meta:
        return None
    world = world_from_meta(row.meta, row.where)
    call = row.meta.get("call") or {}
    try:
        return world.tool(call.get("name", "")).response
    except KeyError:
        return None


@dataclass
class Batch:
    """Packed sequences with a 4-D attention mask; the loss is read only at `loss_rows, loss_cols`."""

    input_ids: torch.Tensor  # (B, T), masked tokens already replaced by the mask id (MDLM)
    position_ids: torch.Tensor  # (B, T), each canvas restarts right after its prompt
    attention_mask: torch.Tensor  # (B, 1, T, T) boolean, True = may attend
    loss_rows: torch.Tensor  # (N,) batch row of each scored position
    loss_cols: torch.Tensor  # (N,) column of each scored position
    targets: torch.Tensor  # (N,) the true token at each scored position
    weights: torch.Tensor  # (N,) per-position weight; the loss is sum(weight * cross-entropy)

    @property
    def tokens(self) -> int:
        """Positions the model runs over, padding included (what throughput counts)."""
        return self.input_ids.numel()


def free_canvas(tokenizer, response_ids: list[int], rnd: random.Random) -> CanvasTarget:
    """The response text followed by span pads up to a canvas size a user would pick: all maskable.

    The size is any of FREE_LENGTHS that holds the response plus a little slack, drawn uniformly, so the
    model learns that the response decides its length and the canvas only bounds it (users pick a size
    before they know the response)."""
    need = len(response_ids) + rnd.randint(0, 16)
    sizes = [size for size in FREE_LENGTHS if size >= need] or [need]
    length = rnd.choice(sizes)
    tokens = response_ids + [tokenizer.pad_token_id] * (length - len(response_ids))
    return CanvasTarget(tokens=tokens, maskable=[True] * len(tokens), style="free")


def skeleton_canvas(tokenizer, schema: dict[str, Any], response_text: str) -> CanvasTarget | None:
    """The response laid out by the engine's `build_canvas` (skeleton mode, shaped like the value).

    Values fill their spans, right-padded; a string longer than its span keeps the tokens that fit
    (a sampled value can be no longer either). None when the response is not JSON or misfits the schema."""
    from wmstudio.model.canvas import build_canvas

    try:
        value = json.loads(response_text)
        canvas = build_canvas(tokenizer, schema, mode="skeleton", shape=value)
    except (json.JSONDecodeError, InvalidInput):
        return None
    tokens = canvas.fill(value) or canvas.fill(value, cut_strings=True)
    if tokens is None:
        return None
    return CanvasTarget(tokens=tokens, maskable=[s >= 0 for s in canvas.span_of], style="skeleton")


def build_examples(rows: list[CorpusRow], tokenizer, arch: str, max_positions: int, seed: int = 0) -> ExampleSet:
    """Tokenise rows for `arch`. MDLM: a skeleton canvas (when the tool has a response schema and the
    response fits it) and a free canvas per row; AR: the response tokens and eos. The prompt is
    `encode_prompt(..., max_positions - canvas length)`, the cut generation makes for that canvas."""
    from wmstudio.model.tokenizer import encode_prompt, encode_text

    rnd = random.Random(seed)
    result = ExampleSet(examples=[])
    for row in rows:
        response_ids = encode_text(tokenizer, row.response_text)
        example = TrainingExample(prompt_ids=[])
        if arch == "ar":
            example.response_ids = response_ids + [tokenizer.eos_token_id]
            canvas_len = len(example.response_ids)
        else:
            schema = response_schema_for(row)
            skeleton = skeleton_canvas(tokenizer, schema, row.response_text) if schema else None
            if skeleton is not None:
                example.canvases += [skeleton] * SKELETON_COPIES  # each copy gets its own mask ratio and mask
                result.skeleton_canvases += 1
            example.canvases.append(free_canvas(tokenizer, response_ids, rnd))
            result.free_canvases += 1
            canvas_len = max(len(c.tokens) for c in example.canvases)
        if max_positions - canvas_len < MIN_PROMPT_TOKENS:
            result.skipped.append(f"{row.where}: a response of {len(response_ids)} tokens leaves no room for the prompt")
            continue
        example.prompt_ids = encode_prompt(tokenizer, row.prompt_text, max_positions - canvas_len)
        result.examples.append(example)
    return result


# ----------------------------------------------------------------------------------------------------
# Batches: prompt once, then one or more canvases that each see the whole prompt and only themselves.


def _attention_mask(layouts: list[tuple[int, list[int]]], length: int) -> torch.Tensor:
    """Boolean (B,1,T,T) mask (True = may attend) for rows laid out as prompt + canvases, or prompt + response.

    Prompt rows are causal; each canvas attends to the whole prompt and to itself only (prefix-causal,
    so several noisy canvases share one prompt pass); padding rows attend to themselves to stay finite.
    Boolean, not additive: PyTorch's CPU attention runs about 2.5x faster with a boolean mask."""
    allowed = torch.zeros(len(layouts), length, length, dtype=torch.bool)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    for row, (prompt_len, canvas_lengths) in enumerate(layouts):
        allowed[row, :prompt_len, :prompt_len] = causal[:prompt_len, :prompt_len]
        start = prompt_len
        for canvas_len in canvas_lengths:
            end = start + canvas_len
            allowed[row, start:end, :prompt_len] = True
            allowed[row, start:end, start:end] = True
            start = end
        pad = torch.arange(start, length)
        allowed[row, pad, pad] = True
    return allowed.unsqueeze(1)


@dataclass
class SplitBatch:
    """MDLM examples as two passes: right-padded prompts (causal), then every canvas as its own row over
    its prompt's cached keys/values. Same objective as a packed Batch, without attention over the
    canvases' unused prompt x canvas and canvas x canvas blocks."""

    prompts: torch.Tensor  # (B, P) right-padded prompt ids
    prompt_lengths: torch.Tensor  # (B,)
    canvases: torch.Tensor  # (R, C) right-padded noisy canvases, masked tokens already the mask id
    owners: torch.Tensor  # (R,) the example (prompt row) of each canvas
    canvas_lengths: torch.Tensor  # (R,)
    loss_rows: torch.Tensor  # (N,) canvas row of each scored position
    loss_cols: torch.Tensor  # (N,) column in that canvas
    targets: torch.Tensor  # (N,)
    weights: torch.Tensor  # (N,)

    @property
    def tokens(self) -> int:
        """Positions the model runs over in both passes, padding included (what throughput counts)."""
        return self.prompts.numel() + self.canvases.numel()


def noise_canvas(canvas: CanvasTarget, mask_id: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(noisy tokens, masked positions, weight of each scored one): mask ratio t ~ U(0,1] drawn per canvas, each
    maskable slot masked with probability t, weight 1 / (t * maskable count). Both batch layouts draw through
    here in the same order, so one seed gives one noise."""
    tokens = torch.tensor(canvas.tokens)
    maskable = torch.tensor(canvas.maskable, dtype=torch.bool)
    t = MIN_MASK_RATIO + (1 - MIN_MASK_RATIO) * torch.rand((), generator=rng).item()
    masked = maskable & (torch.rand(len(tokens), generator=rng) < t)
    weight = 1.0 / (t * max(int(maskable.sum()), 1))
    return torch.where(masked, torch.full_like(tokens, mask_id), tokens), masked, weight


def mdlm_split_batch(examples: list[TrainingExample], mask_id: int, pad_id: int, rng: torch.Generator) -> SplitBatch:
    """Noise every canvas (as `mdlm_batch` does, same draws) and lay the batch out for the two-pass loss."""
    prompt_len = max(len(ex.prompt_ids) for ex in examples)
    pairs = [(row, canvas) for row, ex in enumerate(examples) for canvas in ex.canvases]
    canvas_len = max(len(canvas.tokens) for _, canvas in pairs)
    prompts = torch.full((len(examples), prompt_len), pad_id, dtype=torch.long)
    for row, ex in enumerate(examples):
        prompts[row, : len(ex.prompt_ids)] = torch.tensor(ex.prompt_ids)
    canvases = torch.full((len(pairs), canvas_len), pad_id, dtype=torch.long)
    rows, cols, targets, weights = [], [], [], []
    for r, (_, canvas) in enumerate(pairs):
        noisy, masked, weight = noise_canvas(canvas, mask_id, rng)
        canvases[r, : len(noisy)] = noisy
        where = masked.nonzero().flatten()
        rows.append(torch.full_like(where, r))
        cols.append(where)
        targets.append(torch.tensor(canvas.tokens)[where])
        weights.append(torch.full((len(where),), weight))
    return SplitBatch(
        prompts=prompts,
        prompt_lengths=torch.tensor([len(ex.prompt_ids) for ex in examples]),
        canvases=canvases,
        owners=torch.tensor([row for row, _ in pairs]),
        canvas_lengths=torch.tensor([len(canvas.tokens) for _, canvas in pairs]),
        loss_rows=torch.cat(rows),
        loss_cols=torch.cat(cols),
        targets=torch.cat(targets),
        weights=torch.cat(weights) / len(pairs),
    )


def mdlm_batch(
    examples: list[TrainingExample], mask_id: int, pad_id: int, rng: torch.Generator
) -> Batch:
    """Noise every canvas of every example and pack them: mask ratio t ~ U(0,1] per canvas.

    Only maskable positions (values in a skeleton, the whole text in a free canvas) are masked, and
    only masked ones are scored, each with weight 1 / (t * maskable count): the MDLM/LLaDA estimator."""
    length = max(len(ex.prompt_ids) + sum(len(c.tokens) for c in ex.canvases) for ex in examples)
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    position_ids = torch.zeros((len(examples), length), dtype=torch.long)
    rows, cols, targets, weights, layouts = [], [], [], [], []
    for row, ex in enumerate(examples):
        prompt_len = len(ex.prompt_ids)
        input_ids[row, :prompt_len] = torch.tensor(ex.prompt_ids)
        position_ids[row, :prompt_len] = torch.arange(prompt_len)
        start = prompt_len
        for canvas in ex.canvases:
            tokens = torch.tensor(canvas.tokens)
            noisy, masked, weight = noise_canvas(canvas, mask_id, rng)
            end = start + len(tokens)
            input_ids[row, start:end] = noisy
            position_ids[row, start:end] = torch.arange(prompt_len, prompt_len + len(tokens))
            where = masked.nonzero().flatten()
            rows.append(torch.full_like(where, row))
            cols.append(where + start)
            targets.append(tokens[where])
            weights.append(torch.full((len(where),), weight))
            start = end
        position_ids[row, start:] = torch.arange(start, length) - start + prompt_len
        layouts.append((prompt_len, [len(c.tokens) for c in ex.canvases]))
    n_canvases = sum(len(ex.canvases) for ex in examples)
    return Batch(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=_attention_mask(layouts, length),
        loss_rows=torch.cat(rows),
        loss_cols=torch.cat(cols),
        targets=torch.cat(targets),
        weights=torch.cat(weights) / n_canvases,
    )


def ar_batch(examples: list[TrainingExample], pad_id: int) -> Batch:
    """Pack prompt + response for next-token prediction; only response tokens (and eos) are scored.

    Position i is scored against token i+1, so the scored columns are the ones just before each
    response token; the weight is 1 / response length per example, averaged over the batch."""
    length = max(len(ex.prompt_ids) + len(ex.response_ids) for ex in examples)
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    rows, cols, targets, weights, layouts = [], [], [], [], []
    for row, ex in enumerate(examples):
        sequence = ex.prompt_ids + ex.response_ids
        input_ids[row, : len(sequence)] = torch.tensor(sequence)
        first = len(ex.prompt_ids)
        where = torch.arange(first - 1, len(sequence) - 1)
        rows.append(torch.full_like(where, row))
        cols.append(where)
        targets.append(torch.tensor(ex.response_ids))
        weights.append(torch.full((len(where),), 1.0 / len(where)))
        layouts.append((len(sequence), []))
    return Batch(
        input_ids=input_ids,
        position_ids=torch.arange(length).expand(len(examples), length).clone(),
        attention_mask=_attention_mask(layouts, length),
        loss_rows=torch.cat(rows),
        loss_cols=torch.cat(cols),
        targets=torch.cat(targets),
        weights=torch.cat(weights) / len(examples),
    )


def make_batch(examples, arch: str, tokenizer_ids: dict[str, int], rng: torch.Generator,
               split: bool = False) -> Batch | SplitBatch:
    """The batch for `arch`: noised canvases (mdlm; `split` for the two-pass layout) or prompt + response (ar)."""
    if arch == "mdlm":
        build = mdlm_split_batch if split else mdlm_batch
        return build(examples, tokenizer_ids["mask"], tokenizer_ids["pad"], rng)
    return ar_batch(examples, tokenizer_ids["pad"])


def plan_batches(examples: list[TrainingExample], arch: str, batch_tokens: int, seed: int) -> list[list[int]]:
    """Group example indices of similar packed length into batches of about `batch_tokens` tokens.

    Sorting by length inside shuffled chunks keeps padding low while every epoch still mixes worlds."""
    rnd = random.Random(seed)
    order = list(range(len(examples)))
    rnd.shuffle(order)
    size = (lambda ex: len(ex.prompt_ids) + sum(len(c.tokens) for c in ex.canvases)) if arch == "mdlm" else (
        lambda ex: len(ex.prompt_ids) + len(ex.response_ids)
    )
    batches: list[list[int]] = []
    for i in range(0, len(order), 256):
        current: list[int] = []
        longest = 0
        for k in sorted(order[i : i + 256], key=lambda k: size(examples[k])):
            n = size(examples[k])
            if current and max(longest, n) * (len(current) + 1) > batch_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(k)
            longest = max(longest, n)
        if current:
            batches.append(current)
    rnd.shuffle(batches)
    return batches


