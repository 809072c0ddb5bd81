"""Give freed memory back to the operating system, so a studio that served a burst of requests shrinks again; and
keep the garbage collector's full passes short.

glibc's malloc keeps an arena per thread that allocated (up to 8 per core) and keeps freed blocks mapped; after 50
clients generated at once the server stayed 500 MB above its level before the load. Capping the arenas and trimming
the heap after each run brings it back (benchmarks/concurrent_clients_bench.py). Elsewhere than glibc, no-ops.
A full collection holds the interpreter lock while it walks every object it tracks; a server holds about 800,000
from start (the model, the libraries), and walking them held `/health` for up to 1.2 s
(benchmarks/hostile_worlds_bench.py): `settle_for_serving` takes them out of its sight."""

from __future__ import annotations

import ctypes
import gc
import sys

M_ARENA_MAX = -8  # mallopt parameter (malloc.h)
ARENAS = 2  # enough for the web server's thread and the generating ones, which are few (queue concurrency 4)


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


_LIBC = _glibc()


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (call before the server starts its threads); True when it took effect."""
    return bool(_LIBC is not None and _LIBC.mallopt(M_ARENA_MAX, arenas))


def release_memory() -> bool:
    """Return free heap pages to the operating system; True when some memory was released."""
    return bool(_LIBC is not None and _LIBC.malloc_trim(0))


def settle_for_serving() -> None:
    """Call once a server has loaded what it keeps for its life, before it serves: collect, then move every object
    alive now out of the collector's sight (gc.freeze), and hand the interpreter lock over every millisecond
    (not 5): a thread checking rules for seconds otherwise makes the event loop wait 5 ms at each of its many
    hand-overs, and `/health` waited half a second behind one."""
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(0.001)
