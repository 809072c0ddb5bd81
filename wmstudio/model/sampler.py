"""The denoising sampler: one loop that unmasks a canvas step by step and yields a Frame per step.

Modelled on LLaDA's generate(): predict every masked slot, sample with Gumbel noise in float64,
rank slots by confidence, commit some (a fixed quota, or all above a threshold), blocks left to
right. Added: type constraints as -inf masks, a CTRL repetition penalty, K samples in one batch,
and the prompt encoded once (exact for our prefix-causal models). Variable length: pads only trail a
value, and the slots a commit settles (the rest of a span after a pad, an array cut by an end token)
are committed with it (constraints.py). Tried and dropped: making a pad wait until the slot to its
left is written; with the shipped model it wrote more garbage than it saved (rule-consistency 57.5%
-> 32.5% on 40 held-out rows)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from wmstudio.model.backends import Backend
from wmstudio.model.canvas import Canvas
from wmstudio.model.constraints import CanvasConstraints

STRATEGIES = ("low_confidence", "margin", "entropy", "random")
DEFAULT_THRESHOLD = 0.9
DEFAULT_TOKENS_PER_STEP = 4  # with steps=None: commit at least this many per step (bounds the step count)


@dataclass
class Frame:
    """One denoising step: every sample's canvas after it, the positions committed in it and their confidences."""

    step: int
    tokens: list[list[int]]
    unmasked: list[list[int]]
    confidences: list[list[float]]
    done: bool = False


def denoise(
    backend: Backend,
    prompt_ids: Sequence[int],
    canvas: Canvas,
    steps: int | None = None,
    strategy: str = "low_confidence",
    threshold: float | None = DEFAULT_THRESHOLD,
    block: int | None = None,
    temperature: float = 0.0,
    repetition_penalty: float = 1.0,
    samples: int = 1,
    seed: int = 0,
    use_cache: bool = True,
) -> Iterator[Frame]:
    """Denoise `samples` copies of `canvas` after `prompt_ids`, yielding a Frame per step until no mask is left.

    steps: total step budget (None: about one step per DEFAULT_TOKENS_PER_STEP masked slots);
    strategy: how a slot's confidence is scored (probability of the sampled token, top-2 margin,
    exp(-entropy), or random); threshold: also commit every slot at least this confident (None: the
    linear quota only; ignored by `random`); block: slots per semi-autoregressive block (None: one);
    temperature: Gumbel-noise sampling (0 = greedy); repetition_penalty: CTRL penalty on tokens the
    sample's spans already hold; use_cache: False recomputes the prompt every step (reference)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    device = backend.device
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.tensor(canvas.tokens, device=device).repeat(samples, 1)  # (K, C)
    masked = torch.tensor([s >= 0 for s in canvas.span_of], device=device).repeat(samples, 1)
    x[masked] = backend.mask_id
    constraints = CanvasConstraints(canvas, samples, backend.vocab_size, device)
    span_slots = masked.clone()  # positions whose tokens count for the repetition penalty
    length = x.shape[1]
    block = block or length
    starts = [b for b in range(0, length, block) if bool(masked[0, b : b + block].any())] or [0]
    per_block = None if steps is None else max(1, steps // len(starts))
    block_steps = torch.zeros(samples, dtype=torch.long)  # steps spent in each sample's current block
    budget = [0] * samples  # each sample's step budget for its current block
    current = torch.zeros(samples, dtype=torch.long)  # index into `starts`
    prompt = backend.encode_prompt(prompt_ids) if use_cache else None
    position = torch.arange(length, device=device)
    step = 0
    while bool(masked.any()):
        # the eligible slots: masked and inside each sample's current block
        for k in range(samples):
            while current[k] < len(starts) - 1 and not bool(masked[k, _block(starts, current[k], length)].any()):
                current[k] += 1
                block_steps[k] = 0
        lo = torch.tensor([starts[c] for c in current.tolist()], device=device).view(-1, 1)
        hi = torch.tensor([_block(starts, c, length).stop for c in current.tolist()], device=device).view(-1, 1)
        eligible = masked & (position >= lo) & (position < hi)

        logits = backend.logits(x, prompt) if use_cache else backend.full_logits(torch.tensor([list(prompt_ids)]), x)
        logits = penalise_repeats(logits.float(), x, span_slots & ~masked, repetition_penalty)
        logits = logits.masked_fill(~constraints.allowed, -math.inf)
        guess = sample_tokens(logits, temperature, generator)
        confidence = score(logits, guess, strategy, generator).masked_fill(~eligible, -math.inf)

        quota = []
        for k in range(samples):
            left = int(eligible[k].sum())
            if block_steps[k] == 0:
                budget[k] = per_block if per_block is not None else math.ceil(left / DEFAULT_TOKENS_PER_STEP)
            quota.append(math.ceil(left / max(1, budget[k] - int(block_steps[k]))) if left else 0)
        chosen = choose(confidence, eligible, quota, None if strategy == "random" else threshold)
        chosen = constraints.commit(chosen, guess, confidence)
        x = torch.where(chosen, guess, x)
        masked &= ~chosen
        block_steps += 1
        yield Frame(
            step=step,
            tokens=x.tolist(),
            unmasked=[chosen[k].nonzero().flatten().tolist() for k in range(samples)],
            confidences=[confidence[k][chosen[k]].tolist() for k in range(samples)],
            done=not bool(masked.any()),
        )
        step += 1


def _block(starts: list[int], index: int, length: int) -> slice:
    index = int(index)
    return slice(starts[index], starts[index + 1] if index + 1 < len(starts) else length)


def penalise_repeats(logits: torch.Tensor, tokens: torch.Tensor, filled: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL repetition penalty: for tokens a sample's spans already hold, divide positive logits by
    `penalty` and multiply negative ones (so the token gets less likely either way)."""
    if penalty == 1.0 or not bool(filled.any()):
        return logits
    present = torch.zeros((logits.shape[0], logits.shape[-1]), dtype=torch.bool, device=logits.device)
    present.scatter_(1, torch.where(filled, tokens, torch.zeros_like(tokens)), filled)
    present = present.unsqueeze(1)
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(present, penalised, logits)


def sample_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """Greedy at temperature 0, else argmax(logits + T * Gumbel noise) in float64,
    which is a draw from softmax(logits / T)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    uniform = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-300)))
    return (logits.double() + temperature * gumbel).argmax(dim=-1)


def score(logits: torch.Tensor, guess: torch.Tensor, strategy: str, generator: torch.Generator) -> torch.Tensor:
    """Each slot's confidence in [0, 1]: p(guess), top-1 minus top-2 probability, exp(-entropy), or random."""
    if strategy == "random":
        return torch.rand(guess.shape, generator=generator, device=guess.device)
    probs = torch.softmax(logits, dim=-1)
    if strategy == "low_confidence":
        return probs.gather(-1, guess.unsqueeze(-1)).squeeze(-1)
    if strategy == "margin":
        top = probs.topk(2, dim=-1).values
        return top[..., 0] - top[..., 1]
    return torch.exp(-torch.special.entr(probs).sum(dim=-1))


def choose(confidence: torch.Tensor, eligible: torch.Tensor, quota: list[int], threshold: float | None) -> torch.Tensor:
    """Per sample: the `quota` most confident eligible slots, plus every one at or above `threshold`."""
    chosen = torch.zeros_like(eligible)
    confidence = confidence.masked_fill(~eligible, -math.inf)
    order = confidence.argsort(dim=-1, descending=True)
    for k, count in enumerate(quota):
        if threshold is not None:
            count = max(count, int(((confidence[k] >= threshold) & eligible[k]).sum()))
        count = min(count, int(eligible[k].sum()))
        chosen[k, order[k, :count]] = True
    return chosen
