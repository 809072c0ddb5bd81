"""What the served world model admits, decided before any work: the site a browser request comes from (Host and
Origin, serve/site_guard.py), the API key, the content type of a POST (a page's form or text/plain post needs no
permission from the browser: only `application/json` is read), the body size, and JSON within the CLI's limits
(serve/request_body.py), the offending field named.

Refusals are 4xx answers in FastAPI's shape (`detail: [{"loc", "msg", "type"}]`), logged on the server. The `/v1`
routes use `admission` and request_body's `read_body` / `parse_body`; `guard_http` holds a mounted ASGI app (the
OpenEnv server) to the same rules (its WebSocket sessions: serve/socket_guard.py)."""

from __future__ import annotations

import hmac
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse

from wmstudio.problems import InvalidInput
from wmstudio.serve.deadlines import BODY_SECONDS
from wmstudio.serve.request_body import BodyTooSlow, PayloadTooLarge, parse_body, read_body
from wmstudio.serve.site_guard import site_refusal
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
    """Why a request is refused before its body is read (Host and Origin, key, declared size, content type), or
    None."""
    foreign = site_refusal(headers, getattr(service, "host", None))
    if foreign is not None:
        return Refusal(403, ["header", foreign[0]], foreign[1])
    if service.api_key and path not in PUBLIC_PATHS and not key_matches(headers, query, service.api_key):
        return Refusal(401, ["header", "authorization"], "missing or wrong API key: send Authorization: Bearer KEY "
                                                         "(or X-API-Key: KEY)")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > service.max_body_bytes:
        return Refusal(413, ["body"], f"request body of {int(declared):,} bytes is over this server's limit of "
                                      f"{service.max_body_bytes:,}")
    if method in BODY_METHODS and declared != "0" and not json_media_type(headers.get("content-type", "")):
        return Refusal(415, ["header", "content-type"], "send the body as JSON with Content-Type: application/json "
                                                        "(form and text/plain posts are refused: any web page can "
                                                        "send those)")
    return None


def json_media_type(content_type: str) -> bool:
    """Whether a Content-Type header names JSON itself (`application/json`, `application/x+json`), whatever its
    parameters: `text/plain;charset=json`, which a page may send without asking, is not JSON."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


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


async def guard_http(app: Any, service: Any, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
    """Run `app` (ASGI) on an HTTP request admitted as the `/v1` routes are: refusals, body limit, JSON limits."""
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
        body = await read_body(request, service.max_body_bytes, getattr(service, "body_seconds", BODY_SECONDS))
        if body.strip():
            parse_body(body)
    except PayloadTooLarge as err:
        await refusal_response(413, ["body"], str(err), method, path)(scope, receive, send)
        return
    except BodyTooSlow as err:
        await refusal_response(408, ["body"], str(err), method, path)(scope, receive, send)
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
