"""Storing a decode trace (`wmstudio.model.trace.DecodeTrace`) compactly: 8 bytes per committed position.

Each commit is packed as uint16 position, uint16 step, float32 confidence behind a version byte, so a 64-token
response costs about half a kilobyte and a database of 100k steps stays small."""

from __future__ import annotations

import struct

from wmstudio.model.trace import Commit, DecodeTrace
from wmstudio.problems import InvalidInput, Problem

TRACE_FORMAT_VERSION = 1
_ENTRY = struct.Struct("<HHf")
_LIMIT = 0xFFFF


def pack_trace(trace: DecodeTrace) -> bytes:
    """The trace as bytes; InvalidInput names a commit whose position or step does not fit 16 bits."""
    chunks = [bytes([TRACE_FORMAT_VERSION])]
    for i, commit in enumerate(trace):
        for name, value in (("position", commit.position), ("step", commit.step)):
            if not 0 <= value <= _LIMIT:
                raise InvalidInput(Problem(f"trace[{i}].{name}", f"must be a whole number from 0 to {_LIMIT}"))
        chunks.append(_ENTRY.pack(commit.position, commit.step, commit.confidence))
    return b"".join(chunks)


def unpack_trace(blob: bytes | None) -> DecodeTrace:
    """The trace packed in `blob` (empty for none); InvalidInput for a damaged or newer blob."""
    if not blob:
        return DecodeTrace()
    if blob[0] != TRACE_FORMAT_VERSION or (len(blob) - 1) % _ENTRY.size:
        raise InvalidInput(Problem("trace", f"unreadable decode trace (format {blob[0]}, {len(blob)} bytes): "
                                            "it was written by another wmstudio version or is damaged"))
    return DecodeTrace([Commit(p, s, c) for p, s, c in _ENTRY.iter_unpack(blob[1:])])
