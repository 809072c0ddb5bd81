"""A policy's replies sampled in one batch with each token's log-probability: what GRPO rollouts record.

Both agent policies (the word policy and a chat model) write their next reply this way: contexts left-padded into
one batch, generation up to a stop token, and the log-probability of every written token under the policy, which
TRL's scoring of the same tokens must reproduce (tests check it)."""

from __future__ import annotations

from typing import Any

import torch


@torch.inference_mode()
def sample_replies(model: Any, rows: list[list[int]], pad: int, stops: list[int], max_new_tokens: int,
                   sample: bool = True, temperature: float = 1.0) -> tuple[list[list[int]], list[list[float]]]:
    """Each row's reply (its ids up to and with the first stop token) and their log-probabilities, sampled at
    `temperature` or greedy."""
    width = max(len(row) for row in rows)
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows], device=device)
    attention = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows], device=device)
    out = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=max_new_tokens,
                         do_sample=sample, temperature=temperature if sample else None, top_k=None, top_p=None,
                         eos_token_id=stops, pad_token_id=pad, output_scores=True, return_dict_in_generate=True)
    new = out.sequences[:, width:]
    logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1).gather(-1, new[..., None])[..., 0]
    replies, reply_logprobs = [], []
    for row, lp in zip(new.tolist(), logprobs.tolist()):
        end = next((i + 1 for i, token in enumerate(row) if token in stops), len(row))
        replies.append(row[:end])
        reply_logprobs.append(lp[:end])
    return replies, reply_logprobs
