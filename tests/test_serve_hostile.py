"""Hostile and careless requests over HTTP (issue 29) against a real uvicorn server: no body gets a 5xx and every
4xx names the field (a property-based run of over 1,000 bodies over the world step, the proxy, the chat endpoint
and OpenEnv's reset and step, and the six kinds that once got 500s, as explicit cases); with a key every route that
runs the model or reads data needs it, WebSocket included (the app's route table walked); a loopback server refuses
foreign Host headers and form posts; each request's work is bounded, a 4xx naming the limit."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openenv.core.generic_client import GenericEnvClient
from test_serve_http import serve
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from wmstudio.model.serving.backends import load_backend
from wmstudio.serve.server import create_app
from wmstudio.serve.service import WorldModelService
from wmstudio.store import open_store
from wmstudio.store.seeding import demo_worlds, seed_first_run
from wmstudio.studio.request_budget import MAX_CHECK_CHARS, MAX_STATE_CHARS
from wmstudio.world.tools.schema_size import MAX_SCHEMA_NODES

RETAIL = next(world for world in demo_worlds() if world.name == "retail")
STEP = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}}
KEY = "hostile-test-key"
JSON = {"content-type": "application/json"}
RUNS = settings(max_examples=210, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def served(tmp_path_factory, one_thread):
    store = open_store(tmp_path_factory.mktemp("hostile") / "studio.db")
    seed_first_run(store)
    service = WorldModelService.create(load_backend(), store=store, world=RETAIL, free_tokens=8)
    server, url = serve(service)
    yield httpx.Client(base_url=url, timeout=120), service
    server.should_exit = True


@pytest.fixture(scope="module")
def api(served):
    return served[0]


def send(api: httpx.Client, path: str, body, raw: bytes | None = None, headers: dict | None = None):
    """POST `body` as JSON (lone surrogates escaped, NaN as written by json.dumps) or `raw` bytes; the reply,
    checked: no 5xx, and a 4xx names a field of what was sent."""
    content = raw if raw is not None else json.dumps(body).encode()
    reply = api.post(path, content=content, headers={**JSON, **(headers or {})})
    assert reply.status_code < 500, (path, content[:300], reply.text[:500])
    if 400 <= reply.status_code < 500:
        detail = reply.json()["detail"]
        assert isinstance(detail, list) and detail, reply.text
        for item in detail:
            assert isinstance(item["msg"], str) and item["msg"], reply.text
            assert names_a_field(body, item["loc"], item["msg"]), (path, content[:300], reply.text[:500])
    return reply


def names_a_field(body, loc: list, message: str) -> bool:
    """Whether `loc` points into `body`: every part a key or index it holds (a missing field only as the last part;
    a field's JSON text as the end of the walk); `["body"]` alone only for what concerns the whole body."""
    if loc[0] in ("header", "query"):
        return len(loc) == 2
    if loc[0] != "body":
        return False
    if len(loc) == 1:
        return not isinstance(body, dict) or "body" in message
    node = body
    for number, part in enumerate(loc[1:], start=2):
        if isinstance(node, str):
            return True  # inside JSON or our text given as a string (a state, a user turn's content)
        if isinstance(node, dict):
            key = part if part in node else next((k for k in node if isinstance(part, str) and isinstance(k, str)
                                                  and part.startswith(f"{k} ")), None)
            if key is None:
                return number == len(loc)
            node = node[key]
        elif isinstance(node, list):
            if not isinstance(part, int) or not 0 <= part < len(node):
                return False
            node = node[part]
        else:
            return False
    return True


# -- strategies: bodies shaped like the real ones, with hostile values mixed in --------------------------------

texts = st.text(max_size=12) | st.sampled_from(["\ud800", "a\udc00b", "ORD-23411", "get_order", "", " "])
numbers = (st.integers(-10**6, 10**6) | st.integers(min_value=10**120, max_value=10**130)
           | st.floats(allow_nan=True, allow_infinity=True) | st.just(10**30))
leaves = st.none() | st.booleans() | numbers | texts
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(texts, inner, max_size=3), max_leaves=8)
tool_names = st.sampled_from(["get_order", "list_orders", "refund_order", "launch_rocket", ""]) | values
calls = st.fixed_dictionaries({"name": tool_names}, optional={"arguments": st.dictionaries(
    st.sampled_from(["order_id", "page", "amount_cents", "x"]) | texts, values, max_size=3) | values}) | values
worlds = st.sampled_from(["retail", "airline", "atlantis", 5, 10**30, "99999999999999999999999", "\ud800"]) | values
fast = st.fixed_dictionaries({"steps": st.integers(1, 3)}, optional={"temperature": st.floats(0, 2)})
steps = st.fixed_dictionaries({"world": st.just("retail"), "call": st.fixed_dictionaries({  # some are answered
    "name": st.just("get_order"), "arguments": st.fixed_dictionaries({"order_id": texts})}), "sampler": fast},
    optional={"state": values, "anchors": st.dictionaries(st.sampled_from(["status", "error"]), texts, max_size=1)
              | st.lists(st.sampled_from(["status=ok", "status=pending", "message"]), max_size=1)}) \
    | st.fixed_dictionaries({}, optional={
    "world": worlds, "call": calls, "state": values, "history": st.lists(st.fixed_dictionaries(
        {"call": calls}, optional={"response": values}), max_size=2) | values,
    "anchors": st.dictionaries(st.sampled_from(["status", "order_id", "\ud800"]) | texts, values, max_size=2)
    | st.lists(texts, max_size=2) | values,
    "sampler": st.dictionaries(st.sampled_from(["temperature", "steps", "grounding", "samples", "colour"]), values,
                               max_size=2) | values,
    "repair": values}) | values
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]) | values},
                                          optional={"content": texts | values}), max_size=3)
row_turn = st.builds(lambda state, action: f"State: {json.dumps(state)}\n\nAction: {json.dumps(action)}",
                     messages | values, st.lists(st.fixed_dictionaries({"role": st.just("assistant"), "tool_calls": st.lists(
                         st.fixed_dictionaries({"function": calls}), max_size=1)}), max_size=1) | calls | values)
chats = st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["system", "user"]), "content": row_turn | texts}), min_size=1, max_size=2) | messages
    | values}, optional={"max_tokens": st.integers(-2, 12) | values, "stream": st.booleans() | values,
                         "temperature": values, "world": worlds, "grounding": values, "n": values}) | values
proxies = st.fixed_dictionaries({"input": st.fixed_dictionaries({  # a text game's step: answered in free mode
    "state": st.sampled_from(["You are in a kitchen.", ""]) | texts, "action": st.sampled_from(["open the fridge",
                                                                                            "look"])})}) \
    | st.fixed_dictionaries({"input": st.fixed_dictionaries({}, optional={
    "system_prompt": st.sampled_from(["## ENVIRONMENT STATE\nState: {\"orders\": []}", "## TOOL SCHEMAS\n- f(a)"])
    | texts | values, "state": messages | values | texts,
    "action": st.lists(st.fixed_dictionaries({"name": tool_names, "parameters": values}), max_size=1) | calls | values,
    "max_tokens": st.integers(-2, 12) | values, "temperature": values, "world": worlds, "grounding": values})
    | values}) | values
resets = st.fixed_dictionaries({}, optional={
    "curriculum": st.sampled_from(["demo", "nope", ""]) | values, "scenario": st.integers(-3, 60) | values,
    "split": st.sampled_from(["train", "heldout", "bogus"]) | values, "seed": values, "episode_id": values}) | values
openenv_steps = st.fixed_dictionaries({"action": st.fixed_dictionaries({}, optional={
    "tool": tool_names, "arguments": values, "final_answer": values}) | values}) | values


@pytest.mark.parametrize("path, bodies", [("/v1/world/step", steps), ("/v1/world/proxy", proxies),
                                          ("/v1/chat/completions", chats), ("/openenv/reset", resets),
                                          ("/openenv/step", openenv_steps)])
def test_no_body_gets_a_server_error_and_every_refusal_names_its_field(api, path, bodies):
    sent = []

    @RUNS
    @given(bodies)
    def one(body):
        sent.append(send(api, path, body).status_code)

    one()
    print(path, {code: sent.count(code) for code in sorted(set(sent))})
    assert len(sent) >= 205  # 5 endpoints x 205+: over 1,000 bodies in all
    assert any(code < 300 for code in sent) and any(code >= 400 for code in sent)  # both kinds were reached


def test_the_six_kinds_that_got_server_errors_are_4xx_naming_their_field(api):
    deep = "[" * 10_000 + "]" * 10_000
    huge = "9" * 5_000
    cases = [  # (path, the body as sent, the loc expected)
        ("/v1/world/step", f'{{"world": "retail", "call": {{"name": "get_order", "arguments": {{"order_id": {huge}}}}}}}',
         ["body", "call", "arguments", "order_id"]),
        ("/v1/world/proxy", f'{{"input": {{"state": [], "action": [], "max_tokens": {huge}}}}}',
         ["body", "input", "max_tokens"]),
        ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": "hi"}}], "seed": {huge}}}',
         ["body", "seed"]),
        ("/v1/world/step", deep, ["body", 0, 0, 0, 0, 0, 0]),
        ("/v1/world/step", '{"world": "retail", "call": {"name": "get_order", "arguments": ' + '{"a": ' * 10_000
         + "1" + "}" * 10_000 + "}}", ["body", "call", "arguments", "a", "a", "a", "a"]),
        ("/v1/chat/completions", '{"messages": ' + deep + "}", ["body", "messages", 0, 0, 0, 0, 0]),
        ("/v1/world/step", json.dumps({**STEP, "world": 10**30}), ["body", "world"]),
        ("/v1/world/step", json.dumps({**STEP, "world": "99999999999999999999999"}), ["body", "world"]),
        ("/v1/world/proxy", json.dumps({"input": {"state": [], "action": [], "world": 10**30}}), ["body", "input",
                                                                                                  "world"]),
        ("/v1/world/step", json.dumps({**STEP, "call": {"name": "get_order", "arguments": {"order_id": "\ud800"}}}),
         ["body", "call", "arguments", "order_id"]),
        ("/v1/world/step", json.dumps({**STEP, "world": "\ud800"}), ["body", "world"]),
        ("/v1/world/step", json.dumps({**STEP, "world": {**RETAIL.to_json(), "name": "\ud800"}}),
         ["body", "world", "name"]),
        ("/v1/world/step", json.dumps({**STEP, "anchors": {"status": "\udc00"}}), ["body", "anchors", "status"]),
        ("/v1/world/step", json.dumps({**STEP, "anchors": {"\ud800": "x"}}), ["body", "anchors", "\\ud800"]),
        ("/v1/world/step", json.dumps({**STEP, "history": [{"call": {"name": "get_order"}, "response": "\ud800"}]}),
         ["body", "history", 0, "response"]),
        ("/v1/world/proxy", json.dumps({"input": {"state": [{"role": "user", "content": "\ud800"}], "action": []}}),
         ["body", "input", "state", 0, "content"]),
        ("/v1/world/proxy", json.dumps({"input": {"state": "[{\"role\": \"user\", \"content\": \"\\ud800\"}]",
                                                  "action": '[{"name": "get_order", "parameters": {}}]'}}),
         ["body", "input", "state"]),
        ("/openenv/reset", json.dumps({"curriculum": "demo", "scenario": -1}), ["body", "scenario"]),
        ("/openenv/reset", json.dumps({"curriculum": "demo", "scenario": "x"}), ["body", "scenario"]),
        ("/openenv/reset", json.dumps({"curriculum": "demo", "scenario": 10**30}), ["body", "scenario"]),
        ("/openenv/reset", json.dumps({"curriculum": "demo", "split": "bogus"}), ["body", "split"]),
        ("/openenv/reset", json.dumps({"curriculum": "unknown"}), ["body", "curriculum"]),
        ("/v1/world/step", json.dumps({**STEP, "sampler": {"temperature": float("nan")}}),
         ["body", "sampler", "temperature"]),
        ("/v1/world/step", '{"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": 1e999}}}',
         ["body", "call", "arguments", "order_id"]),
        ("/v1/world/step", json.dumps({**STEP, "anchors": {"message": "x" * 100_000}}), ["body", "anchors",
                                                                                         "message"]),
        ("/v1/world/step", "", ["body"]),
    ]
    for path, text, loc in cases:
        reply = api.post(path, content=text.encode(), headers=JSON)
        assert 400 <= reply.status_code < 500, (path, text[:200], reply.text[:300])
        assert reply.json()["detail"][0]["loc"] == loc, (path, text[:200], reply.text[:300])
    over = api.post("/openenv/step", content=b'{"action": {"tool": "' + b"x" * 8_100_000 + b'"}}', headers=JSON)
    assert over.status_code == 413 and "limit" in over.json()["detail"][0]["msg"]  # /openenv has /v1's body limit


def test_each_requests_work_is_bounded_and_the_4xx_names_the_limit(api):
    nested = "[" + ",".join(str(i) for i in range(60)) + "]"

    def rules(count: int, size: int) -> list[dict]:
        made = []
        for k in range(count):  # distinct checks: none is compiled once for all
            check = f"{nested}.all(a, {nested}.all(b, {nested}.all(c, a + b + c >= {k})))"
            made.append({"text": f"rule {k}", "check": check + " || true" * ((size - len(check)) // 8)})
        return made

    twenty = api.post("/v1/world/step", json={**STEP, "world": {**RETAIL.to_json(), "rules": rules(20, 4_000)}})
    assert twenty.status_code == 422 and twenty.json()["detail"][0]["loc"] == ["body", "world", "rules"]
    assert f"{MAX_CHECK_CHARS:,}-character limit" in twenty.json()["detail"][0]["msg"]
    slow = api.post("/v1/world/step", json={**STEP, "world": {**RETAIL.to_json(), "rules": rules(3, 0)}})
    assert slow.status_code == 422 and slow.json()["detail"][0]["loc"] == ["body", "world", "rules"]
    assert "2-second CPU budget" in slow.json()["detail"][0]["msg"]

    orders = [{**RETAIL.initial_state["orders"][0], "id": f"ORD-{i:06d}"} for i in range(24_000)]
    state = {**RETAIL.initial_state, "orders": orders}
    assert 7_000_000 < len(json.dumps(state)) < 7_500_000  # the issue's 7 MB state, within the 8 MB body limit
    records = json.dumps({"orders": orders[:4_000]})  # in a system prompt its quotes are escaped: 1.2 MB of state
    for body, loc in (({**STEP, "world": {**RETAIL.to_json(), "initial_state": state}}, ["world", "initial_state"]),
                      ({**STEP, "state": state}, ["state"]),
                      ({"input": {"system_prompt": f"## ENVIRONMENT STATE\nDatabase records: {records}",
                                  "state": [], "action": [{"name": "get_order", "parameters": {}}]}},
                       ["input", "system_prompt"])):
        reply = api.post("/v1/world/proxy" if "input" in body else "/v1/world/step", json=body)
        assert reply.status_code == 422 and reply.json()["detail"][0]["loc"] == ["body", *loc], reply.text[:300]
        assert f"{MAX_STATE_CHARS:,}-character limit" in reply.json()["detail"][0]["msg"]

    defs = {f"n{level}": {"anyOf": [{"anyOf": [{"$ref": f"#/$defs/n{level + 1}"}], "title": f"b{branch}"}
                                    for branch in range(4)]} for level in range(9)}
    defs["n9"] = {"anyOf": [{"type": "string"}] * 4}
    bomb = {"name": "bomb", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n0"}},
                                           "$defs": defs}}
    reply = api.post("/v1/world/step", json={"world": {"name": "bomb", "tools": [bomb]},
                                             "call": {"name": "bomb", "arguments": {"a": 0}}})
    assert reply.status_code == 422 and reply.json()["detail"][0]["loc"] == ["body", "world", "tools", 0, "parameters"]
    assert f"{MAX_SCHEMA_NODES:,} schema nodes" in reply.json()["detail"][0]["msg"]


def test_compiling_a_requests_rules_counts_against_its_check_budget(api, monkeypatch):
    """Twenty legal rules whose CEL takes seconds to parse once held a request 7.6 s (a normal one waited 7 s): the
    parse was outside the budget. With the budget cut to 0.15 s (their parse alone takes about 0.5 s on 2 cores) they
    are refused naming the rules; a world's rules compiled once (a trainer sends the same world every step) cost
    nothing the next time (checking them takes about 0.2 s)."""
    from wmstudio.studio import request_budget

    groups = ["(" * 25 + f"response.status == 'ok' || {k} > 0" + ")" * 25 for k in range(20)]  # slow to parse
    rules = [{"text": f"rule {k}", "check": 'call.name != "refund_order" || ' + " && ".join([group] * 9)}
             for k, group in enumerate(groups)]
    body = {**STEP, "world": {**RETAIL.to_json(), "rules": rules}, "sampler": {"steps": 2}}
    monkeypatch.setattr(request_budget, "CHECK_SECONDS", 0.15)
    refused = api.post("/v1/world/step", json=body)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "world", "rules"]
    assert "0.15-second CPU budget" in refused.json()["detail"][0]["msg"]
    monkeypatch.setattr(request_budget, "CHECK_SECONDS", 60.0)
    assert api.post("/v1/world/step", json=body).status_code == 200  # compiled now, and kept
    monkeypatch.setattr(request_budget, "CHECK_SECONDS", 0.45)
    assert api.post("/v1/world/step", json=body).status_code == 200


def test_a_loopback_server_refuses_foreign_hosts_and_form_posts_and_health_shows_no_path(api, served):
    for path in ("/v1/models", "/openenv/health"):
        assert api.get(path, headers={"Host": "evil.example"}).status_code == 403
        assert api.get(path, headers={"Host": f"localhost:{api.base_url.port}"}).status_code == 200
    for path, body in (("/v1/world/step", json.dumps(STEP)), ("/openenv/reset", "{}")):
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            reply = api.post(path, content=body.encode(), headers={"content-type": kind})
            assert reply.status_code == 415 and reply.json()["detail"][0]["loc"] == ["header", "content-type"]
    health = api.get("/v1/health").json()
    assert health["model"] == "wm-mdlm-small" and "/" not in json.dumps(health)
    with connect(f"ws://127.0.0.1:{api.base_url.port}/openenv/ws") as socket:  # a hostile message: an error back
        socket.send('{"type": "step", "data": ' + "[" * 500 + "]" * 500 + "}")
        error = json.loads(socket.recv(timeout=30))
        assert error["type"] == "error" and "100-level limit" in error["data"]["message"]


def test_with_a_key_every_route_that_runs_the_model_or_reads_data_needs_it(served):
    _, unkeyed = served
    service = WorldModelService(unkeyed.backend, store=unkeyed.store, world=RETAIL, api_key=KEY)
    app = create_app(service)
    server, url = serve(service)
    public = {"/health", "/v1/health"}  # no data: the API's schema and its page need the key too
    walked = []
    try:
        for route, prefix in routes(app):
            path = prefix + route.path
            if path in public:
                continue
            walked.append(path)
            if hasattr(route, "methods"):
                for method in route.methods - {"HEAD"}:
                    body = b"{}" if method == "POST" else None
                    bare = httpx.request(method, url + path, content=body, headers=JSON, timeout=60)
                    assert bare.status_code == 401, (method, path, bare.text)
                    keyed = httpx.request(method, url + path, content=body, headers={**JSON, "X-API-Key": KEY},
                                          timeout=120)
                    assert keyed.status_code != 401, (method, path)
            else:  # a WebSocket route: refused at the handshake without the key, open with it (header or query)
                where = f"ws://127.0.0.1:{url.rsplit(':', 1)[1]}{path}"
                with pytest.raises(InvalidStatus), connect(where):
                    pass
                with connect(where, additional_headers={"Authorization": f"Bearer {KEY}"}):
                    pass
                with connect(f"{where}?api_key={KEY}"):
                    pass
        client = GenericEnvClient(base_url=f"{url}/openenv")  # as the README says to give OpenEnv's client the key
        client._ws_url += f"?api_key={KEY}"
        with client.sync() as env:
            assert "ORD-35137" in env.reset(curriculum="demo", split="heldout", scenario=4).observation["task"]
    finally:
        server.should_exit = True
    assert {"/v1/models", "/v1/world/step", "/v1/world/proxy", "/v1/chat/completions", "/openenv/reset",
            "/openenv/step", "/openenv/state", "/openenv/ws", "/openapi.json", "/docs"} <= set(walked)


def routes(app, prefix: str = ""):
    """(route, its mount prefix) for every route of `app` and of the apps mounted in it (behind their guard)."""
    for route in app.routes:
        inner = getattr(getattr(route, "app", None), "wrapped", None)
        if inner is not None:
            yield from routes(inner, prefix + route.path)
        elif hasattr(route, "original_router"):  # FastAPI's record of an included router
            yield from routes(route.original_router, prefix + (route.include_context.prefix or ""))
        else:
            yield route, prefix
