"""An unforeseen error in a route is a 500 answer that keeps the client's connection open.

Starlette answers an exception with a 500 and then raises it again for the server to log; uvicorn, seeing an
exception after the answer started, closes the connection, so a client's next request on the same keep-alive
connection fails as well (the Patronus plugin lost 3 turns of 7 that way). This middleware sits inside Starlette's
own error handler: it logs the traceback on the server and sends a complete JSON 500 itself, so the exception never
reaches uvicorn. A stream that fails after its first bytes cannot be answered again and is left to close."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

log = logging.getLogger("wmstudio.serve")
SERVER_ERROR = "the server failed on this request (its log has the details): please report it"


class KeepConnectionOnError:
    """ASGI middleware: an exception before the answer started becomes a logged JSON 500; one after it ended (a
    handler above already answered) is logged and dropped."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "ended": False}

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["ended"] = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            log.exception("%s %s -> 500", scope.get("method", ""), scope.get("path", ""))
            if state["ended"]:
                return
            if state["started"]:
                raise  # half a stream: nothing can be said on this connection any more
            body = json.dumps({"detail": [{"loc": [], "msg": SERVER_ERROR, "type": "server_error"}]}).encode()
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
