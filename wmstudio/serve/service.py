"""What every HTTP endpoint shares: the loaded world model (behind the request batcher), the saved worlds, the
default world for chat-format requests, the address it listens on, and the server's limits."""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.model.serving.batching import ForwardBatcher
from wmstudio.serve.deadlines import BODY_SECONDS
from wmstudio.serve.socket_guard import SOCKET_IDLE_SECONDS, SOCKETS_PER_CLIENT
from wmstudio.studio.chat_step import DEFAULT_FREE_TOKENS
from wmstudio.studio.worlds import Store
from wmstudio.world.spec import WorldSpec

DEFAULT_MAX_BODY_BYTES = 8_000_000  # a world object with a large initial state fits; anything bigger is refused


@dataclass
class WorldModelService:
    """One served world model. `batcher` None answers every request on its own (the benchmark's "without")."""

    backend: Backend | ArBaseline
    store: Store | None = None
    world: WorldSpec | None = None
    batcher: ForwardBatcher | None = None
    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    free_tokens: int = DEFAULT_FREE_TOKENS
    host: str | None = None  # the address served on; on loopback (or None) only loopback Host headers are admitted
    body_seconds: float = BODY_SECONDS  # a request body must arrive within this long (408 after)
    sockets_per_client: int = SOCKETS_PER_CLIENT  # open OpenEnv WebSocket sessions one client address may hold
    socket_idle_seconds: float = SOCKET_IDLE_SECONDS  # a WebSocket session silent this long is closed

    @classmethod
    def create(cls, backend: Backend | ArBaseline, batching: bool | None = None, **settings) -> WorldModelService:
        """A service over `backend`; `batching` None batches on an accelerator only. On this 2-core CPU a forward
        is about a quarter of a request and its throughput does not grow with the batch, so batching cost
        throughput there (benchmarks/serve_load_bench.py)."""
        if batching is None:
            batching = isinstance(backend, Backend) and backend.device.type != "cpu"
        batcher = ForwardBatcher(backend) if batching and isinstance(backend, Backend) else None
        return cls(backend, batcher=batcher, **settings)

    @contextmanager
    def session(self) -> Iterator[Backend | ArBaseline]:
        """The backend one request generates with (its forwards joined to the others' when batching)."""
        with self.batcher.session() if self.batcher is not None else nullcontext(self.backend) as backend:
            yield backend

    @property
    def model_name(self) -> str:
        """The model's name as clients see it: a local folder by its last part (no filesystem path is shown)."""
        name = self.backend.name
        return Path(name).name if os.path.isabs(name) or os.sep in name and Path(name).exists() else name
