"""One denoising step of our Llama world model over the canvas alone, without transformers' call stack.

The prompt's keys/values are fixed (prefix-causal, architecture.py), so a step runs only the canvas rows: each
layer writes the canvas's keys/values after the prompt's in a preallocated buffer and every canvas query attends
to all of it. Every canvas query sees every key, so attention needs no mask, which lets SDPA take its fused
kernel; the rotary angles of the canvas positions are computed once per canvas. It reads the checkpoint's own
modules (norms, projections, MLP), so it computes what `LlamaForCausalLM` computes with a prefix-causal mask
(tests/test_backends.py compares the two); what it saves is the per-call overhead, which on a small model is
a large part of a step."""

from __future__ import annotations

import torch
from torch.nn.functional import scaled_dot_product_attention
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb


def prompt_buffers(layers: list[tuple[torch.Tensor, torch.Tensor]], batch: int, canvas_len: int
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Each layer's keys and values `(batch, heads, P + canvas_len, dim)` with the prompt's `P` copied in front:
    a step overwrites only the canvas part, so the prompt is never concatenated or copied again."""
    keys, values = [], []
    for key, value in layers:
        prompt_len = key.shape[2]
        shape = (batch, key.shape[1], prompt_len + canvas_len, key.shape[3])
        keys.append(torch.empty(shape, dtype=key.dtype, device=key.device))
        values.append(torch.empty((*shape[:3], value.shape[3]), dtype=value.dtype, device=value.device))
        keys[-1][:, :, :prompt_len] = key
        values[-1][:, :, :prompt_len] = value
    return keys, values


class CanvasPass:
    """The canvas rows of one prompt's denoising: prompt keys/values copied once into a buffer with room for a
    `batch` x `canvas_len` canvas; calling it with canvas ids returns the final hidden states `(K, C, H)`."""

    def __init__(self, model, layers: list[tuple[torch.Tensor, torch.Tensor]], batch: int, canvas_len: int):
        self.model = model
        self.batch, self.canvas_len = batch, canvas_len
        self.prompt_len = int(layers[0][0].shape[2])
        self.keys, self.values = prompt_buffers(layers, batch, canvas_len)
        key = layers[0][0]
        positions = torch.arange(self.prompt_len, self.prompt_len + canvas_len, device=key.device).view(1, -1)
        probe = torch.empty((1, canvas_len, model.config.hidden_size), dtype=key.dtype, device=key.device)
        inner = model.model
        self.cos, self.sin = inner.rotary_emb(probe, positions)

    @staticmethod
    def fits(model) -> bool:
        """Whether `model` is a Llama of the layout this pass reads (ours are)."""
        inner = getattr(model, "model", None)
        return getattr(model.config, "model_type", "") == "llama" and all(
            hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb"))

    @torch.inference_mode()
    def __call__(self, canvas_ids: torch.Tensor) -> torch.Tensor:
        inner = self.model.model
        hidden = inner.embed_tokens(canvas_ids)
        batch, length = canvas_ids.shape
        start = self.prompt_len
        for index, layer in enumerate(inner.layers):
            attention = layer.self_attn
            normed = layer.input_layernorm(hidden)
            shape = (batch, length, -1, attention.head_dim)
            query = attention.q_proj(normed).view(shape).transpose(1, 2)
            key = attention.k_proj(normed).view(shape).transpose(1, 2)
            value = attention.v_proj(normed).view(shape).transpose(1, 2)
            query, key = apply_rotary_pos_emb(query, key, self.cos, self.sin)
            keys, values = self.keys[index], self.values[index]
            keys[:, :, start:] = key
            values[:, :, start:] = value
            if keys.shape[1] != query.shape[1]:  # grouped-query attention: each key head serves several queries
                repeat = query.shape[1] // keys.shape[1]
                keys, values = keys.repeat_interleave(repeat, dim=1), values.repeat_interleave(repeat, dim=1)
            mixed = scaled_dot_product_attention(query, keys, values, scale=attention.scaling)
            hidden = hidden + attention.o_proj(mixed.transpose(1, 2).reshape(batch, length, -1))
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return inner.norm(hidden)
