"""The copy (pointer) head: fill a value span with a value the prompt shows, whole, in one step.

Copying an id by attention alone (induction heads) does not emerge in a small model trained minutes on a CPU, so
copying has explicit structure. For each masked value span the candidates are the prompt's JSON leaves
(world/heads/copy_sources.py) whose value fits the span (type, grammar, length). The head scores each pair from
features a few minutes of training can use (key-name agreement such as `order_id` ↔ `arguments.order_id`, path
and index agreement, the candidate's source, type and record) plus learned key-word embeddings and the model's
hidden state at the span; a gate scored from the hidden state ("generate") competes with the candidates, as in
pointer-generator networks (See et al., 2017). The checkpoint stays a transformers model: the head's weights
live beside it in `copy_head.safetensors` with its shape in `copy_head.json`."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wmstudio.model.canvas.canvas import OUTCOME_KEY, Canvas, Span
from wmstudio.model.canvas.constraints import completable
from wmstudio.model.canvas.layout import KEY, ascii_json, dump
from wmstudio.model.network.tokenizer import encode_text
from wmstudio.world.heads.copy_candidates import DERIVED_OPS
from wmstudio.world.heads.copy_sources import SOURCES, CopySource
from wmstudio.world.json_types import value_at
from wmstudio.world.jsonpath import parse_path

HEAD_FILE, CONFIG_FILE = "copy_head.safetensors", "copy_head.json"
COPY_KINDS = ("string", "integer", "number", "enum")  # a map entry's key span reads as a string
KEY_BUCKETS = 1024
MAX_KEY_WORDS = 6
SHOWN_FEATURES = 26  # the features of a head trained before computed candidates (expanded on load)
SAME_KEY = 0  # the feature that says a candidate's key is the span's key
FEATURES = SHOWN_FEATURES + 1 + len(DERIVED_OPS)


def key_words(text: str) -> list[str]:
    """`orderId` / `order_id` -> ["order", "id"]; plurals lose a trailing s (`orders` -> `order`)."""
    return list(_key_words(str(text)))


@lru_cache(maxsize=65536)
def _key_words(text: str) -> tuple[str, ...]:
    """key_words, remembered: a plan asks for the same few key names thousands of times."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return tuple(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")) else w
                 for w in words)


def key_buckets(words: Sequence[str]) -> list[int]:
    """Hashed word ids for the head's key embeddings (0 is padding)."""
    ids = [1 + zlib.crc32(w.encode()) % (KEY_BUCKETS - 1) for w in words[:MAX_KEY_WORDS]]
    return ids + [0] * (MAX_KEY_WORDS - len(ids))


@dataclass
class SpanSlot:
    """A value span the head may fill: which span of the canvas, its path parts, kind and key words."""

    index: int
    span: Span
    parts: list[str | int]
    words: list[str]

    @property
    def key(self) -> str:
        return next((str(p) for p in reversed(self.parts) if isinstance(p, str)), "")


def copyable_spans(canvas: Canvas) -> list[SpanSlot]:
    """The canvas's spans of a kind the head fills (strings, numbers, enum options), outcome fields aside."""
    slots = []
    for index, span in enumerate(canvas.spans):
        if (span.kind not in COPY_KINDS and span.kind != KEY) or not span.path:
            continue
        parts = parse_path(span.path)
        key = next((str(p) for p in reversed(parts) if isinstance(p, str)), "")
        if key == OUTCOME_KEY:  # decided by the model, never copied from an earlier turn
            continue
        slots.append(SpanSlot(index, span, parts, key_words(key)))
    return slots


def value_tokens(canvas: Canvas, span: Span, value: Any, encoded: dict[str, list[int]] | None = None) -> list[int] | None:
    """`value` as the span's tokens, right-padded with pads to the span's length; None when it does not fit the
    span's type, grammar or length. `encoded` caches texts already tokenised (a plan tokenises each value once)."""
    if span.kind in ("string", KEY) and not isinstance(value, str):
        return None
    if span.kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        return None
    if span.kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return None
    if span.kind == "enum" and not isinstance(value, str):
        return None
    text = ascii_json(value) if span.kind == "enum" else dump(value)
    if span.quoted:
        text = text[1:-1]
    if not text:
        return None
    if encoded is None or text not in encoded:
        ids = encode_text(canvas.tokenizer, text)
        if encoded is not None:
            encoded[text] = ids
    else:
        ids = encoded[text]
    if len(ids) > span.length:
        return None
    ids = ids + [canvas.pad_id] * (span.length - len(ids))
    if span.grammar is not None and not completable(canvas.vocab.table(span.grammar), ids):
        return None
    return ids


@dataclass(frozen=True)
class SourceFacts:
    """What pair_features reads of a source, worked out once per plan rather than once per span."""

    key: str
    words: frozenset[str]
    with_parent: frozenset[str]
    path_keys: frozenset[str]
    index: int | None
    text: str


def source_facts(source: CopySource) -> SourceFacts:
    """The facts of `source` that every span's pair features compare against."""
    parent = _parent(source)
    words = frozenset(_key_words(source.key))
    return SourceFacts(
        key=source.key.lower(),
        words=words,
        with_parent=words | frozenset(_key_words(parent)),
        path_keys=frozenset(str(p).lower() for p in source.path if isinstance(p, str)),
        index=next((p for p in reversed(source.path) if isinstance(p, int)), None),
        text=str(source.value),
    )


def pair_features(slot: SpanSlot, source: CopySource, facts: SourceFacts | None = None) -> list[float]:
    """The hand-made evidence that `source` is the value of `slot` (FEATURES numbers, mostly in [0, 1]); `facts`
    are source_facts(source) when the caller already has them."""
    facts = facts or source_facts(source)
    span_key, cand_key = slot.key.lower(), facts.key
    span_words, cand_words = set(slot.words), facts.words
    with_parent = facts.with_parent
    union = span_words | cand_words
    cand_path_keys = facts.path_keys
    suffix = 0
    for a, b in zip(reversed(slot.parts), reversed(source.path)):
        if (isinstance(a, int) and isinstance(b, int) and a == b) or (str(a).lower() == str(b).lower()):
            suffix += 1
        else:
            break
    span_index = next((p for p in reversed(slot.parts) if isinstance(p, int)), None)
    cand_index = facts.index
    value = source.value
    text = facts.text
    kind = "string" if slot.span.kind == KEY else slot.span.kind
    return [
        float(span_key == cand_key and bool(span_key)),
        float(bool(span_key) and bool(cand_key) and (span_key in cand_key or cand_key in span_key)),
        len(span_words & cand_words) / len(union) if union else 0.0,
        min(suffix, 3) / 3,
        float(span_index is not None and span_index == cand_index),
        len(span_words & with_parent) / len(span_words | with_parent) if span_words | with_parent else 0.0,
        float(source.call_record),
        *[float(source.source == name) for name in SOURCES],
        1.0 / source.turns_back if source.turns_back else 0.0,
        float(isinstance(value, str)),
        float(isinstance(value, int)),
        float(isinstance(value, float)),
        *[float(kind == name) for name in COPY_KINDS],
        min(len(text), 32) / 32,
        float(value in ("", 0)),
        float(any(ch.isdigit() for ch in text)),
        float(span_key in cand_path_keys),
        float(bool(slot.parts) and bool(source.path) and str(slot.parts[0]).lower() in cand_path_keys),
        float(source.call_key),
        *[float(source.derived == op) for op in DERIVED_OPS],
    ]


@dataclass
class CopyPlan:
    """For one canvas and the prompt's copy sources: each fillable span, its candidates, their tokens and
    features, ready for the head (the same plan serves training targets and sampling)."""

    slots: list[SpanSlot]
    candidates: list[list[int]]  # per slot: indices into `sources`
    tokens: list[list[list[int]]]  # per slot, per candidate: the span's tokens
    features: torch.Tensor  # (S, C, FEATURES), zero-padded
    cand_keys: torch.Tensor  # (S, C, MAX_KEY_WORDS)
    span_keys: torch.Tensor  # (S, MAX_KEY_WORDS)
    kinds: torch.Tensor  # (S, len(COPY_KINDS))
    mask: torch.Tensor  # (S, C) bool: a real candidate
    sources: list[CopySource] = field(default_factory=list)
    ungated: list[bool] = field(default_factory=list)  # per slot: a key the model never trained on (`copy_plan`)

    @property
    def width(self) -> int:
        return self.mask.shape[1]

    def targets(self, value: Any) -> list[list[int]]:
        """Per slot, the candidates (positions in its row) equal to the true value at the slot's path in `value`;
        empty (generate) when the truth is neutral ("" or 0) or no candidate holds it."""
        found = []
        for s, slot in enumerate(self.slots):
            truth = value_at(value, slot.parts)
            hits = []
            if truth not in (None, "", 0) and not isinstance(truth, bool):
                for c, index in enumerate(self.candidates[s]):
                    cand = self.sources[index].value
                    if type(cand) is type(truth) and cand == truth:
                        hits.append(c)
            found.append(hits)
        return found


def copy_plan(canvas: Canvas, sources: Sequence[CopySource], max_candidates: int = 64,
              known_keys: frozenset[str] | None = None) -> CopyPlan | None:
    """The plan for `canvas`; None when no span has a candidate that fits. A slot keeps its `max_candidates`
    best candidates by key agreement and whether their record is the one the call names (ties: the order sources
    come in). With `known_keys` (the response keys the model trained on), a slot whose key is not one of them is
    `ungated`: its gate learned nothing of that key (zero-shot it said "generate" for a user's `first_name` with
    the user's record shown), so the sampler lets a candidate of the very same key fill it on its own score."""
    slots, candidates, tokens, rows = [], [], [], []
    encoded: dict[str, list[int]] = {}
    fitted: dict[tuple, list[int] | None] = {}  # (span shape, source) -> its tokens: spans of one shape share them
    facts = [source_facts(source) for source in sources]
    keys = [key_buckets(list(_key_words(source.key)) + list(_key_words(_parent(source)))) for source in sources]
    for slot in copyable_spans(canvas):
        span = slot.span
        shape = (span.kind, span.quoted, span.length, span.grammar)
        fitting = []
        for index, source in enumerate(sources):
            memo = (shape, index)
            if memo not in fitted:
                fitted[memo] = value_tokens(canvas, span, source.value, encoded)
            ids = fitted[memo]
            if ids is not None:
                features = pair_features(slot, source, facts[index])
                fitting.append((-(features[0] + features[1] + features[2] + features[5] + features[6]), len(fitting),
                                index, ids, features))  # key agreement, then the record the call names
        if not fitting:
            continue
        fitting.sort(key=lambda item: item[:2])
        fitting = fitting[:max_candidates]
        slots.append(slot)
        candidates.append([item[2] for item in fitting])
        tokens.append([list(item[3]) for item in fitting])
        rows.append([(item[4], keys[item[2]]) for item in fitting])
    if not slots:
        return None
    width = max(len(r) for r in rows)
    features = torch.tensor([[feats for feats, _ in row] + [[0.0] * FEATURES] * (width - len(row)) for row in rows],
                            dtype=torch.float32)
    cand_keys = torch.tensor([[keys for _, keys in row] + [[0] * MAX_KEY_WORDS] * (width - len(row)) for row in rows],
                             dtype=torch.long)
    mask = torch.tensor([[True] * len(row) + [False] * (width - len(row)) for row in rows], dtype=torch.bool)
    span_keys = torch.tensor([key_buckets(slot.words) for slot in slots], dtype=torch.long)
    kinds = torch.tensor([[float(slot.span.kind == k or (slot.span.kind == KEY and k == "string")) for k in COPY_KINDS]
                          for slot in slots])
    ungated = [known_keys is not None and bool(slot.key) and slot.key not in known_keys for slot in slots]
    return CopyPlan(slots, candidates, tokens, features, cand_keys, span_keys, kinds, mask, list(sources), ungated)


class CopyHead(nn.Module):
    """Scores (generate, candidate 1, ..., candidate C) for each span from its hidden state and the pairs'
    features; `forward` returns logits of shape (N, 1 + C), -inf where there is no candidate."""

    def __init__(self, hidden: int, width: int = 64, key_dim: int = 16):
        super().__init__()
        self.config = {"hidden": hidden, "width": width, "key_dim": key_dim, "features": FEATURES,
                       "key_buckets": KEY_BUCKETS, "max_key_words": MAX_KEY_WORDS}
        self.keys = nn.EmbeddingBag(KEY_BUCKETS, key_dim, mode="mean", padding_idx=0)
        self.span = nn.Linear(hidden, width)
        self.pair = nn.Linear(FEATURES + key_dim, width)
        self.score = nn.Sequential(nn.GELU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 1))
        self.gate = nn.Sequential(nn.Linear(hidden + key_dim + len(COPY_KINDS), width), nn.GELU(),
                                  nn.Linear(width, 1))

    def forward(self, hidden: torch.Tensor, span_keys: torch.Tensor, kinds: torch.Tensor, features: torch.Tensor,
                cand_keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, c = mask.shape
        span_key = self.keys(span_keys)
        cand_key = self.keys(cand_keys.reshape(n * c, -1)).view(n, c, -1)
        pair = self.pair(torch.cat([features, span_key.unsqueeze(1) * cand_key], dim=-1))
        pair = pair + self.span(hidden).unsqueeze(1)
        scores = self.score(pair).squeeze(-1).masked_fill(~mask, -math.inf)
        generate = self.gate(torch.cat([hidden, span_key, kinds], dim=-1))
        return torch.cat([generate, scores], dim=1)

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, str(folder / HEAD_FILE))
        (folder / CONFIG_FILE).write_text(json.dumps(self.config, indent=2) + "\n", encoding="utf-8")


def load_copy_head(folder: Path, device: torch.device | str = "cpu") -> CopyHead | None:
    """The head saved beside a checkpoint, or None when the folder has none (or one of another shape); a head saved
    with fewer features (they are always appended) scores exactly as it did, the new ones weighted zero until it
    trains on them."""
    folder = Path(folder)
    if not (folder / HEAD_FILE).exists() or not (folder / CONFIG_FILE).exists():
        return None
    from safetensors.torch import load_file

    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    if not SHOWN_FEATURES <= (config.get("features") or 0) <= FEATURES or config.get("key_buckets") != KEY_BUCKETS:
        return None
    head = CopyHead(config["hidden"], config["width"], config["key_dim"])
    weights = load_file(str(folder / HEAD_FILE))
    known = config["features"]
    if known < FEATURES:  # an older head: the features added since (always appended) start with no weight
        old = weights["pair.weight"]
        grown = torch.zeros(old.shape[0], FEATURES + config["key_dim"], dtype=old.dtype)
        grown[:, :known] = old[:, :known]
        grown[:, FEATURES:] = old[:, known:]
        weights["pair.weight"] = grown
    head.load_state_dict(weights)
    return head.to(device).eval()


COPY_THRESHOLD = 0.5  # a span is filled once its best candidate is at least this likely


@dataclass
class Fill:
    """A copy decision for one sample: fill slot `slot` with candidate `choice`'s tokens, this confidently."""

    sample: int
    slot: int
    tokens: list[int]
    confidence: float


class CopyFiller:
    """The head applied during sampling: at each step, for every sample's wholly masked spans, fill those whose
    best candidate is likely enough (`fills`) and hold back from token sampling those whose best option is a
    candidate not yet likely enough (`holds`), so a copied id is never spelled token by token."""

    def __init__(self, plan: CopyPlan, head: CopyHead, device: torch.device | str):
        self.plan, self.head = plan, head
        self.starts = [slot.span.start for slot in plan.slots]
        self.ranges = [range(slot.span.start, slot.span.end) for slot in plan.slots]
        tensors = (plan.span_keys, plan.kinds, plan.features, plan.cand_keys, plan.mask)
        self.span_keys, self.kinds, self.features, self.cand_keys, self.mask = (t.to(device) for t in tensors)

    @torch.inference_mode()
    def propose(self, hidden: torch.Tensor, masked: torch.Tensor,
                threshold: float = COPY_THRESHOLD) -> tuple[list[Fill], list[Fill]]:
        """(fills, holds) for hidden states `(K, C, H)` and the still-masked positions `(K, C)`."""
        masked_cpu = masked.cpu()
        pairs = [(k, s) for k in range(masked.shape[0]) for s, span in enumerate(self.ranges)
                 if bool(masked_cpu[k, span.start:span.stop].all())]
        if not pairs:
            return [], []
        ks = torch.tensor([k for k, _ in pairs], device=hidden.device)
        ss = torch.tensor([s for _, s in pairs], device=hidden.device)
        starts = torch.tensor([self.starts[s] for _, s in pairs], device=hidden.device)
        logits = self.head(hidden[ks, starts].to(self.features.dtype), self.span_keys[ss], self.kinds[ss],
                           self.features[ss], self.cand_keys[ss], self.mask[ss])
        logits = logits.float()
        ungated = torch.tensor([bool(self.plan.ungated and self.plan.ungated[s]) for _, s in pairs],
                               device=logits.device)
        logits[:, 0] = logits[:, 0].masked_fill(ungated, -math.inf)  # candidates only, for a key never trained on
        probs = torch.softmax(logits, dim=-1).cpu()
        fills, holds = [], []
        for row, (k, s) in enumerate(pairs):
            best = int(probs[row].argmax())
            if best == 0 or (bool(ungated[row]) and self.features[s, best - 1, SAME_KEY] < 1):
                continue  # generate; or, ungated, no candidate of the very same key
            decision = Fill(k, s, self.plan.tokens[s][best - 1], float(probs[row, best]))
            (fills if decision.confidence >= threshold else holds).append(decision)
        return fills, holds


def _parent(source: CopySource) -> str:
    return next((str(p) for p in reversed(source.path[:-1]) if isinstance(p, str)), "")
