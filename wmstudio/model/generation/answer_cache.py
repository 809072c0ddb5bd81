"""World-model answers remembered: a greedy answer is a function of what decides it, so it is computed once.

A GRPO step plays the same scenario many times (a group), and most of its episodes open with the same call on the
same empty history: on the demo curriculum 87% of a step's world-model calls repeated an earlier one, each costing
about half a CPU-second. The key is everything a greedy generation reads: the model's name, the whole world (its
five parts), the call, the anchors, the history as the agent saw it and the sampler settings. Only greedy settings
are cached (temperature 0: the same inputs give the same answer); a sampled answer is drawn afresh every time. The
cache keeps the newest `size` answers (least recently used out) and is safe to share between the threads a batched
step answers from."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

CACHE_SIZE = 4096


@dataclass(frozen=True)
class CachedAnswer:
    """What an episode keeps of a world-model answer: the response text and the prompt the model read."""

    response: str
    prompt: str


class AnswerCache:
    """Greedy world-model answers by their inputs; `hits` and `misses` count the lookups of cacheable calls."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self.hits = self.misses = 0
        self._answers: OrderedDict[str, CachedAnswer] = OrderedDict()
        self._worlds: dict[int, tuple[WorldSpec, str]] = {}  # id -> (the world, kept alive; its digest)
        self._lock = threading.Lock()

    def key(self, model: str, world: WorldSpec, call: Call, anchors: Sequence[Anchor],
            history: Sequence[HistoryStep], settings: SamplerSettings) -> str | None:
        """The digest of everything that decides a greedy answer; None when `settings` sample (nothing cached)."""
        if settings.temperature != 0:
            return None
        parts: list[Any] = [model, self._world_digest(world), call.to_json(), [a.to_json() for a in anchors],
                            [step.to_json() for step in history], settings.to_json()]
        text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str | None) -> CachedAnswer | None:
        """The answer remembered under `key` (counted as a hit or a miss), or None."""
        if key is None:
            return None
        with self._lock:
            answer = self._answers.get(key)
            if answer is None:
                self.misses += 1
                return None
            self._answers.move_to_end(key)
            self.hits += 1
            return answer

    def put(self, key: str | None, answer: CachedAnswer) -> None:
        """Remember `answer` under `key` (nothing for None), the least recently used one out past `size`."""
        if key is None:
            return
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)

    def summary(self) -> str:
        """`hits of lookups (share)` in words, for a run's log."""
        lookups = self.hits + self.misses
        share = f" ({self.hits / lookups:.0%})" if lookups else ""
        return f"{self.hits} of {lookups} greedy world-model answers from the cache{share}"

    def _world_digest(self, world: WorldSpec) -> str:
        with self._lock:
            known = self._worlds.get(id(world))
            if known is not None and known[0] is world:
                return known[1]
        digest = hashlib.sha256(world.dumps().encode()).hexdigest()
        with self._lock:
            self._worlds[id(world)] = (world, digest)
        return digest
