"""What a web page in the user's browser may reach: a server on loopback answers only its own site.

Two browser tricks reach a server on 127.0.0.1 from any web page: DNS rebinding (the page's own host name resolves
to 127.0.0.1, so the request's Host header names that host) and a cross-site request (a page on another origin, or
another local port, sends a form post, a `text/plain` fetch or opens a WebSocket, none of which needs the server's
permission, and the browser names that page in the `Origin` header). So every HTTP request and WebSocket handshake
of the studio and of `serve-wm` is checked here before any route runs:
- on a loopback bind, the Host header must name loopback (localhost, 127.x.x.x, [::1]);
- an `Origin` header, when sent, must be this server's own (same host and port as the Host header) or one the user
  allowed (`WMSTUDIO_ALLOWED_ORIGINS`, comma-separated; on a Space its own address). Clients that are not browsers
  (curl, gradio_client, trainers) send no Origin and are not affected.
A refusal is a 403 naming the header (a WebSocket is closed before it opens)."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from typing import Any, Callable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware import Middleware

from wmstudio.network import is_loopback
from wmstudio.serve.server_errors import KeepConnectionOnError
from wmstudio.world.input_limits import printable

log = logging.getLogger("wmstudio.serve")
ALLOWED_ORIGINS_ENV = "WMSTUDIO_ALLOWED_ORIGINS"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def loopback_name(host: str) -> bool:
    """Whether a Host header (or bind address) names this machine's loopback: localhost, 127.x.x.x or ::1."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:name.find("]")] if "]" in name else name[1:]
    elif name.count(":") == 1:
        name = name.split(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_origins() -> set[str]:
    """The origins the user allowed besides the server's own: `WMSTUDIO_ALLOWED_ORIGINS` and a Space's address."""
    named = {item.strip().rstrip("/").lower() for item in os.environ.get(ALLOWED_ORIGINS_ENV, "").split(",")}
    if os.environ.get("SPACE_HOST"):
        named.add(f"https://{os.environ['SPACE_HOST'].strip().lower()}")
    return {item for item in named if item}


def site_refusal(headers: Any, bound_to: str | None) -> tuple[str, str] | None:
    """(header, why) when a request with `headers` comes from a site other than this server's, else None.
    `bound_to` is the address the server listens on (None: loopback)."""
    host = headers.get("host") or ""
    if host and (bound_to is None or is_loopback(bound_to)) and not loopback_name(host):
        return "host", (f"Host {printable(host)[:100]!r} is not this server's: it listens on loopback, so only "
                        "localhost, 127.0.0.1 or [::1] reach it (a web page using DNS rebinding names its own host)")
    origin = headers.get("origin")
    if origin is not None and not _same_site(origin, host) and origin.strip().rstrip("/").lower() \
            not in allowed_origins():
        return "origin", (f"Origin {printable(origin)[:100]!r} is another site: a web page may not use this server "
                          f"(allow an origin you trust with {ALLOWED_ORIGINS_ENV}=https://host:port)")
    return None


def _same_site(origin: str, host: str) -> bool:
    """Whether `origin` (scheme://host[:port]) names the same host and port as the Host header."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        asked = urlsplit(f"//{host}")
        asked_port = asked.port
    except ValueError:
        return False
    if not parts.hostname or not asked.hostname or parts.hostname != asked.hostname.lower():
        return False
    return asked_port is None or asked_port == port  # behind a proxy the Host header may leave the port out


class SiteGuard:
    """ASGI middleware refusing what `site_refusal` refuses, for HTTP requests and WebSocket handshakes alike."""

    def __init__(self, app: Callable, bound_to: str | None = None) -> None:
        self.app = app
        self.bound_to = bound_to

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = site_refusal(Headers(scope=scope), self.bound_to)
        if refused is None:
            await self.app(scope, receive, send)
            return
        header, why = refused
        path = scope.get("path", "")
        log.warning("%s %s -> 403: header.%s: %s", scope.get("method", "WEBSOCKET"), path, header, why[:200])
        if scope["type"] == "websocket":
            await receive()  # websocket.connect; closing before accepting answers the handshake with 403
            await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
            return
        body = json.dumps({"detail": [{"loc": ["header", header], "msg": why, "type": "refused"}]}).encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def server_middleware(bound_to: str | None) -> list[Middleware]:
    """What every server of ours (the studio, `serve-wm`) runs behind, outermost first: the site guard, then a 500
    that keeps the connection (serve/server_errors.py)."""
    return [Middleware(SiteGuard, bound_to=bound_to), Middleware(KeepConnectionOnError)]
