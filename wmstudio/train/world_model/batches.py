"""Training batches for the world models: noised canvases laid out for the MDLM loss, prompt + response for AR.

Both MDLM layouts draw their noise through `noise_canvas` in the same order, so one seed gives one noise. A
skeleton canvas is noised token by token or, half the time, span by span (a value wholly masked or wholly
shown), which is what the copy head sees when it fills a span; its loss covers the content tokens and the first
pad of each value (the sampler settles the trailing pads itself), a free canvas's every position."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from wmstudio.train.world_model.examples import CanvasTarget, TrainingExample

MIN_MASK_RATIO = 1e-3  # t ~ U(0,1] is drawn as eps + (1 - eps) u so 1/t stays bounded (as LLaDA does)
SPAN_NOISE_SHARE = 0.5  # skeleton canvases noised span by span rather than token by token
OUTCOME_WEIGHT = 1.0  # in an outcome-first draw, the outcome span's weight against the rest of the canvas


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
    copy: "CopyBatch | None" = None

    @property
    def tokens(self) -> int:
        """Positions the model runs over in both passes, padding included (what throughput counts)."""
        return self.prompts.numel() + self.canvases.numel()


def noise_canvas(canvas: CanvasTarget, mask_id: int, rng: torch.Generator,
                 outcome_first: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(noisy tokens, scored positions, each position's weight): mask ratio t ~ U(0,1] drawn per canvas; each
    maskable slot masked with probability t, or (a skeleton, SPAN_NOISE_SHARE of the time) each value span
    wholly masked with probability t; weight 1 / (t * scorable count). Scored are the masked positions the
    canvas scores (all masked ones when it names none).

    Outcome first: a canvas with an outcome span is, `outcome_first` of the time, wholly masked (t = 1) and its
    outcome span weighs as much as all its other values together. Otherwise the outcome is nearly always learnt
    with other values in sight, which give it away (an id filled in means ok), and the model never learns to
    decide it from the prompt, which is what the sampler asks of it when it settles the outcome first."""
    tokens = torch.tensor(canvas.tokens)
    maskable = torch.tensor(canvas.maskable, dtype=torch.bool)
    scorable = torch.tensor(canvas.scored, dtype=torch.bool) if canvas.scored is not None else maskable
    count = max(int(scorable.sum()), 1)
    if canvas.outcome is not None and outcome_first > 0 and torch.rand((), generator=rng).item() < outcome_first:
        start, length = canvas.outcome
        weights = torch.full((len(tokens),), 1.0 / count)
        outcome = torch.zeros(len(tokens), dtype=torch.bool)
        outcome[start:start + length] = True
        outcome &= scorable
        weights[outcome] += OUTCOME_WEIGHT / max(int(outcome.sum()), 1)
        return torch.where(maskable, torch.full_like(tokens, mask_id), tokens), maskable & scorable, weights
    t = MIN_MASK_RATIO + (1 - MIN_MASK_RATIO) * torch.rand((), generator=rng).item()
    if canvas.spans and torch.rand((), generator=rng).item() < SPAN_NOISE_SHARE:
        chosen = (torch.rand(len(canvas.spans), generator=rng) < t).tolist()
        masked = torch.zeros(len(tokens), dtype=torch.bool)
        for (start, length), hit in zip(canvas.spans, chosen):
            masked[start:start + length] = hit
        masked &= maskable
    else:
        masked = maskable & (torch.rand(len(tokens), generator=rng) < t)
    weights = torch.full((len(tokens),), 1.0 / (t * count))
    return torch.where(masked, torch.full_like(tokens, mask_id), tokens), masked & scorable, weights


@dataclass
class CopyBatch:
    """The copy head's share of a batch: the fully masked spans it fills, where their first slot is, their
    candidates' features and which candidates (or generate, column 0) are right."""

    rows: torch.Tensor  # (N,) canvas row
    cols: torch.Tensor  # (N,) the span's first slot in that row
    span_keys: torch.Tensor
    kinds: torch.Tensor
    features: torch.Tensor  # (N, C, F) float32
    cand_keys: torch.Tensor
    mask: torch.Tensor
    hits: torch.Tensor  # (N, 1 + C)


def copy_batch(noisy: list[tuple[int, CanvasTarget, torch.Tensor]], mask_id: int) -> CopyBatch | None:
    """Every span of these noised canvases (row, target, noisy tokens) that is wholly masked and has copy
    targets; None when there is none."""
    picked = []
    for row, canvas, tokens in noisy:
        if canvas.copy is None:
            continue
        for s, (start, length) in enumerate(zip(canvas.copy.starts, canvas.copy.lengths)):
            if bool((tokens[start:start + length] == mask_id).all()):
                picked.append((row, start, canvas.copy, s))
    if not picked:
        return None
    width = max(int(copy.mask[s].sum()) for _, _, copy, s in picked)
    n = len(picked)
    features = torch.zeros((n, width, picked[0][2].features.shape[-1]))
    cand_keys = torch.zeros((n, width, picked[0][2].cand_keys.shape[-1]), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.bool)
    hits = torch.zeros((n, 1 + width), dtype=torch.bool)
    for i, (_, _, copy, s) in enumerate(picked):
        c = int(copy.mask[s].sum())
        features[i, :c] = copy.features[s, :c].float()
        cand_keys[i, :c] = copy.cand_keys[s, :c]
        mask[i, :c] = True
        hits[i, : 1 + c] = copy.hits[s, : 1 + c]
    return CopyBatch(rows=torch.tensor([p[0] for p in picked]), cols=torch.tensor([p[1] for p in picked]),
                     span_keys=torch.stack([copy.span_keys[s] for _, _, copy, s in picked]),
                     kinds=torch.stack([copy.kinds[s] for _, _, copy, s in picked]),
                     features=features, cand_keys=cand_keys, mask=mask, hits=hits)


def mdlm_split_batch(examples: list[TrainingExample], mask_id: int, pad_id: int, rng: torch.Generator,
                     outcome_first: float = 0.0) -> SplitBatch:
    """Noise every canvas (as `mdlm_batch` does, same draws) and lay the batch out for the two-pass loss."""
    prompt_len = max(len(ex.prompt_ids) for ex in examples)
    pairs = [(row, canvas) for row, ex in enumerate(examples) for canvas in ex.canvases]
    canvas_len = max(len(canvas.tokens) for _, canvas in pairs)
    prompts = torch.full((len(examples), prompt_len), pad_id, dtype=torch.long)
    for row, ex in enumerate(examples):
        prompts[row, : len(ex.prompt_ids)] = torch.tensor(ex.prompt_ids)
    canvases = torch.full((len(pairs), canvas_len), pad_id, dtype=torch.long)
    rows, cols, targets, weights, noised = [], [], [], [], []
    for r, (_, canvas) in enumerate(pairs):
        noisy, masked, weight = noise_canvas(canvas, mask_id, rng, outcome_first)
        canvases[r, : len(noisy)] = noisy
        noised.append((r, canvas, noisy))
        where = masked.nonzero().flatten()
        rows.append(torch.full_like(where, r))
        cols.append(where)
        targets.append(torch.tensor(canvas.tokens)[where])
        weights.append(weight[where])
    return SplitBatch(
        copy=copy_batch(noised, mask_id),
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
    examples: list[TrainingExample], mask_id: int, pad_id: int, rng: torch.Generator, outcome_first: float = 0.0
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
            noisy, masked, weight = noise_canvas(canvas, mask_id, rng, outcome_first)
            end = start + len(tokens)
            input_ids[row, start:end] = noisy
            position_ids[row, start:end] = torch.arange(prompt_len, prompt_len + len(tokens))
            where = masked.nonzero().flatten()
            rows.append(torch.full_like(where, row))
            cols.append(where + start)
            targets.append(tokens[where])
            weights.append(weight[where])
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
               split: bool = False, outcome_first: float = 0.0) -> Batch | SplitBatch:
    """The batch for `arch`: noised canvases (mdlm; `split` for the two-pass layout; `outcome_first` the share of
    outcome-first draws) or prompt + response (ar)."""
    if arch == "mdlm":
        build = mdlm_split_batch if split else mdlm_batch
        return build(examples, tokenizer_ids["mask"], tokenizer_ids["pad"], rng, outcome_first)
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


