"""Training batches as an endless stream over epochs, built in the training loop or ahead of it by worker processes.

On a GPU the small world models step faster than one Python process noises canvases, so worker processes build the
batches ahead (each with its own noise generator); without workers the loop builds them, so one seed gives one run."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from wmstudio.train.world_model.batches import Batch, SplitBatch, make_batch, plan_batches
from wmstudio.train.world_model.examples import TrainingExample

PREFETCH_PER_WORKER = 4  # batches each worker keeps ready


class BatchStream(IterableDataset):
    """Every epoch's batches (`plan_batches` with seed + epoch) in order, as (epoch, batch), forever.

    In a worker process it yields only its share (every n-th batch, so a DataLoader's round-robin keeps the
    order) and draws noise from its own generator; in the loop itself one generator serves every batch (`noise`,
    whose state a checkpoint keeps). A resumed run starts at batch `start` = (epoch, index within it), with the
    noise generator's saved state when the loop built its batches."""

    def __init__(self, examples: list[TrainingExample], arch: str, tokenizer_ids: dict[str, int], batch_tokens: int,
                 seed: int, split: bool, outcome_first: float, start: tuple[int, int] = (0, 0),
                 noise_state: torch.Tensor | None = None) -> None:
        self.examples, self.arch, self.tokenizer_ids = examples, arch, tokenizer_ids
        self.batch_tokens, self.seed, self.split, self.outcome_first = batch_tokens, seed, split, outcome_first
        self.start, self.noise_state = start, noise_state
        self.noise: torch.Generator | None = None

    def __iter__(self) -> Iterator[tuple[int, Batch | SplitBatch]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        noise_seed = self.seed if info is None else self.seed * 1009 + worker + 1
        rng = torch.Generator().manual_seed(noise_seed)
        if info is None:
            if self.noise_state is not None:
                rng.set_state(self.noise_state)
            self.noise = rng
        index, (epoch, skip) = 0, self.start
        while True:
            for position, indices in enumerate(plan_batches(self.examples, self.arch, self.batch_tokens,
                                                            self.seed + epoch)):
                if position < skip:
                    continue
                if index % workers == worker:
                    batch = make_batch([self.examples[i] for i in indices], self.arch, self.tokenizer_ids, rng,
                                       split=self.split, outcome_first=self.outcome_first)
                    yield epoch, batch
                index += 1
            epoch, skip = epoch + 1, 0


def stream_batches(stream: BatchStream, workers: int) -> Iterator[tuple[int, Batch | SplitBatch]]:
    """The stream's batches, built by `workers` processes ahead of the loop (0: built on demand in this process)."""
    if workers <= 0:
        return iter(stream)
    loader = DataLoader(stream, batch_size=None, num_workers=workers, prefetch_factor=PREFETCH_PER_WORKER)
    return iter(loader)
