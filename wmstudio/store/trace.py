"""Storing a decode trace (`wmstudio.model.denoising.trace.DecodeTrace`) compactly: 9 bytes per committed position.

Each commit is packed as uint16 position, uint16 step, float32 confidence and a flags byte (1 = filled by the
copy head) behind a version byte, so a 64-token response costs about 600 bytes and a database of 100k steps
stays small. Version 1 blobs (8 bytes an entry, no flags) still read."""

from __future__ import annotations

import struct

from wmstudio.model.denoising.trace import Commit, DecodeTrace
from wmstudio.problems import InvalidInput, Problem

TRACE_FORMAT_VERSION = 2
_ENTRIES = {1: struct.Struct("<HHf"), 2: struct.Struct("<HHfB")}
_LIMIT = 0xFFFF


def pack_trace(trace: DecodeTrace) -> bytes:
    """The trace as bytes; InvalidInput names a commit whose position or step does not fit 16 bits."""
    entry = _ENTRIES[TRACE_FORMAT_VERSION]
    chunks = [bytes([TRACE_FORMAT_VERSION])]
    for i, commit in enumerate(trace):
        for name, value in (("position", commit.position), ("step", commit.step)):
            if not 0 <= value <= _LIMIT:
                raise InvalidInput(Problem(f"trace[{i}].{name}", f"must be a whole number from 0 to {_LIMIT}"))
        chunks.append(entry.pack(commit.position, commit.step, commit.confidence, int(commit.copied)))
    return b"".join(chunks)


def unpack_trace(blob: bytes | None) -> DecodeTrace:
    """The trace packed in `blob` (empty for none); InvalidInput for a damaged or newer blob."""
    if not blob:
        return DecodeTrace()
    entry = _ENTRIES.get(blob[0])
    if entry is None or (len(blob) - 1) % entry.size:
        raise InvalidInput(Problem("trace", f"unreadable decode trace (format {blob[0]}, {len(blob)} bytes): "
                                            "it was written by another wmstudio version or is damaged"))
    if blob[0] == 1:
        return DecodeTrace([Commit(p, s, c) for p, s, c in entry.iter_unpack(blob[1:])])
    return DecodeTrace([Commit(p, s, c, bool(flags & 1)) for p, s, c, flags in entry.iter_unpack(blob[1:])])
