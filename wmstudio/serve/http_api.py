"""The world model over HTTP for external trainers: a world step, the paper's proxy payload and OpenAI chat.

`world_model_router(service)` is mounted by `wmstudio serve-wm` and beside the studio. Bodies are read with a size
cap before parsing (413 over it); a bad payload is a 422 whose `detail` names each field (`loc`) and its fix; with
an API key set, every `/v1` call needs `Authorization: Bearer KEY` (or `X-API-Key`)."""

from __future__ import annotations

import hmac
import json
import re
import time
import uuid
from contextlib import ExitStack
from typing import Any, Callable, Iterator

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from wmstudio.model.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.serve.service import WorldModelService
from wmstudio.studio.chat_step import ChatAnswer, chat_answer, chat_stream, read_messages
from wmstudio.studio.world_step import read_sampler, read_step_request, resolve_world, world_step

PROXY_REPETITION_PENALTY = 1.3  # the paper's serving default, kept for plugins written against it
PROXY_MAX_TOKENS = 768


class PayloadTooLarge(Exception):
    """A request body over the server's limit (answered 413 before it is parsed)."""


def world_model_router(service: WorldModelService) -> APIRouter:
    """The routes: GET /health, /v1/health, /v1/models; POST /v1/world/step, /v1/world/proxy, /v1/chat/completions."""
    router = APIRouter()
    guarded = [Depends(_key_check(service))]

    @router.get("/health")
    def health_plain() -> Any:
        return JSONResponse({"status": "ok"})

    @router.get("/v1/health")
    def health() -> dict[str, Any]:
        stats = service.batcher.stats if service.batcher is not None else None
        return {"status": "ok", "model": service.model_name, "batching": stats is not None,
                "batches": None if stats is None else {"forwards": stats.forwards, "canvases": stats.rows,
                                                      "largest": stats.largest, "mean": round(stats.mean_rows, 2)}}

    @router.get("/v1/models", dependencies=guarded)
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": service.model_name, "object": "model", "owned_by": "wmstudio"}]}

    @router.post("/v1/world/step", dependencies=guarded)
    async def step(request: Request) -> Any:
        return await _answer(request, service, lambda body: _world_step(service, body))

    @router.post("/v1/world/proxy", dependencies=guarded)
    async def proxy(request: Request) -> Any:
        return await _answer(request, service, lambda body: _proxy(service, body))

    @router.post("/v1/chat/completions", dependencies=guarded)
    async def chat(request: Request) -> Any:
        try:
            body = await _read_json(request, service.max_body_bytes)
            if isinstance(body, dict) and body.get("stream") is True:
                return await run_in_threadpool(_chat_stream_response, service, body)
            return JSONResponse(await run_in_threadpool(_chat_completion, service, body))
        except PayloadTooLarge as err:
            return JSONResponse({"detail": str(err)}, status_code=413)
        except InvalidInput as err:
            return unprocessable(err)

    return router


def mount_beside_studio(app: Any, backend: Any, store: Any, api_key: str | None) -> None:
    """Add the routes to a running studio's app, sharing its loaded world model and saved worlds."""
    app.include_router(world_model_router(WorldModelService.create(backend, store=store, api_key=api_key)))


def unprocessable(err: InvalidInput) -> JSONResponse:
    """422 in FastAPI's shape: one entry per problem, `loc` the field's path under the body."""
    detail = [{"loc": ["body", *_path_parts(p.path)], "msg": p.message, "type": "value_error"} for p in err.problems]
    return JSONResponse({"detail": detail}, status_code=422)


async def _answer(request: Request, service: WorldModelService, work: Callable[[Any], dict[str, Any]]) -> Any:
    try:
        body = await _read_json(request, service.max_body_bytes)
        return JSONResponse(await run_in_threadpool(work, body))
    except PayloadTooLarge as err:
        return JSONResponse({"detail": str(err)}, status_code=413)
    except InvalidInput as err:
        return unprocessable(err)


async def _read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read no further than `limit` bytes; InvalidInput when it is not JSON."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {int(declared):,} bytes is over this server's limit of {limit:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over this server's limit of {limit:,} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks) or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        where = f" (line {err.lineno}, column {err.colno})" if isinstance(err, json.JSONDecodeError) else ""
        raise InvalidInput(Problem("", f"the body is not JSON{where}: send a JSON object")) from None


def _key_check(service: WorldModelService) -> Callable[[Request], None]:
    def check(request: Request) -> None:
        if not service.api_key:
            return
        given = request.headers.get("x-api-key") or ""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given = given or token.strip()
        if not hmac.compare_digest(given.encode(), service.api_key.encode()):
            raise HTTPException(401, "missing or wrong API key: send Authorization: Bearer KEY (or X-API-Key: KEY)")
    return check


def _world_step(service: WorldModelService, body: Any) -> dict[str, Any]:
    request = read_step_request(body, service.store)
    with service.session() as backend:
        return world_step(backend, request)


def _proxy(service: WorldModelService, body: Any) -> dict[str, Any]:
    """The paper's world-model proxy: `{"input": {"system_prompt", "state", "action", "max_tokens", ...}}` ->
    `{"generated_text", "usage"}`, the user turn built exactly as their proxy builds it."""
    if not isinstance(body, dict):
        raise InvalidInput(Problem("input", 'send {"input": {"system_prompt": ..., "state": [...], "action": [...]}}'))
    data = body.get("input", body)
    where = "input." if "input" in body else ""
    if not isinstance(data, dict):
        raise InvalidInput(Problem("input", "must be an object with system_prompt, state and action"))
    problems = []
    for name in ("state", "action"):
        if name not in data:
            problems.append(Problem(where + name, "missing: the agent's messages so far (state) and the "
                                                  "[assistant tool-call message] (action), as JSON or JSON text"))
    if data.get("system_prompt") is not None and not isinstance(data.get("system_prompt"), str):
        problems.append(Problem(where + "system_prompt", "must be text"))
    max_tokens = data.get("max_tokens", PROXY_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        problems.append(Problem(where + "max_tokens", f"must be a positive whole number, got {max_tokens!r}"))
    if problems:
        raise InvalidInput(problems)
    settings = _sampler(data, where, PROXY_REPETITION_PENALTY)
    world = _request_world(service, data, where)
    text = lambda value: value if isinstance(value, str) else json.dumps(value)  # noqa: E731 - as their proxy does
    messages = [{"role": "system", "content": data["system_prompt"]}] if data.get("system_prompt") else []
    messages.append({"role": "user", "content": f"State: {text(data['state'])}\n\nAction: {text(data['action'])}"})
    answer = _chat(service, messages, max_tokens, settings, world)
    return {"generated_text": answer.text, "usage": _usage(answer)}


def _chat_completion(service: WorldModelService, body: Any) -> dict[str, Any]:
    messages, max_tokens, settings, world = _chat_request(service, body)
    answer = _chat(service, messages, max_tokens, settings, world)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": service.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                         "finish_reason": "stop"}],
            "usage": _usage(answer), "wmstudio": {"mode": answer.mode, "checks": answer.checks}}


def _chat_stream_response(service: WorldModelService, body: Any) -> StreamingResponse:
    """Server-sent events: a role chunk, content deltas as the settled prefix grows, a stop chunk, [DONE]. The
    first step runs before the response starts, so a bad request is still a 422."""
    messages, max_tokens, settings, world = _chat_request(service, body)
    chunk_id, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None) -> str:
        data = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": service.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **(extra or {})}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    held = ExitStack()  # the batcher session lives as long as the stream, closed when the client is done or gone
    backend = held.enter_context(service.session())
    items = chat_stream(backend, messages, max_tokens, settings, world, service.free_tokens)
    try:
        first = next(items)
    except BaseException:
        held.close()
        raise

    def events() -> Iterator[str]:
        sent = ""
        with held:
            yield chunk({"role": "assistant", "content": ""})
            for item in _chain(first, items):
                text = item.text if isinstance(item, ChatAnswer) else item
                if text.startswith(sent) and len(text) > len(sent):
                    yield chunk({"content": text[len(sent):]})
                    sent = text
                if isinstance(item, ChatAnswer):
                    yield chunk({}, "stop", {"usage": _usage(item)})
            yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _chat_request(service: WorldModelService, body: Any):
    """(messages, max_tokens, sampler settings, world) of an OpenAI chat request; unknown OpenAI fields are ignored."""
    if not isinstance(body, dict):
        raise InvalidInput(Problem("", 'send {"messages": [{"role": "user", "content": ...}], ...}'))
    problems: list[Problem] = []
    try:
        messages = read_messages(body.get("messages"))
    except InvalidInput as err:
        problems.extend(err.problems)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", service.free_tokens))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        problems.append(Problem("max_tokens", f"must be a positive whole number, got {max_tokens!r}"))
    if body.get("n", 1) != 1:
        problems.append(Problem("n", "only n=1 is served: send one request per completion"))
    if not isinstance(body.get("stream", False), bool):
        problems.append(Problem("stream", "must be true or false"))
    try:
        settings = _sampler(body, "", 1.0)
    except InvalidInput as err:
        problems.extend(err.problems)
    try:
        world = _request_world(service, body, "")
    except InvalidInput as err:
        problems.extend(err.problems)
    if problems:
        raise InvalidInput(problems)
    return messages, max_tokens, settings, world


def _sampler(data: dict[str, Any], where: str, repetition_penalty: float) -> SamplerSettings:
    """Sampler settings from the OpenAI-style fields (temperature, repetition_penalty, seed)."""
    raw = {"temperature": data.get("temperature", 0.0), "repetition_penalty": data.get("repetition_penalty",
                                                                                         repetition_penalty)}
    if data.get("seed") is not None:
        raw["seed"] = data["seed"]
    raw = {name: (0.0 if value is None and name == "temperature" else value) for name, value in raw.items()}
    try:
        return read_sampler(raw)
    except InvalidInput as err:
        raise InvalidInput([Problem(where + p.path.removeprefix("sampler."), p.message) for p in err.problems]) from None


def _request_world(service: WorldModelService, data: dict[str, Any], where: str):
    if data.get("world") is None:
        return service.world
    try:
        return resolve_world(data["world"], service.store)
    except InvalidInput as err:
        raise InvalidInput([Problem(where + p.path, p.message) for p in err.problems]) from None


def _chat(service: WorldModelService, messages, max_tokens, settings, world) -> ChatAnswer:
    with service.session() as backend:
        return chat_answer(backend, messages, max_tokens, settings, world, service.free_tokens)


def _usage(answer: ChatAnswer) -> dict[str, int]:
    return {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens}


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _path_parts(path: str) -> list[str | int]:
    """`history[0].call.name` -> ["history", 0, "call", "name"], as FastAPI writes a `loc`."""
    return [int(piece[1:-1]) if piece.startswith("[") else piece for piece in re.findall(r"\[\d+\]|[^.\[\]]+", path)]
