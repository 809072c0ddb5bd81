"""Training data for the world models: corpus rows -> token sequences laid out as the sampler sees them.

A row becomes one prompt (rendered with `wmstudio.world.prompt.render` within the model's token budget, exactly
as generation renders it) plus the response laid out as canvases: skeleton-style (the canvas `build_canvas`
makes, values filled in, with the copy head's candidates and targets) and free-style (the whole text, padded),
and as plain response tokens for the AR baseline. Batches are made in `batches.py`."""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.corpus.rows import SPLITS, check_corpus_folder
from wmstudio.world.grounding import Grounding

MAX_ROW_BYTES = 2_000_000
FREE_LENGTHS = (64, 96, 128, 192, 256)  # free canvas sizes a user picks; a response is padded up to one of them
MIN_PROMPT_TOKENS = 64
SKELETON_COPIES = 3  # noisy copies of the skeleton per row: they share one prompt pass, so they come cheap
SHAPE_COPIES = 3  # noisy copies of a schema's sketch beside the tool's sketch prompt


@dataclass
class CorpusRow:
    """One corpus row: the prompt text the model sees, the true response text, and `meta` when present."""

    prompt_text: str
    response_text: str
    meta: dict[str, Any] | None = None
    where: str = ""  # file:line, for messages
    prompt_messages: list[dict[str, str]] = field(default_factory=list)  # the turns before the response, as given


@dataclass
class CopyTargets:
    """What the copy head learns from one skeleton canvas: per fillable span its candidates' features and which
    candidates hold the true value (`hits[:, 0]`: none does, generate)."""

    starts: list[int]  # canvas position of each span's first slot
    lengths: list[int]
    span_keys: torch.Tensor  # (S, K)
    kinds: torch.Tensor  # (S, 4)
    features: torch.Tensor  # (S, C, F), float16 to keep a corpus in memory
    cand_keys: torch.Tensor  # (S, C, K)
    mask: torch.Tensor  # (S, C)
    hits: torch.Tensor  # (S, 1 + C) bool


@dataclass
class CanvasTarget:
    """A response laid out as a canvas: the true tokens, which positions the objective may mask and which of them
    it scores (None: all), the value spans (skeleton) and the copy head's targets."""

    tokens: list[int]
    maskable: list[bool]
    style: str  # "skeleton" or "free"
    scored: list[bool] | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)  # (start, length) of each value span
    copy: CopyTargets | None = None
    outcome: tuple[int, int] | None = None  # (start, length) of the outcome (`status`) span, when there is one


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
    shape_canvases: int = 0  # rows that also teach the sketch of their tool's schema (a prompt without it)
    copy_spans: int = 0  # spans the copy head trains on
    copy_hits: int = 0  # of them, spans whose value a candidate holds


def read_corpus_split(corpus: Path, split: str, max_rows: int | None = None, required: bool = True) -> list[CorpusRow]:
    """Read `<corpus>/<split>.jsonl`: wmstudio rows (with `meta`) or public chat rows (`messages` only).

    InvalidInput names the file, line and field of every malformed row (up to 20), and the fix."""
    path = Path(corpus) / f"{split}.jsonl"
    check_corpus_folder(corpus)
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
    return CorpusRow(prompt_text=prompt, response_text=response, meta=meta or None, where=where,
                     prompt_messages=messages[:-1])


def world_from_meta(meta: dict[str, Any], where: str = "meta"):
    """Rebuild the simulated world a row was made in: its simulator's world with the row's state and directives."""
    from wmstudio.world.simulators import get_simulator

    try:
        simulator = get_simulator(meta["world"])
    except KeyError as err:
        raise InvalidInput(Problem(f"{where}.world", str(err).strip("'\""))) from None
    return simulator.world(meta.get("initial_state"), [str(d) for d in meta.get("directives") or []])


@dataclass
class RowRequest:
    """What a wmstudio row asks the world model: its world, the call, the earlier turns, its grounding."""

    world: Any
    call: Any
    history: list
    grounding: Grounding


def request_from_meta(meta: dict[str, Any], where: str = "meta") -> RowRequest:
    """The world (rebuilt from its simulator), call and history a row's `meta` describes."""
    from wmstudio.world.grounding import parse_grounding
    from wmstudio.world.history import parse_history
    from wmstudio.world.spec import Call

    return RowRequest(world_from_meta(meta, where), Call.from_json(meta.get("call"), f"{where}.call"),
                      parse_history(meta.get("history"), f"{where}.history"),
                      parse_grounding(meta.get("grounding", True), f"{where}.grounding"))


def prompt_from_meta(meta: dict[str, Any], where: str = "meta") -> str:
    """The whole sections prompt of a wmstudio row (no budget): what tokenizers are trained on."""
    from wmstudio.world.prompt.render import render

    request = request_from_meta(meta, where)
    return render(request.world, request.call, request.history, grounding=request.grounding).text


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


def shape_target(tokenizer, schema: dict[str, Any]) -> CanvasTarget | None:
    """The sketch of `schema` on a shape canvas (model/canvas/shape_canvas.py): the lead text fixed, then the sketch and
    pads, all scored; None when the sketch is longer than the canvas."""
    from wmstudio.model.canvas.shape_canvas import SHAPE_LENGTH, lead_ids
    from wmstudio.model.network.tokenizer import encode_text
    from wmstudio.world.heads.schema_sketch import sketch_text

    lead, sketch = lead_ids(tokenizer), encode_text(tokenizer, sketch_text(schema))
    if len(sketch) > SHAPE_LENGTH:
        return None
    tokens = lead + sketch + [tokenizer.pad_token_id] * (SHAPE_LENGTH - len(sketch))
    return CanvasTarget(tokens=tokens, maskable=[False] * len(lead) + [True] * SHAPE_LENGTH, style="shape")


def skeleton_canvas(tokenizer, schema: dict[str, Any], response_text: str):
    """The response laid out by the engine's `build_canvas` (skeleton mode, shaped like the value).

    Values fill their spans, right-padded; a string longer than its span keeps the tokens that fit
    (a sampled value can be no longer either). Returns (target, canvas, parsed value), or None when the
    response is not JSON or misfits the schema."""
    from wmstudio.model.canvas.canvas import build_canvas

    try:
        value = json.loads(response_text)
        canvas = build_canvas(tokenizer, schema, mode="skeleton", shape=value)
    except (json.JSONDecodeError, InvalidInput):
        return None
    tokens = canvas.fill(value) or canvas.fill(value, cut_strings=True)
    if tokens is None:
        return None
    scored = [False] * len(tokens)
    for span in canvas.spans:
        for position in range(span.start, span.end):
            scored[position] = True
            if tokens[position] == canvas.pad_id or (span.kind == "end" and tokens[position] == canvas.end_id):
                break  # the first pad (or the end token) closes the span; the sampler settles the rest
    outcome = canvas.outcome_span()
    return CanvasTarget(tokens=tokens, maskable=[s >= 0 for s in canvas.span_of], style="skeleton", scored=scored,
                        spans=[(span.start, span.length) for span in canvas.spans],
                        outcome=(outcome.start, outcome.length) if outcome else None), canvas, value


def copy_targets(canvas, value: Any, sources) -> CopyTargets | None:
    """The copy head's inputs and targets for a skeleton canvas holding `value` (None: no span can copy)."""
    from wmstudio.model.heads.copy_head import copy_plan

    plan = copy_plan(canvas, sources)
    if plan is None:
        return None
    hits = torch.zeros((len(plan.slots), 1 + plan.width), dtype=torch.bool)
    for s, found in enumerate(plan.targets(value)):
        if found:
            hits[s, [1 + c for c in found]] = True
        else:
            hits[s, 0] = True
    return CopyTargets(starts=[slot.span.start for slot in plan.slots], lengths=[slot.span.length for slot in plan.slots],
                       span_keys=plan.span_keys, kinds=plan.kinds, features=plan.features.half(),
                       cand_keys=plan.cand_keys, mask=plan.mask, hits=hits)


def build_examples(rows: list[CorpusRow], tokenizer, arch: str, max_positions: int, prompt_tokens: int = 768,
                   seed: int = 0, copy: bool = True, workers: int = 1, shape_share: float = 0.0) -> ExampleSet:
    """Tokenise rows for `arch`. MDLM: a skeleton canvas (when the tool has a response schema and the response
    fits it, with copy targets when `copy`) and a free canvas per row; AR: the response tokens and eos.

    `shape_share` of the MDLM rows whose tool has a schema also make a second example: the tool's sketch prompt
    (world/schema_sketch.sketch_world: the tools, that one without its response schema, no state) and SHAPE_COPIES
    shape canvases holding the schema's sketch, so a tool imported without a schema can still get a skeleton.

    The prompt of a wmstudio row is rendered within `prompt_budget` of the longest canvas, as generation does;
    a public chat row's prompt is its text, cut at the start to fit. `workers` > 1 builds chunks of rows in
    that many processes (rendering and copy plans take ~35 ms a row); every row draws its own randomness from
    `seed` and its place, so the result does not depend on the split."""
    if workers > 1 and len(rows) > CHUNK_ROWS:
        return _build_in_processes(rows, tokenizer, arch, max_positions, prompt_tokens, seed, copy, workers,
                                   shape_share)
    from wmstudio.model.network.tokenizer import encode_prompt, encode_text, prompt_budget
    from wmstudio.world.heads.copy_candidates import copy_candidates
    from wmstudio.world.heads.schema_sketch import sketch_world
    from wmstudio.world.prompt.render import render

    result = ExampleSet(examples=[])
    for row in rows:
        rnd = random.Random(f"{seed}/{row.where}")
        response_ids = encode_text(tokenizer, row.response_text)
        example = TrainingExample(prompt_ids=[])
        request = request_from_meta(row.meta, row.where) if row.meta else None
        skeleton = None
        if arch == "ar":
            example.response_ids = response_ids + [tokenizer.eos_token_id]
            canvas_len = len(example.response_ids)
        else:
            schema = response_schema_for(row)
            laid = skeleton_canvas(tokenizer, schema, row.response_text) if schema else None
            if laid is not None:
                skeleton, canvas, value = laid
                example.canvases += [skeleton] * SKELETON_COPIES  # each copy gets its own mask ratio and mask
                result.skeleton_canvases += 1
            example.canvases.append(free_canvas(tokenizer, response_ids, rnd))
            result.free_canvases += 1
            shape = shape_target(tokenizer, schema) if skeleton and request and rnd.random() < shape_share else None
            if shape is not None:  # the tool's sketch, beside the tool's short sketch prompt (as write_sketch renders)
                budget = prompt_budget(tokenizer, max_positions, len(shape.tokens), prompt_tokens)
                rendered = render(sketch_world(request.world, request.call.name), request.call, (), budget)
                result.examples.append(TrainingExample(encode_prompt(tokenizer, rendered.text, budget.limit + 2),
                                                       [shape] * SHAPE_COPIES))
                result.shape_canvases += 1
            canvas_len = max(len(c.tokens) for c in example.canvases)
        budget = prompt_budget(tokenizer, max_positions, canvas_len, prompt_tokens)
        if budget.limit < MIN_PROMPT_TOKENS:
            result.skipped.append(f"{row.where}: a response of {len(response_ids)} tokens leaves no room for the prompt")
            continue
        if request is None:
            example.prompt_ids = encode_prompt(tokenizer, row.prompt_text, budget.limit + 2)
        else:
            rendered = render(request.world, request.call, request.history, budget, grounding=request.grounding)
            example.prompt_ids = encode_prompt(tokenizer, rendered.text, budget.limit + 2)
            if skeleton is not None and copy:
                skeleton.copy = copy_targets(canvas, value, copy_candidates(rendered.shown))
                if skeleton.copy is not None:
                    result.copy_spans += len(skeleton.copy.starts)
                    result.copy_hits += int((~skeleton.copy.hits[:, 0]).sum())
        result.examples.append(example)
    return result


CHUNK_ROWS = 400


def _build_in_processes(rows: list[CorpusRow], tokenizer, arch: str, max_positions: int, prompt_tokens: int,
                        seed: int, copy: bool, workers: int, shape_share: float) -> ExampleSet:
    """build_examples over chunks of rows in `workers` fresh processes, merged in row order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [rows[i:i + CHUNK_ROWS] for i in range(0, len(rows), CHUNK_ROWS)]
    merged = ExampleSet(examples=[])
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for blob in pool.map(_build_chunk, chunks, *[[value] * len(chunks) for value in
                                                       (tokenizer, arch, max_positions, prompt_tokens, seed, copy,
                                                        1, shape_share)]):
            part = pickle.loads(blob)
            merged.examples += part.examples
            merged.skipped += part.skipped
            for name in ("skeleton_canvases", "free_canvases", "shape_canvases", "copy_spans", "copy_hits"):
                setattr(merged, name, getattr(merged, name) + getattr(part, name))
    return merged


def _build_chunk(*args: Any) -> bytes:
    """A worker's build_examples, pickled to plain bytes (torch would pass its tensors as file descriptors, and a
    corpus's worth of them runs out of descriptors)."""
    return pickle.dumps(build_examples(*args))
