"""The compact decode trace of a step: which canvas position was unmasked at which frame, and how confidently.

Packed as 8 bytes per position (uint16 position, uint16 frame, float32 confidence) behind a version byte, so a
64-token response costs about half a kilobyte and a database of 100k steps stays small."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from wmstudio.problems import InvalidInput, Problem

TRACE_FORMAT_VERSION = 1
_ENTRY = struct.Struct("<HHf")
_LIMIT = 0xFFFF


@dataclass(frozen=True)
class TraceEntry:
    """Canvas `position` was committed at denoising `frame` with `confidence` (float32 precision)."""

    position: int
    frame: int
    confidence: float


def pack_trace(entries: Iterable[TraceEntry | tuple[int, int, float] | list[float]]) -> bytes:
    """Pack entries (TraceEntry or `[position, frame, confidence]`); InvalidInput names a bad entry."""
    chunks = [bytes([TRACE_FORMAT_VERSION])]
    for i, entry in enumerate(entries):
        if isinstance(entry, TraceEntry):
            position, frame, confidence = entry.position, entry.frame, entry.confidence
        elif isinstance(entry, (tuple, list)) and len(entry) == 3:
            position, frame, confidence = entry
        else:
            raise InvalidInput(Problem(f"trace[{i}]", "expected [position, frame, confidence]"))
        for name, value in (("position", position), ("frame", frame)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _LIMIT:
                raise InvalidInput(Problem(f"trace[{i}].{name}", f"must be a whole number from 0 to {_LIMIT}"))
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence):
            raise InvalidInput(Problem(f"trace[{i}].confidence", "must be a finite number (a probability)"))
        chunks.append(_ENTRY.pack(position, frame, float(confidence)))
    return b"".join(chunks)


def unpack_trace(blob: bytes | None) -> list[TraceEntry]:
    """The entries of a packed trace (an empty list for none); InvalidInput for a damaged or newer blob."""
    if not blob:
        return []
    if blob[0] != TRACE_FORMAT_VERSION or (len(blob) - 1) % _ENTRY.size:
        raise InvalidInput(Problem("trace", f"unreadable decode trace (format {blob[0]}, {len(blob)} bytes): "
                                            "it was written by another wmstudio version or is damaged"))
    return [TraceEntry(p, f, c) for p, f, c in _ENTRY.iter_unpack(blob[1:])]
