"""How long a client may take to send a request: its head (request line and headers) and its body.

uvicorn waits for a request's head without limit, so a client that opens connections and sends headers a byte at
a time (or not at all) holds them forever. `HeadDeadline` is uvicorn's h11 protocol with a deadline for each head:
from the connection's opening, or from the first byte of a later request on it, the head must be complete within
HEAD_SECONDS, else the connection is closed. The body's deadline (BODY_SECONDS from its first read) is kept by
serve/request_body.py's `read_body`, which answers 408."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("wmstudio.serve")
HEAD_SECONDS = 10.0
BODY_SECONDS = 60.0  # 8 MB, the largest body admitted, at about 1 Mbit/s


class HeadDeadline(H11Protocol):
    """h11 with a deadline for every request's head; the rest is uvicorn's."""

    head_seconds = HEAD_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # bytes of a head that is not complete yet
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_seconds, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.warning("%s: no complete request head within %.0f s: connection closed",
                        "%s:%d" % self.client if self.client else "a client", self.head_seconds)
            self.transport.close()


@contextmanager
def head_deadlines_for_gradio() -> Iterator[None]:
    """While Gradio's `launch` runs inside, the uvicorn Config it builds for itself (it takes no protocol of ours)
    gets HeadDeadline too, so the studio closes stalled heads as serve-wm does. Only the Config made meanwhile is
    affected; uvicorn's own is put back after."""
    original = uvicorn.Config

    class DeadlineConfig(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            kwargs.setdefault("http", HeadDeadline)
            super().__init__(*args, **kwargs)

    uvicorn.Config = DeadlineConfig
    try:
        yield
    finally:
        uvicorn.Config = original
