"""What the served world model admits, decided before any work: the API key, the Host header on a loopback bind
(a web page reaching 127.0.0.1 through DNS rebinding names its own host), the content type of a POST (a page's
form or text/plain post needs no permission from the browser), the body size, and JSON within the CLI's limits
(world/input_limits.py: depth, number length, NaN and Infinity, lone surrogates), the offending field named.

Refusals are 4xx answers in FastAPI's shape (`detail: [{"loc", "msg", "type"}]`), logged on the server. The `/v1`
routes call `admission` and `read_json`; `guarded` wraps a mounted ASGI app (the OpenEnv server) in the same rules,
its WebSocket messages included."""

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

from wmstudio.problems import InvalidInput, Problem, join_key
from wmstudio.world.input_limits import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_CHARS,
    InputRefused,
    loads_limited,
    printable,
    surrogate_message,
)

log = logging.getLogger("wmstudio.serve")
PUBLIC_PATHS = ("/health", "/v1/health")  # a load balancer's probe needs no key; they show no data
BODY_METHODS = ("POST", "PUT", "PATCH")
MAX_MESSAGE_CHARS = 1_000  # of one refusal's message: it may quote what was sent
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_PATH_PART = re.compile(r'\["(?:[^"\\]|\\.)*"\]|\[\d+\]|[^.\[\]]+')
_PLAIN = re.compile(r'[^"\[\]{},:]+')


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


class PayloadTooLarge(Exception):
    """A request body over the server's limit (answered 413 before it is parsed)."""


async def read_body(request: Request, limit: int) -> bytes:
    """The body, read no further than `limit` bytes (PayloadTooLarge past it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {int(declared):,} bytes is over this server's limit of {limit:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over this server's limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(raw: bytes | str) -> Any:
    """A body as JSON within the CLI's limits; InvalidInput naming the field (its JSON path) and the limit."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as err:
        raise InvalidInput(Problem("", f"the body is not UTF-8 text (bad byte at offset {err.start}): send JSON "
                                       "encoded as UTF-8")) from None
    if not text.strip():
        raise InvalidInput(Problem("", "the body is empty: send a JSON object"))
    try:
        return loads_limited(text)
    except InputRefused as err:
        raise InvalidInput(Problem(*_refused_where(text, str(err)))) from None
    except json.JSONDecodeError as err:
        if "is not JSON, write null or a number" in err.msg:  # NaN, Infinity
            path = _marked_path(text) or ""
            raise InvalidInput(Problem(path, err.msg)) from None
        raise InvalidInput(Problem("", f"the body is not JSON (line {err.lineno}, column {err.colno}: {err.msg}): "
                                       "send a JSON object")) from None


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


def _refused_where(text: str, message: str) -> tuple[str, str]:
    """(path, message) of what `loads_limited` refused in `text`: the field the nesting, the number or the lone
    surrogate is in."""
    if "levels deep" in message or "nested too deeply" in message:
        return _deep_path(text), message
    try:
        value = json.loads(text, parse_int=_Marked.integer, parse_float=_Marked.number, parse_constant=_Marked.word)
    except (ValueError, RecursionError):
        return "", message
    found = _first_refused(value)
    if found is None:
        return "", message
    path, item = found
    return path, (surrogate_message(item) if isinstance(item, str) else message)


def _marked_path(text: str) -> str | None:
    try:
        value = json.loads(text, parse_int=_Marked.integer, parse_float=_Marked.number, parse_constant=_Marked.word)
    except (ValueError, RecursionError):
        return None
    found = _first_refused(value)
    return found[0] if found is not None else None


class _Marked:
    """A number or word JSON input may not hold, left in place of its value so its path can be named."""

    @staticmethod
    def integer(digits: str) -> Any:
        return _Marked() if len(digits) > MAX_NUMBER_CHARS else int(digits)

    @staticmethod
    def number(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            return _Marked()
        value = float(literal)
        return _Marked() if value in (float("inf"), float("-inf")) else value

    @staticmethod
    def word(name: str) -> Any:
        return _Marked()


def _first_refused(value: Any) -> tuple[str, Any] | None:
    """(path, what) of the first value JSON input may not hold: a marked number or word, or text or a key with a
    lone surrogate (what: that text)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Marked):
            return path, item
        if isinstance(item, str) and _SURROGATE.search(item):
            return path, item
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if _SURROGATE.search(key):
                    return join_key(path, key), key
                stack.append((child, join_key(path, key)))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def _deep_path(text: str, shown: int = 6) -> str:
    """The path (its first `shown` parts) at which `text`'s nesting first goes past MAX_JSON_DEPTH, read without
    parsing (strings are skipped whole)."""
    parts: list[str | int] = []
    key: str | None = None
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == '"':
            match = _STRING.match(text, pos)
            if match is None:
                break
            key, pos = match.group(), match.end()
            continue
        if char in "[{":
            parts.append(0 if char == "[" else "?")
            if len(parts) > MAX_JSON_DEPTH:
                break
        elif char in "]}" and parts:
            parts.pop()
        elif char == "," and parts and isinstance(parts[-1], int):
            parts[-1] += 1
        elif char == ":" and parts and isinstance(parts[-1], str):
            parts[-1] = _key(key)
        match = _PLAIN.match(text, pos + 1)
        pos = match.end() if match else pos + 1
    path = ""
    for part in parts[:-1][:shown]:
        path = f"{path}[{part}]" if isinstance(part, int) else join_key(path, part)
    return path


def _key(token: str | None) -> str:
    try:
        return str(json.loads(token)) if token else "?"
    except ValueError:
        return "?"
