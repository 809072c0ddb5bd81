"""What the served world model admits, decided before any work: the API key, the Host header on a loopback bind
(a web page reaching 127.0.0.1 through DNS rebinding names its own host), the content type of a POST (a page's
form or text/plain post needs no permission from the browser), the body size, and JSON within the CLI's limits
(serve/request_body.py), the offending field named.

Refusals are 4xx answers in FastAPI's shape (`detail: [{"loc", "msg", "type"}]`), logged on the server. The `/v1`
routes use `admission` and request_body's `read_body` / `parse_body`; `guarded` wraps a mounted ASGI app (the
OpenEnv server) in the same rules, its WebSocket messages included."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse

from wmstudio.problems import InvalidInput, Problem
from wmstudio.serve.request_body import PayloadTooLarge, parse_body, read_body
from wmstudio.world.input_limits import printable

log = logging.getLogger("wmstudio.serve")
PUBLIC_PATHS = ("/health", "/v1/health")  # a load balancer's probe needs no key; they show no data
BODY_METHODS = ("POST", "PUT", "PATCH")
MAX_MESSAGE_CHARS = 1_000  # of one refusal's message: it may quote what was sent
_PATH_PART = re.compile(r'\["(?:[^"\\]|\\.)*"\]|\[\d+\]|[^.\[\]]+')


@dataclass
class Refusal:
    """A request refused before any work: the status, where the problem is (`loc`) and what to do."""

    status: int
    loc: list[Any]
    message: str

    def detail(self) -> list[dict[str, Any]]:
        return [{"loc": self.loc, "msg": self.message, "type": "refused"}]


def admission(service: Any) -> Callable[[Request], None]:
    """A FastAPI dependency refusing (HTTPException) what `refusal` refuses, for routes added to any app."""
    def admit(request: Request) -> None:
        refused = refusal(request.method, request.url.path, request.headers, service, request.query_params)
        if refused is not None:
            log_refusal(request.method, request.url.path, refused.status, refused.detail())
            raise HTTPException(refused.status, refused.detail())
    return admit


def refusal(method: str, path: str, headers: Any, service: Any, query: Any = None) -> Refusal | None:
    """Why a request is refused before its body is read (Host, key, declared size, content type), or None."""
    host = headers.get("host")
    if host and service_is_local(service) and not loopback_name(host):
        return Refusal(403, ["header", "host"], f"Host {printable(host)[:100]!r} is not this server's: it listens "
                                                "on loopback, so only localhost, 127.0.0.1 or [::1] reach it (a web "
                                                "page using DNS rebinding names its own host)")
    if service.api_key and path not in PUBLIC_PATHS and not key_matches(headers, query, service.api_key):
        return Refusal(401, ["header", "authorization"], "missing or wrong API key: send Authorization: Bearer KEY "
                                                         "(or X-API-Key: KEY)")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > service.max_body_bytes:
        return Refusal(413, ["body"], f"request body of {int(declared):,} bytes is over this server's limit of "
                                      f"{service.max_body_bytes:,}")
    if method in BODY_METHODS and declared != "0" \
            and "json" not in headers.get("content-type", "").lower():
        return Refusal(415, ["header", "content-type"], "send the body as JSON with Content-Type: application/json "
                                                        "(form and text/plain posts are refused: any web page can "
                                                        "send those)")
    return None


def service_is_local(service: Any) -> bool:
    host = getattr(service, "host", None)
    return host is None or loopback_name(host)


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


def key_matches(headers: Any, query: Any, key: str) -> bool:
    """The API key from X-API-Key, Authorization: Bearer, or (WebSocket clients that send no headers) `api_key`."""
    given = headers.get("x-api-key") or ""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if not given and scheme.lower() == "bearer":
        given = token.strip()
    if not given and query is not None:
        given = query.get("api_key") or ""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), key.encode("utf-8", "surrogatepass"))


def problems_response(err: InvalidInput, method: str = "", route: str = "") -> JSONResponse:
    """422 in FastAPI's shape: one entry per problem, `loc` the field's path under the body; logged."""
    detail = [{"loc": ["body", *path_parts(p.path)], "msg": shorten(p.message), "type": "value_error"}
              for p in err.problems]
    log_refusal(method, route, 422, detail)
    return JSONResponse({"detail": detail}, status_code=422)


def refusal_response(status: int, loc: list[Any], message: str, method: str = "", route: str = "") -> JSONResponse:
    """A refusal answered and logged."""
    detail = Refusal(status, loc, shorten(message)).detail()
    log_refusal(method, route, status, detail)
    return JSONResponse({"detail": detail}, status_code=status)


def log_refusal(method: str, path: str, status: int, detail: list[dict[str, Any]]) -> None:
    """One line per refused request on the server's log: what was refused and why (a client may not show it)."""
    where = "; ".join(f"{'.'.join(map(str, item['loc'])) or 'body'}: {item['msg'][:200]}" for item in detail[:5])
    log.warning("%s %s -> %d: %s", method, path, status, where)


def log_to_stderr() -> None:
    """Send the refusal log to stderr with a time stamp, once (uvicorn configures only its own loggers)."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s wmstudio.serve %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def path_parts(path: str) -> list[str | int]:
    """`history[0].call.name` -> ["history", 0, "call", "name"], as FastAPI writes a `loc` (printable); a key
    written `["a.b"]` (problems.join_key) is one part."""
    parts = []
    for piece in _PATH_PART.findall(printable(path)):
        if piece.startswith('["'):
            parts.append(json.loads(piece[1:-1]))
        else:
            parts.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return parts


def shorten(message: str) -> str:
    message = printable(message)
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "…"


def guarded(app: Any, service: Any) -> Callable:
    """`app` (ASGI) behind the same admission, body limit and JSON limits as the `/v1` routes; WebSocket
    connections need the key too, and each message is held to the same limits (an error message answers one
    that is not)."""
    async def guard(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            await _guard_http(app, service, scope, receive, send)
        elif scope["type"] == "websocket":
            await _guard_websocket(app, service, scope, receive, send)
        else:
            await app(scope, receive, send)
    guard.wrapped = app  # type: ignore[attr-defined] - the app inside, for whoever walks the route table
    return guard


async def _guard_http(app: Any, service: Any, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
    request = Request(scope, receive)
    method, path = request.method, request.url.path
    refused = refusal(method, path, request.headers, service, request.query_params)
    if refused is not None:
        await refusal_response(refused.status, refused.loc, refused.message, method, path)(scope, receive, send)
        return
    if method not in BODY_METHODS:
        await app(scope, receive, send)
        return
    try:
        body = await read_body(request, service.max_body_bytes)
        if body.strip():
            parse_body(body)
    except PayloadTooLarge as err:
        await refusal_response(413, ["body"], str(err), method, path)(scope, receive, send)
        return
    except InvalidInput as err:
        await problems_response(err, method, path)(scope, receive, send)
        return
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    await app(scope, replay, send)


async def _guard_websocket(app: Any, service: Any, scope: dict[str, Any], receive: Callable,
                           send: Callable) -> None:
    request = Request({**scope, "type": "http", "method": "GET"})
    refused = refusal("GET", request.url.path, request.headers, service, request.query_params)
    if refused is not None:
        log_refusal("WEBSOCKET", request.url.path, refused.status, refused.detail())
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008, "reason": refused.message[:120]})
        return

    gone = False

    async def checked() -> dict[str, Any]:
        nonlocal gone
        while True:
            message = await receive()
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
                log_refusal("WEBSOCKET", request.url.path, 422, [{"loc": ["message"], "msg": why}])
                error = {"type": "error", "data": {"message": shorten(why), "code": "INVALID_JSON"}}
                await send({"type": "websocket.send", "text": json.dumps(error)})
                continue
            return message

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] != "websocket.close":
            await send(message)
        elif not gone:  # a client that has gone has nothing to close (OpenEnv's server closes anyway)
            try:
                await send(message)
            except Exception:  # noqa: BLE001 - it left while we closed (uvicorn's ClientDisconnected, OSError)
                log.info("WEBSOCKET %s: the client left before it was closed", scope.get("path", ""))

    await app(scope, checked, sending)
