"""A WebSocket session of the served world model (OpenEnv's `/ws`): admitted as an HTTP request is, at most
SOCKETS_PER_CLIENT open at once from one address, closed when idle for SOCKET_IDLE_SECONDS, and each message held
to the body's limits (an error message answers one that is not, and the session goes on).

OpenEnv's server holds 16 sessions in all; without a cap per client and an idle timeout, 16 idle connections from
one client locked every other client out until they were closed."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any, Callable

from fastapi import Request

from wmstudio.problems import InvalidInput, Problem
from wmstudio.serve.guard import log_refusal, refusal, shorten
from wmstudio.serve.request_body import parse_body

log = logging.getLogger("wmstudio.serve")
SOCKETS_PER_CLIENT = 8  # of OpenEnv's 16 sessions: one client can never hold them all
SOCKET_IDLE_SECONDS = 300.0  # a session that sends nothing for this long is closed (its episode ends)
GOING_AWAY, TRY_AGAIN_LATER, POLICY = 1001, 1013, 1008


def socket_guard(app: Any, service: Any) -> Callable:
    """An ASGI wrapper for `app`'s WebSocket connections (other scopes pass through): admission, the cap per
    client, the idle timeout and the message limits, with the count of open sockets per client kept here."""
    open_by_client: Counter[str] = Counter()

    async def guard(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "websocket":
            await app(scope, receive, send)
            return
        client = (scope.get("client") or ("?", 0))[0]
        request = Request({**scope, "type": "http", "method": "GET"})
        refused = refusal("GET", request.url.path, request.headers, service, request.query_params)
        reason, code = (refused.message, POLICY) if refused is not None else (None, POLICY)
        per_client = getattr(service, "sockets_per_client", SOCKETS_PER_CLIENT)
        if reason is None and open_by_client[client] >= per_client:
            reason, code = (f"{client} already holds {per_client} open sessions, this server's limit for one "
                            "client: close one (or wait for an idle one to time out)"), TRY_AGAIN_LATER
        if reason is not None:
            log_refusal("WEBSOCKET", request.url.path, 403 if code == POLICY else 429,
                        [{"loc": ["header"], "msg": reason}])
            await receive()  # websocket.connect; closing before accepting answers the handshake with 403
            await send({"type": "websocket.close", "code": code, "reason": reason[:120]})
            return
        open_by_client[client] += 1
        try:
            await _session(app, service, scope, receive, send)
        finally:
            open_by_client[client] -= 1
            if open_by_client[client] <= 0:
                del open_by_client[client]

    return guard


async def _session(app: Any, service: Any, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
    """Run `app` on one admitted connection, its messages checked and its idle time bounded."""
    path = scope.get("path", "")
    idle = getattr(service, "socket_idle_seconds", SOCKET_IDLE_SECONDS)
    gone = False

    async def checked() -> dict[str, Any]:
        nonlocal gone
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=idle)
            except asyncio.TimeoutError:
                log.info("WEBSOCKET %s: idle for %.0f s: closed", path, idle)
                gone = True
                try:
                    await send({"type": "websocket.close", "code": GOING_AWAY,
                                "reason": f"idle for {idle:.0f} s: connect again to go on"})
                except Exception:  # noqa: BLE001 - it left meanwhile
                    pass
                return {"type": "websocket.disconnect", "code": GOING_AWAY}
            if message["type"] == "websocket.disconnect":
                gone = True
            if message["type"] != "websocket.receive":
                return message
            data = message.get("text") if message.get("text") is not None else message.get("bytes") or b""
            try:
                if len(data) > service.max_body_bytes:
                    raise InvalidInput(Problem("", f"a message of {len(data):,} characters is over this server's "
                                                   f"limit of {service.max_body_bytes:,}"))
                parse_body(data)
            except InvalidInput as err:
                why = "; ".join(str(p) for p in err.problems)
                log_refusal("WEBSOCKET", path, 422, [{"loc": ["message"], "msg": why}])
                error = {"type": "error", "data": {"message": shorten(why), "code": "INVALID_JSON"}}
                await send({"type": "websocket.send", "text": json.dumps(error)})
                continue
            return message

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] != "websocket.close":
            if not gone:
                await send(message)
        elif not gone:  # a client that has gone has nothing to close (OpenEnv's server closes anyway)
            try:
                await send(message)
            except Exception:  # noqa: BLE001 - it left while we closed (uvicorn's ClientDisconnected, OSError)
                log.info("WEBSOCKET %s: the client left before it was closed", path)

    await app(scope, checked, sending)
