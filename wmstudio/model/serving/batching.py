"""Request batching: generations that run at the same time share one forward pass per denoising step.

Each request keeps its own sampler loop (its canvas, constraints, copy plan); only the model call is shared. A
worker thread gathers the canvases waiting at that moment (every active request's, or what arrived within a short
window), pads their prompts and canvases into one batch with a per-row mask, runs one forward and hands each
request its rows. Exact for prefix-causal models: a row attends only to its own prompt and canvas."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from wmstudio.model.serving.backends import Backend, CanvasCache, PromptCache

DEFAULT_WINDOW_MS = 5.0  # how long a forward waits for the other active requests' canvases
DEFAULT_MAX_ROWS = 64  # canvases (requests x samples) in one forward at most


@dataclass
class _Job:
    """One request's model call: its canvases, its encoded prompt and, once run, the outputs or the error."""

    canvas_ids: torch.Tensor  # (K, C)
    cache: PromptCache
    done: threading.Event = field(default_factory=threading.Event)
    outputs: tuple[torch.Tensor, torch.Tensor | None] | None = None
    error: BaseException | None = None


@dataclass
class BatchStats:
    """What the batcher did: forwards run, canvases in them, and the largest batch (to report in benchmarks)."""

    forwards: int = 0
    rows: int = 0
    largest: int = 0

    @property
    def mean_rows(self) -> float:
        return self.rows / self.forwards if self.forwards else 0.0


class ForwardBatcher:
    """Shares forwards between the generations of one backend; `session()` gives each request its backend.

    Backends without an exact prompt cache (bidirectional masked LMs) are not batched: their sessions get the
    backend itself."""

    def __init__(self, backend: Backend, window_ms: float = DEFAULT_WINDOW_MS, max_rows: int = DEFAULT_MAX_ROWS):
        self.backend = backend
        self.window = window_ms / 1000.0
        self.max_rows = max_rows
        self.stats = BatchStats()
        self._waiting: list[_Job] = []
        self._active = 0
        self._changed = threading.Condition()
        self._worker: threading.Thread | None = None

    @property
    def batches(self) -> bool:
        return bool(getattr(self.backend, "exact_cache", False))

    @contextmanager
    def session(self) -> Iterator[Backend]:
        """The backend one request generates with; while it is open, forwards wait for this request's canvases."""
        if not self.batches:
            yield self.backend
            return
        with self._changed:
            self._active += 1
        try:
            yield SharedForwardBackend(self)
        finally:
            with self._changed:
                self._active -= 1
                self._changed.notify_all()

    def outputs(self, canvas_ids: torch.Tensor, cache: PromptCache) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits, hidden or None) for one request's canvases, computed in the next shared forward."""
        job = _Job(canvas_ids, cache)
        with self._changed:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="wmstudio-forward-batcher", daemon=True)
                self._worker.start()
            self._waiting.append(job)
            self._changed.notify_all()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.outputs

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._waiting:
                    self._changed.wait()
                deadline = time.monotonic() + self.window
                while len(self._waiting) < self._active and _rows(self._waiting) < self.max_rows:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                jobs, rows = [], 0
                while self._waiting and (not jobs or rows + len(self._waiting[0].canvas_ids) <= self.max_rows):
                    jobs.append(self._waiting.pop(0))
                    rows += len(jobs[-1].canvas_ids)
            try:
                for job, outputs in zip(jobs, shared_forward(self.backend, jobs)):
                    job.outputs = outputs
            except BaseException as err:  # noqa: BLE001 - every waiting request must hear of it, not hang
                for job in jobs:
                    job.error = err
            self.stats.forwards += 1
            self.stats.rows += rows
            self.stats.largest = max(self.stats.largest, rows)
            for job in jobs:
                job.done.set()


class SharedForwardBackend:
    """A request's view of the batched backend: everything is the backend's, but canvas forwards are shared."""

    def __init__(self, batcher: ForwardBatcher):
        self._batcher = batcher

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batcher.backend, name)

    def canvas_outputs(self, canvas_ids: torch.Tensor, cache: PromptCache) -> tuple[torch.Tensor, torch.Tensor | None]:
        if cache.layers is None:
            return self._batcher.backend.canvas_outputs(canvas_ids, cache)
        return self._batcher.outputs(self._batcher.backend._ids(canvas_ids), cache)

    def logits(self, canvas_ids: torch.Tensor, cache: PromptCache) -> torch.Tensor:
        return self.canvas_outputs(canvas_ids, cache)[0]


@torch.inference_mode()
def shared_forward(backend: Backend, jobs: list[_Job]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """One forward over several requests' canvases after their own cached prompts.

    Prompts are right-padded to the longest (P) and canvases to the longest (C); row r's canvas sits at positions
    P_r.. (as if alone) and attends to keys [0, P_r) and [P, P + C_r) only, so each request gets what it would alone."""
    if len(jobs) == 1:  # nothing to share: the backend's own cached path
        return [backend.canvas_outputs(jobs[0].canvas_ids, jobs[0].cache)]
    device = backend.device
    prompt_len = max(job.cache.length for job in jobs)
    canvas_len = max(job.canvas_ids.shape[1] for job in jobs)
    rows = sum(job.canvas_ids.shape[0] for job in jobs)
    ids = torch.full((rows, canvas_len), backend.mask_id, dtype=torch.long, device=device)
    positions = torch.zeros((rows, canvas_len), dtype=torch.long, device=device)
    mask = torch.zeros((rows, 1, canvas_len, prompt_len + canvas_len), dtype=torch.bool, device=device)
    layers = []
    for key, value in jobs[0].cache.layers:
        layers.append((key.new_zeros((rows, key.shape[1], prompt_len, key.shape[3])),
                       value.new_zeros((rows, value.shape[1], prompt_len, value.shape[3]))))
    spans, row = [], 0
    for job in jobs:
        count, length, prompt = job.canvas_ids.shape[0], job.canvas_ids.shape[1], job.cache.length
        ids[row:row + count, :length] = job.canvas_ids
        positions[row:row + count] = torch.arange(prompt, prompt + canvas_len, device=device)
        mask[row:row + count, :, :, :prompt] = True
        mask[row:row + count, :, :, prompt_len:prompt_len + length] = True
        for (key, value), (keys, values) in zip(job.cache.layers, layers):
            keys[row:row + count, :, :prompt] = key
            values[row:row + count, :, :prompt] = value
        spans.append((row, count, length))
        row += count
    buffer = CanvasCache(layers, rows, canvas_len)
    hidden = backend.model.base_model(input_ids=ids, cache=buffer, position_ids=positions,
                                      attention_mask=mask).last_hidden_state
    logits = backend.model.get_output_embeddings()(hidden)
    keep_hidden = backend.copy_head is not None
    return [(logits[start:start + count, :length], hidden[start:start + count, :length] if keep_hidden else None)
            for start, count, length in spans]


def _rows(jobs: list[_Job]) -> int:
    return sum(len(job.canvas_ids) for job in jobs)
