"""What every tab of one running studio shares: the store, the loaded world models and who may sign in.

`open_context` opens it (the database upgraded and seeded on first run). Models load once (at start, so the first
Run is fast) and stay loaded; the lock keeps two browser tabs from loading the same checkpoint twice."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.serving.backends import ArBaseline, Backend, load_backend
from wmstudio.problems import InvalidInput
from wmstudio.store import Store, open_store
from wmstudio.store.annotation import DEFAULT_OVERLAP
from wmstudio.store.seeding import seed_first_run

__all__ = ["DEFAULT_OVERLAP", "Store", "StudioContext", "open_context"]


@dataclass
class StudioContext:
    """The store and model settings of one studio process; `backend()` / `ar_baseline()` load lazily, once."""

    store: Store
    model: str = DEFAULT_MODEL
    ar_model: str | None = DEFAULT_AR_MODEL
    trust_remote_code: bool = False
    users: dict[str, str] = field(default_factory=dict)  # name -> password from --auth; empty = open studio
    overlap: int = DEFAULT_OVERLAP  # annotators who rate each step before the queue moves on to new steps
    # what runs a Simulate denoising (generate_stream's arguments): None for generate_stream itself; a Space on
    # ZeroGPU puts its @spaces.GPU function here
    generation_stream: Callable[..., Iterator[Any]] | None = None
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def backend(self) -> Backend | ArBaseline:
        """The world model the Simulate tab runs (the embedded MDLM unless `--model` said otherwise)."""
        return self._load("model", self.model)

    def ar_baseline(self) -> ArBaseline:
        """The autoregressive baseline shown beside the MDLM; InvalidInput when none is configured."""
        if not self.ar_model:
            raise InvalidInput("no autoregressive baseline is configured: start the studio with --ar-model PATH")
        baseline = self._load("ar", self.ar_model)
        if not isinstance(baseline, ArBaseline):
            raise InvalidInput(f"{self.ar_model} is not an autoregressive model: give a causal LM as --ar-model")
        return baseline

    def _load(self, slot: str, source: str) -> Any:
        with self._lock:
            if slot not in self._loaded:
                self._loaded[slot] = load_backend(source, trust_remote_code=self.trust_remote_code)
            return self._loaded[slot]


def open_context(db: str | Path | None = None, model: str | None = None, ar_model: str | None = DEFAULT_AR_MODEL,
                 trust_remote_code: bool = False, users: dict[str, str] | None = None,
                 overlap: int = DEFAULT_OVERLAP) -> StudioContext:
    """Open (and upgrade) the database, seed it on first run, and describe the models to serve."""
    store = open_store(db)
    seed_first_run(store)
    return StudioContext(store=store, model=model or DEFAULT_MODEL, ar_model=ar_model,
                         trust_remote_code=trust_remote_code, users=dict(users or {}), overlap=overlap)
