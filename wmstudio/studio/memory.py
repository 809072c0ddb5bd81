"""Give freed memory back to the operating system, so a studio that served a burst of requests shrinks again.

glibc's malloc keeps an arena per thread that allocated (up to 8 per core) and keeps freed blocks mapped; after 50
clients generated at once the server stayed 500 MB above its level before the load. Capping the arenas and trimming
the heap after each run brings it back (benchmarks/concurrent_clients_bench.py). Elsewhere than glibc, no-ops."""

from __future__ import annotations

import ctypes
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
