"""The decode trace of one sample: which canvas position was committed at which denoising step, how confidently.

One type for the whole path: the sampler's frames build it, the studio draws it (canvas shading, heatmap), the
store packs it, datasets export it. Positions committed together by a copy or a settled span share a step."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, whole_in


@dataclass(frozen=True)
class Commit:
    """Canvas `position` was committed at denoising `step` (0-based) with `confidence` in [0, 1]; `copied` when
    the copy head filled it (its whole value copied from the prompt)."""

    position: int
    step: int
    confidence: float
    copied: bool = False


@dataclass
class DecodeTrace:
    """A sample's commits in the order they happened; `at(position)` finds when a position was committed."""

    commits: list[Commit] = field(default_factory=list)

    def __iter__(self) -> Iterator[Commit]:
        return iter(self.commits)

    def __len__(self) -> int:
        return len(self.commits)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DecodeTrace) and self.commits == other.commits

    def add(self, step: int, positions: Sequence[int], confidences: Sequence[float],
            copied: Sequence[int] = ()) -> None:
        """Record the positions committed at `step` (non-finite confidences count as 0); those in `copied` were
        filled by the copy head."""
        copied = set(copied)
        for position, confidence in zip(positions, confidences, strict=True):
            value = float(confidence)
            self.commits.append(Commit(int(position), int(step), value if math.isfinite(value) else 0.0,
                                       int(position) in copied))

    def at(self, position: int) -> Commit | None:
        """The commit of `position` (the last one, should a position be committed twice), or None."""
        return self.by_position().get(position)

    def by_position(self) -> dict[int, Commit]:
        """position -> its commit, for drawing a canvas."""
        return {commit.position: commit for commit in self.commits}

    @property
    def steps(self) -> int:
        """How many steps the trace spans (the last step + 1; 0 for an empty trace)."""
        return max((c.step for c in self.commits), default=-1) + 1

    def to_json(self) -> list[list[float]]:
        """`[[position, step, confidence, copied], ...]`: how exports and the HTTP API write a trace."""
        return [[c.position, c.step, round(c.confidence, 6), int(c.copied)] for c in self.commits]

    @classmethod
    def from_json(cls, data: Any, source: str = "trace") -> DecodeTrace:
        """Read `[[position, step, confidence(, copied)], ...]`; InvalidInput names the first bad entry."""
        if not isinstance(data, (list, tuple)):
            raise InvalidInput(Problem(source, "must be a list of [position, step, confidence] entries"))
        trace = cls()
        for i, entry in enumerate(data):
            if not isinstance(entry, (list, tuple)) or len(entry) not in (3, 4):
                raise InvalidInput(Problem(f"{source}[{i}]", "expected [position, step, confidence, copied]"))
            position, step, confidence = entry[:3]
            copied = bool(entry[3]) if len(entry) == 4 else False
            for name, value in (("position", position), ("step", step)):
                if not whole_in(value, 0):
                    raise InvalidInput(Problem(f"{source}[{i}].{name}", "must be a whole number from 0"))
            if not number_in(confidence):
                raise InvalidInput(Problem(f"{source}[{i}].confidence", "must be a finite number (a probability)"))
            trace.commits.append(Commit(position, step, float(confidence), copied))
        return trace

    @classmethod
    def of_frames(cls, frames: Iterable[Any], sample: int = 0) -> DecodeTrace:
        """The trace of `sample` in the sampler's frames (each with `unmasked` and `confidences` per sample)."""
        trace = cls()
        for index, frame in enumerate(frames):
            if sample < len(frame.unmasked):
                copied = frame.copied[sample] if sample < len(getattr(frame, "copied", [])) else ()
                trace.add(index, frame.unmasked[sample], frame.confidences[sample], copied)
        return trace
