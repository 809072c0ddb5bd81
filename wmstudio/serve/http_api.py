"""The world model over HTTP for external trainers: a world step, the paper's proxy payload and OpenAI chat.

`world_model_router(service)` is mounted by `wmstudio serve-wm` and beside the studio. Every route but the health
probes passes `guard.admission` (API key, loopback Host, JSON content type); bodies are read with a size cap (413
over it) and parsed within the CLI's JSON limits; a bad payload is a 422 whose `detail` names each field (`loc`)
and its fix, logged on the server. A request's work is bounded (studio/request_budget.py). A chat or proxy request
is answered in the world it states over the served one (studio/request_world.py); every answer records the
grounding it was made with (`none` unless the request names `oracle`) and where the world's parts came from."""

from __future__ import annotations

import json
import time
import uuid
from contextlib import ExitStack
from typing import Any, Callable, Iterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.serve.guard import admission, log_to_stderr, problems_response, refusal_response, shorten
from wmstudio.serve.request_body import BodyTooSlow, PayloadTooLarge, parse_body, read_body
from wmstudio.serve.service import WorldModelService
from wmstudio.settings import whole_in
from wmstudio.studio.chat_step import (
    ChatAnswer,
    Settled,
    chat_answer,
    chat_stream,
    read_messages,
    settled_stretches,
    world_turn,
)
from wmstudio.studio.memory import release_memory
from wmstudio.studio.request_budget import request_budget
from wmstudio.studio.world_step import read_sampler, read_step_request, resolve_world, world_step
from wmstudio.world.prompt.row_turns import read_turns

PROXY_REPETITION_PENALTY = 1.3  # the paper's serving default, kept for plugins written against it
PROXY_MAX_TOKENS = 768


def world_model_router(service: WorldModelService) -> APIRouter:
    """The routes: GET /health, /v1/health, /v1/models; POST /v1/world/step, /v1/world/proxy, /v1/chat/completions."""
    router = APIRouter()
    admitted = [Depends(admission(service))]
    log_to_stderr()

    @router.get("/health")  # async: answered on the event loop, never queued behind the worker threads
    async def health_plain() -> Any:
        return JSONResponse({"status": "ok"})

    @router.get("/v1/health")
    async def health() -> dict[str, Any]:
        stats = service.batcher.stats if service.batcher is not None else None
        return {"status": "ok", "model": service.model_name, "batching": stats is not None,
                "batches": None if stats is None else {"forwards": stats.forwards, "canvases": stats.rows,
                                                      "largest": stats.largest, "mean": round(stats.mean_rows, 2)}}

    @router.get("/v1/models", dependencies=admitted)
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": service.model_name, "object": "model", "owned_by": "wmstudio"}]}

    @router.post("/v1/world/step", dependencies=admitted)
    async def step(request: Request) -> Any:
        return await _answer(request, service, lambda body: _world_step(service, body), "world.rules")

    @router.post("/v1/world/proxy", dependencies=admitted)
    async def proxy(request: Request) -> Any:
        return await _answer(request, service, lambda body: _proxy(service, body), "input.world")

    @router.post("/v1/chat/completions", dependencies=admitted)
    async def chat(request: Request) -> Any:
        return await _answer(request, service, lambda body: _chat(service, body), "world")

    return router


def mount_beside_studio(app: Any, backend: Any, store: Any, api_key: str | None, host: str | None = None) -> None:
    """Add the routes to a running studio's app, sharing its loaded world model and saved worlds; `host` is the
    address the studio listens on (on loopback, only loopback Host headers are admitted)."""
    app.include_router(world_model_router(WorldModelService.create(backend, store=store, api_key=api_key,
                                                                   host=host)))


async def _answer(request: Request, service: WorldModelService, work: Callable[[Any], Any], budget_at: str) -> Any:
    """Read and parse the body, run `work` on it in a worker thread within the request budget, answer JSON (or the
    stream `work` returns); refusals as 413/422."""
    method, route = request.method, request.url.path
    try:
        body = await run_in_threadpool(parse_body, await read_body(request, service.max_body_bytes, service.body_seconds))

        def budgeted() -> Any:
            try:
                with request_budget(budget_at):
                    return work(body)
            finally:
                release_memory()  # a burst's freed blocks go back to the system (studio/memory.py)

        answer = await run_in_threadpool(budgeted)
        return answer if isinstance(answer, StreamingResponse) else JSONResponse(answer)
    except PayloadTooLarge as err:
        return refusal_response(413, ["body"], str(err), method, route)
    except BodyTooSlow as err:
        return refusal_response(408, ["body"], str(err), method, route)
    except InvalidInput as err:
        return problems_response(err, method, route)


def _world_step(service: WorldModelService, body: Any) -> dict[str, Any]:
    request = read_step_request(body, service.store)
    with service.session() as backend:
        result = world_step(backend, request)
    return {**result, "model": service.model_name}


def _proxy(service: WorldModelService, body: Any) -> dict[str, Any]:
    """The paper's world-model proxy: `{"input": {"system_prompt", "state", "action", "max_tokens", ...}}` ->
    `{"generated_text", "usage", "wmstudio"}`. A state that ends with the call the action repeats (a GRPO plugin
    under ms-swift) is the history before it; the system prompt's sections are the request's environment."""
    if not isinstance(body, dict):
        raise InvalidInput(Problem("", 'the body must be {"input": {"system_prompt": ..., "state": [...], '
                                       '"action": [...]}}'))
    data = body.get("input", body)
    where = "input." if "input" in body else ""
    if not isinstance(data, dict):
        raise InvalidInput(Problem("input", "must be an object with system_prompt, state and action"))
    problems = [Problem(where + name, "missing: the agent's messages so far (state) and the [assistant tool-call "
                                      "message] (action), as JSON or JSON text") for name in ("state", "action")
                if name not in data]
    if data.get("system_prompt") is not None and not isinstance(data.get("system_prompt"), str):
        problems.append(Problem(where + "system_prompt", "must be text"))
    max_tokens = data.get("max_tokens", PROXY_MAX_TOKENS)
    if not whole_in(max_tokens, 1):
        problems.append(Problem(where + "max_tokens",
                                f"must be a positive whole number, got {shorten(repr(max_tokens))}"))
    settings, world = _settings_and_world(service, data, where, PROXY_REPETITION_PENALTY, problems)
    if problems:
        raise InvalidInput(problems)
    system = data.get("system_prompt") or ""
    turns = read_turns(data["state"], data["action"], where + "state", where + "action")
    if turns is None:  # a text action (a text game's command): the turns as the paper's proxy writes them
        text = lambda value: value if isinstance(value, str) else json.dumps(value)  # noqa: E731 - as theirs
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": f"State: {text(data['state'])}\n\nAction: {text(data['action'])}"})
        answer = _run(service, messages, max_tokens, settings, None, None)
    else:
        turn = world_turn(system, turns, world, where + "system_prompt", where + "state")
        answer = _run(service, [], max_tokens, settings, world, turn)
    return {"generated_text": answer.text, "usage": _usage(answer), "wmstudio": answer.report()}


def _chat(service: WorldModelService, body: Any) -> Any:
    """An OpenAI chat completion (or, with `stream`, its server-sent chunks)."""
    messages, max_tokens, settings, world = _chat_request(service, body)
    if body.get("stream") is True:
        return _chat_stream_response(service, messages, max_tokens, settings, world)
    answer = _run(service, messages, max_tokens, settings, world, None)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": service.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                         "finish_reason": "stop"}],
            "usage": _usage(answer), "wmstudio": answer.report()}


def _chat_stream_response(service: WorldModelService, messages, max_tokens, settings, world) -> StreamingResponse:
    """Server-sent events: a role chunk, content deltas as the settled prefix grows (each saying its stage in
    `wmstudio.stage`: what the helpers wrote before denoising, then each denoising step), a stop chunk, [DONE]. The
    request is read and the first step run before the response starts, so a bad request is still a 422; a request
    that runs over its budget afterwards ends with an error event."""
    chunk_id, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None) -> str:
        data = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": service.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **(extra or {})}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    held = ExitStack()  # the batcher session lives as long as the stream, closed when the client is done or gone
    backend = held.enter_context(service.session())
    items = _budgeted(chat_stream(backend, messages, max_tokens, settings, world, service.free_tokens))
    try:
        first = next(items)
    except BaseException:
        held.close()
        raise

    def events() -> Iterator[str]:
        sent = ""
        with held:
            yield chunk({"role": "assistant", "content": ""})
            try:
                for item in _chain(first, items):
                    stage = {"wmstudio": item.report()} if isinstance(item, Settled) else None
                    if item.text.startswith(sent) and len(item.text) > len(sent):
                        for stretch in settled_stretches(sent, item.text):
                            yield chunk({"content": stretch}, extra=stage)
                        sent = item.text
                    if isinstance(item, ChatAnswer):
                        yield chunk({}, "stop", {"usage": _usage(item), "wmstudio": item.report()})
            except InvalidInput as err:
                error = {"error": {"message": shorten(str(err)), "type": "invalid_request_error"}}
                yield f"data: {json.dumps(error)}\n\n"
            yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _budgeted(items: Iterator[Any], where: str = "world") -> Iterator[Any]:
    """`items`, each step run within the request budget (a stream's steps run in whichever worker thread)."""
    while True:
        with request_budget(where):
            try:
                item = next(items)
            except StopIteration:
                return
        yield item


def _chat_request(service: WorldModelService, body: Any):
    """(messages, max_tokens, sampler settings, world) of an OpenAI chat request; unknown OpenAI fields are ignored."""
    if not isinstance(body, dict):
        raise InvalidInput(Problem("", 'the body must be {"messages": [{"role": "user", "content": ...}], ...}'))
    problems: list[Problem] = []
    try:
        messages = read_messages(body.get("messages"))
    except InvalidInput as err:
        problems.extend(err.problems)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", service.free_tokens))
    if not whole_in(max_tokens, 1):
        problems.append(Problem("max_tokens", f"must be a positive whole number, got {shorten(repr(max_tokens))}"))
    if body.get("n", 1) != 1:
        problems.append(Problem("n", "only n=1 is served: send one request per completion"))
    if not isinstance(body.get("stream", False), bool):
        problems.append(Problem("stream", "must be true or false"))
    settings, world = _settings_and_world(service, body, "", 1.0, problems)
    if problems:
        raise InvalidInput(problems)
    return messages, max_tokens, settings, world


def _settings_and_world(service: WorldModelService, data: dict[str, Any], where: str, repetition_penalty: float,
                        problems: list[Problem]):
    """The sampler settings and the named (or served) world of a proxy or chat request; problems appended."""
    settings = world = None
    try:
        settings = _sampler(data, where, repetition_penalty)
    except InvalidInput as err:
        problems.extend(err.problems)
    try:
        world = _request_world(service, data, where)
    except InvalidInput as err:
        problems.extend(err.problems)
    return settings, world


def _sampler(data: dict[str, Any], where: str, repetition_penalty: float) -> SamplerSettings:
    """Sampler settings from the OpenAI-style fields (temperature, repetition_penalty, seed) and `grounding`
    (`none` unless the request names `oracle`)."""
    raw = {"temperature": data.get("temperature", 0.0), "repetition_penalty": data.get("repetition_penalty",
                                                                                         repetition_penalty)}
    for name in ("seed", "grounding"):
        if data.get(name) is not None:
            raw[name] = data[name]
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


def _run(service: WorldModelService, messages, max_tokens, settings, world, turn) -> ChatAnswer:
    with service.session() as backend:
        return chat_answer(backend, messages, max_tokens, settings, world, service.free_tokens, turn)


def _usage(answer: ChatAnswer) -> dict[str, int]:
    return {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens}


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
