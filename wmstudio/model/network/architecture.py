"""Our world-model architecture: a transformers-native Llama used as a prefix-causal masked denoiser.

Position i's logits predict token i (no shift). Prompt tokens attend causally within the prompt;
canvas tokens attend to the whole prompt and the whole canvas. The prompt's keys/values therefore
never depend on the canvas, so caching them across denoising steps is exact. The checkpoint loads
with `AutoModelForCausalLM` and no custom code; `config.wmstudio` marks what kind of model it is."""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

MDLM = "mdlm"
AR = "ar"


def new_model(
    tokenizer: PreTrainedTokenizerBase,
    kind: str = MDLM,
    layers: int = 4,
    hidden: int = 256,
    heads: int = 4,
    ffn: int = 1024,
    max_positions: int = 1024,
) -> LlamaForCausalLM:
    """A randomly initialised world model for `tokenizer`: `kind="mdlm"` (masked denoiser) or `"ar"`.

    Embeddings are tied, so the default shape (5.2M parameters) is about 21 MB as fp32 safetensors."""
    if kind not in (MDLM, AR):
        raise ValueError(f"unknown model kind {kind!r}: use 'mdlm' or 'ar'")
    if hidden % heads:
        raise ValueError(f"hidden={hidden} is not divisible by heads={heads}: pick sizes that divide")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    config.wmstudio = model_marker(tokenizer, kind)
    return LlamaForCausalLM(config)


def model_marker(tokenizer: PreTrainedTokenizerBase, kind: str) -> dict:
    """The `wmstudio` dict stored in config.json: which kind of model and the special token ids it uses."""
    if kind == AR:
        return {"kind": AR, "eos_token_id": tokenizer.eos_token_id, "sep_token_id": tokenizer.sep_token_id}
    return {
        "kind": MDLM,
        "mask_token_id": tokenizer.mask_token_id,
        "span_pad_token_id": tokenizer.pad_token_id,
        "sep_token_id": tokenizer.sep_token_id,
        "attention": "prefix-causal",
        "span_order": "left_to_right",  # trained on each value's content and first pad: write values in order
    }


def prefix_causal_mask(
    prompt_len: int | Sequence[int] | torch.Tensor,
    canvas_len: int | Sequence[int] | torch.Tensor,
    total_len: int | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.bool,
) -> torch.Tensor:
    """The 4-D attention mask `(batch, 1, T, T)` for prompt+canvas rows; True (or 0.0) = may attend.

    Lengths are one int for all rows or one per row (right-padded batches): query i < prompt_len sees
    keys 0..i; a canvas query sees every prompt and canvas key of its row; padding queries see keys
    0..i (never an empty row, which would give NaN). A float `dtype` gives an additive mask."""
    prompts = torch.as_tensor(prompt_len, device=device).reshape(-1)
    canvases = torch.as_tensor(canvas_len, device=device).reshape(-1)
    batch = max(prompts.numel(), canvases.numel())
    prompts, canvases = prompts.expand(batch), canvases.expand(batch)
    lengths = prompts + canvases
    total = int(total_len if total_len is not None else lengths.max())
    if total < int(lengths.max()):
        raise ValueError(f"total_len={total} is shorter than the longest row ({int(lengths.max())} tokens)")
    query = torch.arange(total, device=device).view(1, total, 1)
    key = torch.arange(total, device=device).view(1, 1, total)
    causal = key <= query
    in_canvas = (query >= prompts.view(-1, 1, 1)) & (query < lengths.view(-1, 1, 1))
    real_key = key < lengths.view(-1, 1, 1)
    allowed = (causal | (in_canvas & real_key)).unsqueeze(1)
    if dtype == torch.bool:
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


def canvas_mask(batch: int, canvas_len: int, key_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The 4-D mask for canvas rows against a cached prompt: every canvas query sees all `key_len` keys."""
    return torch.ones((batch, 1, canvas_len, key_len), dtype=torch.bool, device=device)


def model_kind(config) -> str | None:
    """`"mdlm"`, `"ar"` or None (not one of ours), read from a config's `wmstudio` marker."""
    marker = getattr(config, "wmstudio", None)
    return marker.get("kind") if isinstance(marker, dict) else None
