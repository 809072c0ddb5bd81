"""Does a world model read its prompt? Content NLL with a row's own prompt against another row's for the same tool.

With every value of the true response masked, the model's negative log-likelihood of the content tokens (values,
not keys, punctuation or pads) is measured twice: after the row's own prompt and after the prompt of another held-
out row calling the same tool. A model that ignores its prompt scores the same both ways. The likelihood is the
model's whole: where its copy head can fill a span, a token's probability is the pointer-generator mixture
p(generate) * p_token + sum of p(candidate) over candidates writing that token there."""

from __future__ import annotations

import math

import torch

from wmstudio.model.canvas.canvas import skeleton_target
from wmstudio.model.generation.prompting import prepare_prompt
from wmstudio.model.heads.copy_head import copy_plan
from wmstudio.world.grounding import NONE, Grounding


@torch.inference_mode()
def content_nll(backend, prompt, canvas, tokens: list[int], copy: bool = True) -> tuple[float, int]:
    """(summed NLL, count) of the content tokens of `tokens` laid out on `canvas`, every span masked; without
    `copy`, the denoiser's alone."""
    masked = [p for p, span in enumerate(canvas.span_of) if span >= 0]
    x = torch.tensor([tokens], device=backend.device)
    x[0, masked] = backend.mask_id
    cache = backend.encode_prompt(prompt.ids)
    logits, hidden = backend.canvas_outputs(x, cache)
    probs = torch.softmax(logits[0].float(), dim=-1)
    spans = canvas.spans
    content = [p for p in masked if tokens[p] != canvas.pad_id and spans[canvas.span_of[p]].kind != "end"]
    chance = {p: float(probs[p, tokens[p]]) for p in content}
    plan = copy_plan(canvas, prompt.sources) if copy and backend.copy_head is not None and hidden is not None \
        else None
    if plan is not None:
        starts = torch.tensor([slot.span.start for slot in plan.slots], device=backend.device)
        device = backend.device
        head = backend.copy_head(hidden[0, starts], plan.span_keys.to(device), plan.kinds.to(device),
                                 plan.features.to(device), plan.cand_keys.to(device), plan.mask.to(device))
        choice = torch.softmax(head.float(), dim=-1).cpu()
        for s, slot in enumerate(plan.slots):
            for p in range(slot.span.start, slot.span.end):
                if p not in chance:
                    continue
                mixed = float(choice[s, 0]) * chance[p]
                for c, cand_tokens in enumerate(plan.tokens[s]):
                    if cand_tokens[p - slot.span.start] == tokens[p]:
                        mixed += float(choice[s, 1 + c])
                chance[p] = mixed
    return sum(-math.log(max(v, 1e-12)) for v in chance.values()), len(chance)


def prompt_use(backend, cases, grounding: Grounding = NONE) -> dict[str, float | None]:
    """`{"own_nll", "swapped_nll", "denoiser_own_nll", "denoiser_swapped_nll"}`: mean content NLL over the rows that
    have a partner calling the same tool, of the whole model and (for a model with a copy head) of its denoiser
    alone, every prompt rendered under `grounding`."""
    totals = {name: [0.0, 0] for name in ("own", "swapped", "denoiser_own", "denoiser_swapped")}
    for i, case in enumerate(cases):
        partner = next((other for other in cases[i + 1:] + cases[:i] if other.call.name == case.call.name
                        and other.world.name == case.world.name and other.truth != case.truth), None)
        schema = case.schema
        laid = skeleton_target(backend.tokenizer, schema, _json(case.truth)) if schema and partner else None
        if laid is None:
            continue
        canvas, tokens = laid
        for name, source in (("own", case), ("swapped", partner)):
            prompt = prepare_prompt(backend, source.world, source.call, source.history, len(canvas),
                                    grounding=grounding)
            for prefix, copy in (("", True), ("denoiser_", False)):
                if copy is False and backend.copy_head is None:
                    continue
                total, count = content_nll(backend, prompt, canvas, tokens, copy)
                totals[prefix + name][0] += total
                totals[prefix + name][1] += count
    return {f"{name}_nll": round(total / count, 4) if count else None for name, (total, count) in totals.items()}


def _json(text: str):
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
