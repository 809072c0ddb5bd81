"""`wmstudio serve-wm`: the world-model endpoints and the OpenEnv environment in one FastAPI app under uvicorn.

Binding to anything but loopback needs an API key, so a trainer's port is never an open model server. The OpenEnv
server is mounted behind the same admission as the `/v1` routes (serve/guard.py): key, loopback Host, JSON content
type, body limit and JSON limits, on its WebSocket too. Every request first passes the site guard (Host and Origin,
serve/site_guard.py), and an unforeseen error is a 500 that keeps the connection (serve/server_errors.py)."""

from __future__ import annotations

import sys
from typing import Any, Callable
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html

from wmstudio.network import is_loopback
from wmstudio.problems import InvalidInput
from wmstudio.serve.deadlines import HeadDeadline
from wmstudio.serve.guard import admission, guard_http
from wmstudio.serve.http_api import world_model_router
from wmstudio.serve.service import WorldModelService
from wmstudio.serve.site_guard import server_middleware
from wmstudio.serve.socket_guard import socket_guard
from wmstudio.studio.memory import limit_malloc_arenas, settle_for_serving

OPENENV_PATH = "/openenv"


def create_app(service: WorldModelService, openenv: bool = True) -> FastAPI:
    """The app: the world-model routes and, under /openenv, the OpenEnv server over the demo and saved curricula."""
    app = FastAPI(title="wmstudio world model", version="1", middleware=server_middleware(service.host),
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(world_model_router(service))
    add_api_docs(app, service)
    if openenv:
        try:
            from wmstudio.serve.openenv_server import openenv_app
        except ImportError:  # openenv-core is the `serve` extra
            print("note: no OpenEnv server: pip install 'wmstudio[serve]' for one under /openenv", file=sys.stderr)
        else:
            app.mount(OPENENV_PATH, guarded(openenv_app(service), service))
    return app


def add_api_docs(app: FastAPI, service: WorldModelService) -> None:
    """GET /openapi.json and /docs (Swagger UI) behind the same admission as every other route: with a key, they need
    it too (the schema names every route and field). In a browser, `/docs?api_key=KEY` passes the key on to the
    schema it loads."""
    admitted = [Depends(admission(service))]

    @app.get("/openapi.json", include_in_schema=False, dependencies=admitted)
    def openapi() -> Any:
        return app.openapi()

    @app.get("/docs", include_in_schema=False, dependencies=admitted)
    def docs(request: Request) -> Any:
        key = request.query_params.get("api_key")
        schema = "/openapi.json" + (f"?{urlencode({'api_key': key})}" if key else "")
        return get_swagger_ui_html(openapi_url=schema, title=f"{app.title} - API")


def guarded(app: Any, service: WorldModelService) -> Callable:
    """`app` (ASGI: the OpenEnv server) behind the `/v1` routes' admission, body limit and JSON limits; its
    WebSocket sessions need the key too, are capped per client, time out when idle, and each message is held to
    the same limits (serve/socket_guard.py)."""
    sockets = socket_guard(app, service)

    async def guard(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            await guard_http(app, service, scope, receive, send)
        else:
            await sockets(scope, receive, send)
    guard.wrapped = app  # type: ignore[attr-defined] - the app inside, for whoever walks the route table
    return guard


def refuse_open_binding(host: str, api_key: str | None) -> None:
    """InvalidInput when `host` is reachable from other machines and no API key protects the model."""
    if not is_loopback(host) and not api_key:
        raise InvalidInput(f"--host {host} can be reached from other machines: set --api-key KEY (or "
                           "WMSTUDIO_API_KEY) so only your trainers can call the model, or serve on --host 127.0.0.1")


def server_config(app: Any, host: str, port: int, **settings: Any) -> Any:
    """uvicorn's configuration for `app`: h11 with a deadline for every request's head (serve/deadlines.py)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, http=HeadDeadline, **{"log_level": "warning", **settings})


def run(service: WorldModelService, host: str = "127.0.0.1", port: int = 8000, openenv: bool = True) -> None:
    """Serve until interrupted."""
    import uvicorn

    refuse_open_binding(host, service.api_key)
    service.host = host
    app = create_app(service, openenv)
    limit_malloc_arenas()
    settle_for_serving()
    uvicorn.Server(server_config(app, host, port)).run()
