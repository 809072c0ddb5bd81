"""World-model backends: one small interface over transformers checkpoints, and `load_backend`.

A backend turns (prompt, canvas) into per-position logits. Ours (prefix-causal) caches the prompt's
keys/values exactly in a preallocated buffer; fully bidirectional masked LMs recompute everything
(or cache approximately, only when asked); LLaDA and Dream need remote code and an explicit opt-in;
the autoregressive baseline generates left to right for side-by-side comparison."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
from transformers.cache_utils import Cache, DynamicCache

from wmstudio.model.heads.copy_head import load_copy_head
from wmstudio.model.heads.outcome_head import load_outcome_head
from wmstudio.model.heads.outcome_messages import load_outcome_messages
from wmstudio.model.network.architecture import AR, MDLM, canvas_mask, model_kind, prefix_causal_mask
from wmstudio.model.network.canvas_pass import CanvasPass, prompt_buffers
from wmstudio.model.network.sources import read_model_config, resolve_model_path
from wmstudio.model.network.tokenizer import DEFAULT_PROMPT_TOKENS
from wmstudio.model.network.trained_schemas import load_trained_schemas
from wmstudio.model.serving.ar_pins import PinWriter, closed_value
from wmstudio.problems import InvalidInput

LLADA_MASK_ID = 126336
READ_PROMPT_TOKENS = "read_prompt_tokens"  # config key: the prompt budget a model reads at, when it is not the trained one
READ_BUDGET_NOTE = ("a budget larger than the training one shows more of a big state (a listing's page, the records "
                    "the call names) at the cost of positions the model saw less; its card says what was measured")
DREAM_MASK_ID = 151666
MASKED_LM_TYPES = ("bert", "modernbert", "roberta", "distilbert", "xlm-roberta", "electra", "deberta-v2", "albert")


@dataclass
class PromptCache:
    """An encoded prompt: its ids, and (when cached) each layer's keys/values for the prompt."""

    prompt_ids: torch.Tensor  # (1, P)
    layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    buffer: "CanvasCache | CanvasPass | None" = None  # preallocated prompt+canvas keys/values, made on first use

    @property
    def length(self) -> int:
        return int(self.prompt_ids.shape[1])


class CanvasCache(Cache):
    """Keys/values of a fixed prompt plus one canvas, preallocated: each step overwrites the canvas part.

    It never grows, so re-using it across denoising steps costs no concatenation or copy of the prompt."""

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], batch: int, canvas_len: int):
        super().__init__(layers=[])
        self.prompt_len = int(layers[0][0].shape[2])
        self.batch, self.canvas_len = batch, canvas_len
        self.keys, self.values = prompt_buffers(layers, batch, canvas_len)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.keys[layer_idx][:, :, self.prompt_len :] = key_states
        self.values[layer_idx][:, :, self.prompt_len :] = value_states
        return self.keys[layer_idx], self.values[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.prompt_len

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.prompt_len + self.canvas_len, 0

    def __len__(self) -> int:
        return len(self.keys)


class Backend:
    """The interface the sampler uses: ids in, logits `(K, C, V)` for the canvas positions out.

    `copy_head` (a CopyHead or None) fills spans with values the prompt shows; `outcome_head` (an OutcomeHead or
    None) chooses the status and error code before denoising, `outcome_messages` (OutcomeMessages or None) the
    message written to them; `trained_schemas` (TrainedSchemas or None) gives a
    tool the world leaves without a response schema the one the model was trained with; `span_order` "left_to_right"
    says the model was trained to write each value from its first slot on (its loss covers a value's content
    and first pad only), so the sampler commits a span's slots in order; `decide_first` "status" says it was
    trained to decide the outcome from the prompt, so the sampler settles the outcome span before the rest;
    `writes_shape` says it was trained to sketch a response schema (model/canvas/shape_canvas.py), which a tool without
    one gets; `prompt_tokens` is the budget its prompts are rendered within: the one it was trained with, or
    `read_prompt_tokens` where its config names a larger one chosen by measurement (READ_BUDGET_NOTE)."""

    name: str = ""
    kind: str = MDLM
    exact_cache: bool = False
    copy_head: Any = None
    outcome_head: Any = None
    outcome_messages: Any = None
    trained_schemas: Any = None
    span_order: str = "any"
    decide_first: str | None = None
    writes_shape: bool = False
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS

    def __init__(self, model: Any, tokenizer: Any, name: str, mask_id: int, span_pad_id: int | None,
                 max_length: int, approximate_cache: bool = False):
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name
        self.mask_id, self.span_pad_id = int(mask_id), span_pad_id
        self.max_length = int(max_length)
        self.approximate_cache = approximate_cache
        embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        self.vocab_size = int(embeddings.weight.shape[0]) if embeddings is not None else len(tokenizer)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    def _ids(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        tensor = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        return tensor.view(1, -1) if tensor.dim() == 1 else tensor

    @torch.inference_mode()
    def encode_prompt(self, prompt_ids: Sequence[int] | torch.Tensor) -> PromptCache:
        """Run the prompt once; later `logits` calls re-use it (exactly, or approximately when asked)."""
        ids = self._ids(prompt_ids)
        if not (self.exact_cache or self.approximate_cache):
            return PromptCache(ids)
        try:
            out = self._forward(ids, cache=DynamicCache(config=self.model.config), use_cache=True)
        except (TypeError, ValueError) as err:
            raise InvalidInput(
                f"{self.name} cannot cache its prompt ({err}): run without approximate caching"
            ) from None
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        if cache is None or not getattr(cache, "layers", None):
            raise InvalidInput(f"{self.name} does not return a key/value cache: run without approximate caching")
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        return PromptCache(ids, layers)

    @torch.inference_mode()
    def logits(self, canvas_ids: torch.Tensor, cache: PromptCache) -> torch.Tensor:
        """Logits `(K, C, V)` for a batch of canvases after the encoded prompt."""
        return self.canvas_outputs(canvas_ids, cache)[0]

    @torch.inference_mode()
    def canvas_outputs(self, canvas_ids: torch.Tensor, cache: PromptCache) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits `(K, C, V)`, last hidden states `(K, C, H)` or None) for canvases after the encoded prompt;
        the hidden states feed the copy head."""
        canvas_ids = self._ids(canvas_ids)
        if cache.layers is None:
            return self.full_logits(cache.prompt_ids, canvas_ids), None
        batch, length = canvas_ids.shape
        buffer = cache.buffer
        if buffer is None or buffer.batch != batch or buffer.canvas_len != length:
            buffer = cache.buffer = CanvasCache(cache.layers, batch, length)
        positions = torch.arange(cache.length, cache.length + length, device=self.device).view(1, -1)
        mask = canvas_mask(batch, length, cache.length + length, device=self.device)
        if self.copy_head is None:
            return self._forward(canvas_ids, cache=buffer, position_ids=positions, attention_mask=mask).logits, None
        hidden = self.model.base_model(input_ids=canvas_ids, cache=buffer, position_ids=positions,
                                       attention_mask=mask).last_hidden_state
        return self.model.get_output_embeddings()(hidden), hidden

    @torch.inference_mode()
    def full_logits(self, prompt_ids: torch.Tensor, canvas_ids: torch.Tensor) -> torch.Tensor:
        """Reference path: the whole prompt + canvas through the model, canvas logits returned."""
        prompt_ids, canvas_ids = self._ids(prompt_ids), self._ids(canvas_ids)
        batch = canvas_ids.shape[0]
        ids = torch.cat([prompt_ids.expand(batch, -1), canvas_ids], dim=1)
        return self._sequence_logits(ids, prompt_ids.shape[1])[:, prompt_ids.shape[1] :]

    def _sequence_logits(self, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
        return self._forward(ids).logits

    def _forward(self, ids: torch.Tensor, **kwargs: Any) -> Any:
        return self.model(input_ids=ids, **kwargs)


class PrefixCausalBackend(Backend):
    """Our MDLM: prompt causal, canvas bidirectional over prompt + canvas, so the prompt cache is exact. A Llama
    checkpoint's steps run the canvas rows alone through `CanvasPass` (no transformers call stack, no mask)."""

    exact_cache = True
    fast_canvas = True  # False: each step through transformers' own forward (the pass's reference)

    def _forward(self, ids: torch.Tensor, **kwargs: Any) -> Any:
        if kwargs.get("use_cache"):  # encoding the prompt: its keys/values are wanted, not its logits
            kwargs.setdefault("logits_to_keep", 1)
        return self.model(input_ids=ids, **kwargs)

    @torch.inference_mode()
    def canvas_outputs(self, canvas_ids: torch.Tensor, cache: PromptCache) -> tuple[torch.Tensor, torch.Tensor | None]:
        if cache.layers is None or not self.fast_canvas or not CanvasPass.fits(self.model):
            return super().canvas_outputs(canvas_ids, cache)
        canvas_ids = self._ids(canvas_ids)
        batch, length = canvas_ids.shape
        step = cache.buffer
        if not isinstance(step, CanvasPass) or step.batch != batch or step.canvas_len != length:
            step = cache.buffer = CanvasPass(self.model, cache.layers, batch, length)
        hidden = step(canvas_ids)
        return self.model.get_output_embeddings()(hidden), hidden if self.copy_head is not None else None

    def _sequence_logits(self, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
        mask = prefix_causal_mask(prompt_len, ids.shape[1] - prompt_len, device=self.device)
        return self._forward(ids, attention_mask=mask.expand(ids.shape[0], -1, -1, -1)).logits


class BidirectionalBackend(Backend):
    """A fully bidirectional masked LM (BERT/ModernBERT-style, LLaDA): every step sees the whole sequence.

    Its prompt states depend on the canvas, so caching them is only an approximation (opt-in)."""


class DreamBackend(BidirectionalBackend):
    """Dream: adapted from an AR model, so position i's prediction sits at logits[i - 1]."""

    def _sequence_logits(self, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
        logits = self._forward(ids).logits
        return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)

    def logits(self, canvas_ids: torch.Tensor, cache: PromptCache) -> torch.Tensor:
        if cache.layers is not None:
            raise InvalidInput("approximate caching is not supported for Dream checkpoints: run without it")
        return super().logits(canvas_ids, cache)


class ArBaseline:
    """An autoregressive world model (`AutoModelForCausalLM`), generating left to right.

    It cannot see anchors that come later in the response: callers put them in the prompt as directives, and a pinned
    field's value is written for it where it opens that key (model/serving/ar_pins.py). The helpers that are not
    diffusion's own (an outcome head, trained schemas) load from its folder as an MDLM's do."""

    kind = AR

    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    outcome_head: Any = None
    outcome_messages: Any = None
    trained_schemas: Any = None

    def __init__(self, model: Any, tokenizer: Any, name: str, max_length: int):
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name
        self.max_length = int(max_length)
        self.device = next(model.parameters()).device
        self.eos_id = tokenizer.eos_token_id

    @torch.inference_mode()
    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 128, temperature: float = 0.0,
                 repetition_penalty: float = 1.0, samples: int = 1, seed: int = 0,
                 pins: dict[str, str] | Sequence[dict[str, str]] | None = None) -> list[list[int]]:
        """`samples` continuations of `prompt_ids` (eos excluded), with a seeded generator and a CTRL penalty;
        `pins` (a field's path -> JSON value text; one dict for all samples or one per sample) are written wherever
        a sample opens their key."""
        generator = torch.Generator(device="cpu").manual_seed(seed)
        ids = torch.as_tensor([list(prompt_ids)] * samples, dtype=torch.long, device=self.device)
        max_new_tokens = max(0, min(max_new_tokens, self.max_length - ids.shape[1]))
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        produced = torch.zeros((samples, 0), dtype=torch.long, device=self.device)
        finished = torch.zeros(samples, dtype=torch.bool, device=self.device)
        per_sample = [pins] * samples if isinstance(pins, dict) or pins is None else list(pins)
        writers = [PinWriter(own, self.tokenizer) for own in per_sample] if any(per_sample) else []
        for _ in range(max_new_tokens):
            logits = out.logits[:, -1].float()
            if repetition_penalty != 1.0 and produced.shape[1]:
                seen = torch.gather(logits, 1, produced)
                seen = torch.where(seen > 0, seen / repetition_penalty, seen * repetition_penalty)
                logits = logits.scatter(1, produced, seen)
            if temperature > 0:
                probs = torch.softmax(logits.double() / temperature, dim=-1).cpu()
                token = torch.multinomial(probs, 1, generator=generator).to(self.device).view(-1)
            else:
                token = logits.argmax(dim=-1)
            for row, writer in enumerate(writers):
                if (forced := writer.next_forced(logits[row])) is not None:
                    token[row] = forced
                if forced is None or writer.chose:  # the model's own choice: it may close what holds a pin
                    choice = int(token[row])
                    instead = writer.before_ending(writer.text) if choice == self.eos_id else \
                        writer.before_closing(writer.text, self.tokenizer.decode([choice]))
                    token[row] = instead if instead is not None else choice  # the pins first, then its close
            token = torch.where(finished, torch.full_like(token, self.eos_id), token)
            produced = torch.cat([produced, token.view(-1, 1)], dim=1)
            finished |= token == self.eos_id
            for row in range(samples):  # an answer ends where its outermost bracket closes (a JSON grammar's end)
                reading = bool(writers) and writers[row].reading
                if bool(finished[row]) or not (reading or any(c in self.tokenizer.decode([int(token[row])])
                                                              for c in "}]")):
                    continue  # the whole text is read only while pins are written or a bracket has just closed
                text = self.tokenizer.decode(produced[row].tolist(), skip_special_tokens=True)
                if reading:
                    writers[row].after(text)
                if closed_value(text):
                    finished[row] = True
            if bool(finished.all()):
                break
            out = self.model(input_ids=token.view(-1, 1), cache=cache, use_cache=True, logits_to_keep=1)
        results = []
        for row in produced.tolist():
            results.append(row[: row.index(self.eos_id)] if self.eos_id in row else row)
        return results


# ----------------------------------------------------------------------------------------------------


SMALL_MODEL_PARAMETERS = 50_000_000


def set_cpu_threads(model: Any) -> int:
    """CPU threads for inference: WMSTUDIO_THREADS when set, else 1 for a small model (< 50M parameters).

    A second thread saves little on such a model, and while another process holds a core torch's threads
    wait on each other (measured on 2 cores beside a busy process: 7 ms per canvas step with 1, 500 ms with 2)."""
    wanted = os.environ.get("WMSTUDIO_THREADS", "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        torch.set_num_threads(int(wanted))
    elif sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS:
        torch.set_num_threads(1)
    return torch.get_num_threads()


def pick_device(device: str | None = None) -> torch.device:
    """The device to run on: the one asked for, else cuda, then mps, then cpu."""
    if device:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InvalidInput(f"--device {device}: no CUDA GPU is available here; use --device cpu")
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def load_backend(model_id_or_path: str | Path | None = None, trust_remote_code: bool = False,
                 device: str | None = None, dtype: torch.dtype | None = None,
                 approximate_cache: bool = False) -> Backend | ArBaseline:
    """Load a world model: ours (config `wmstudio` marker), a native masked LM, LLaDA/Dream (remote code,
    opt-in only) or an autoregressive baseline. InvalidInput for unknown models and missing opt-ins."""
    backend = _load(model_id_or_path, trust_remote_code, device, dtype, approximate_cache)
    if backend.device.type == "cpu":
        set_cpu_threads(backend.model)
    return backend


def _load(model_id_or_path: str | Path | None, trust_remote_code: bool, device: str | None,
          dtype: torch.dtype | None, approximate_cache: bool) -> Backend | ArBaseline:
    source = resolve_model_path(model_id_or_path)
    config = read_model_config(source)
    where = pick_device(device)
    dtype = dtype or (torch.bfloat16 if where.type in ("cuda", "mps") else torch.float32)
    kind = model_kind(_Namespace(config))
    model_type = str(config.get("model_type", "")).lower()
    architectures = [str(a) for a in config.get("architectures") or []]
    remote = bool(config.get("auto_map"))
    common = {"dtype": dtype}

    if kind in (MDLM, AR):
        model = AutoModelForCausalLM.from_pretrained(source, **common).to(where)
        tokenizer = AutoTokenizer.from_pretrained(source)
        max_length = config.get("max_position_embeddings", 1024)
        if kind == AR:
            baseline = ArBaseline(model, tokenizer, source, max_length)
            baseline.prompt_tokens = int(config["wmstudio"].get("prompt_tokens", DEFAULT_PROMPT_TOKENS))
            if Path(source).is_dir():  # the helpers that are not diffusion's own, where the folder has them
                baseline.outcome_head = load_outcome_head(Path(source))
                baseline.outcome_messages = load_outcome_messages(Path(source))
                baseline.trained_schemas = load_trained_schemas(Path(source))
            return baseline
        marker = config["wmstudio"]
        if approximate_cache:
            raise InvalidInput("--approximate-cache is for fully bidirectional models; ours caches exactly already")
        backend = PrefixCausalBackend(model, tokenizer, source, marker.get("mask_token_id", tokenizer.mask_token_id),
                                      marker.get("span_pad_token_id", tokenizer.pad_token_id), max_length)
        backend.span_order = marker.get("span_order", "any")
        backend.decide_first = marker.get("decide_first")
        backend.writes_shape = bool(marker.get("writes_shape", False))
        backend.prompt_tokens = int(marker.get(READ_PROMPT_TOKENS) or marker.get("prompt_tokens", DEFAULT_PROMPT_TOKENS))
        if Path(source).is_dir():
            backend.copy_head = load_copy_head(Path(source), where)
            backend.outcome_head = load_outcome_head(Path(source))
            backend.outcome_messages = load_outcome_messages(Path(source))
            backend.trained_schemas = load_trained_schemas(Path(source))
        return backend
    if remote or "llada" in model_type or "dream" in model_type:
        if not trust_remote_code:
            raise InvalidInput(
                f"{source} runs its own model code (model_type {model_type or '?'}): pass --trust-remote-code "
                "(trust_remote_code=True) if you trust its authors, or pick a native model"
            )
        model = AutoModel.from_pretrained(source, trust_remote_code=True, **common).to(where)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=True)
        max_length = config.get("max_sequence_length") or config.get("max_position_embeddings") or 4096
        pad = tokenizer.eos_token_id if tokenizer.pad_token_id is None else tokenizer.pad_token_id
        if "dream" in model_type:
            return DreamBackend(model, tokenizer, source, DREAM_MASK_ID, pad, max_length)
        mask = LLADA_MASK_ID if "llada" in model_type else tokenizer.mask_token_id
        if mask is None:
            raise InvalidInput(f"{source}: cannot tell its mask token (the tokenizer has none): not a masked LM?")
        return BidirectionalBackend(model, tokenizer, source, mask, pad, max_length, approximate_cache)
    if model_type in MASKED_LM_TYPES or any(a.endswith("ForMaskedLM") for a in architectures):
        model = AutoModelForMaskedLM.from_pretrained(source, **common).to(where)
        tokenizer = AutoTokenizer.from_pretrained(source)
        if tokenizer.mask_token_id is None:
            raise InvalidInput(f"{source}: the tokenizer has no mask token, so it cannot denoise a canvas")
        max_length = config.get("max_position_embeddings", 512)
        return BidirectionalBackend(model, tokenizer, source, tokenizer.mask_token_id, tokenizer.pad_token_id,
                                    max_length, approximate_cache)
    if any(a.endswith("ForCausalLM") for a in architectures):
        model = AutoModelForCausalLM.from_pretrained(source, **common).to(where)
        tokenizer = AutoTokenizer.from_pretrained(source)
        return ArBaseline(model, tokenizer, source, config.get("max_position_embeddings", 2048))
    raise InvalidInput(
        f"{source}: model type {model_type or '?'} ({', '.join(architectures) or 'no architectures'}) is not a "
        "world model wmstudio can run: use a wmstudio checkpoint, a masked LM (BERT/ModernBERT-style), "
        "LLaDA/Dream with --trust-remote-code, or a causal LM as the AR baseline"
    )


class _Namespace:
    def __init__(self, data: dict):
        self.wmstudio = data.get("wmstudio")
