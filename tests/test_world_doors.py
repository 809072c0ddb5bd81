"""Every world `validate` accepts can be stepped, through every door (issue 36): generated worlds with rules with
and without a CEL check (a plain-text rule once crashed the message check whenever an answer had a `message`),
tools with and without a response schema, and answers with and without a message, sent through the deterministic
check (`wmstudio check`'s, Simulate's and every HTTP answer's report), the CLI's `check` and `generate`, Simulate's
service, and HTTP step, proxy and chat: 0 server errors and 0 tracebacks in over 1,000 worlds and bodies. A 5xx,
should one still happen, keeps the client's keep-alive connection."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from serving import read_reply
from test_serve_http import serve
from typer.testing import CliRunner

from wmstudio.cli import app as cli
from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.model.serving.backends import load_backend
from wmstudio.problems import InvalidInput
from wmstudio.serve.service import WorldModelService
from wmstudio.store import open_store
from wmstudio.store.seeding import seed_first_run
from wmstudio.studio.context import open_context
from wmstudio.studio.simulation import run_simulation
from wmstudio.studio.worlds import save_world_version
from wmstudio.world.checks.report import check_step
from wmstudio.world.prompt.patronus import patronus_chat
from wmstudio.world.prompt.render import render_chat
from wmstudio.world.spec import Call, WorldSpec, parse_world
from wmstudio.world.steering.anchors import Anchor

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "wmstudio-hypothesis")
JSON = {"content-type": "application/json"}
runner = CliRunner()


def runs(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


# -- worlds validate accepts: rules with and without checks, messages that name ids, numbers and dates -----------

words = st.sampled_from(["Refunds", "close", "30", "days", "after", "delivery", "ORD-12", "is", "frozen", "$1,299.00",
                         "2025-03-14", "/home/alex", "NX482", "45s", "a", "the", "order", "id", "Ü", "\u202e", "12:30",
                         "1e9", "72x2", "-", "after30", "ch_3Kx9", "ORD-23411", "400"])
texts = st.lists(words, min_size=1, max_size=8).map(" ".join)
CHECKS = ['response.status != "error" || size(response.message) > 0', "call.name != \"t0\" || true",
          'has(response.total_cents) ? response.total_cents >= 0 : true', 'duration("86400s") > duration("0s")',
          'call.name == "t1" || !has(response.message) || response.message != ""', "size(history) < 10",
          'timestamp("2025-01-01T00:00:00Z") + duration("7776000s") > timestamp("2025-01-01T00:00:00Z")']
rules = st.fixed_dictionaries({"text": texts}, optional={"check": st.sampled_from(CHECKS)}) | texts
FIELDS = {"status": {"type": "string", "enum": ["ok", "error"]}, "message": {"type": "string"},
          "total_cents": {"type": "integer", "minimum": 0}, "order_id": {"type": "string"},
          "items": {"type": "array", "items": {"type": "string"}}, "error": {"type": "string"},
          "refunded": {"type": "boolean"}}
PARAMETERS = {"order_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 0},
              "page": {"type": "integer", "minimum": 1}, "reason": {"type": "string", "enum": ["late", "broken"]}}


@st.composite
def tools(draw, name: str) -> dict:
    params = draw(st.lists(st.sampled_from(sorted(PARAMETERS)), max_size=3, unique=True))
    function = {"name": name, "description": draw(texts),
                "parameters": {"type": "object", "properties": {p: PARAMETERS[p] for p in params},
                               "required": draw(st.lists(st.sampled_from(params), unique=True)) if params else []}}
    if draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=5, unique=True))
        function["response"] = {"type": "object", "properties": {k: FIELDS[k] for k in keys},
                                "required": draw(st.lists(st.sampled_from(keys), unique=True))}
    return {"type": "function", "function": function}


records = st.fixed_dictionaries({"id": st.sampled_from(["ORD-12", "ORD-23411", "ORD-9"]),
                                 "total_cents": st.integers(0, 10**6), "status": st.sampled_from(["shipped", "ok"])})
states = st.fixed_dictionaries({}, optional={"orders": st.lists(records, max_size=3), "note": texts}) | texts


@st.composite
def worlds(draw) -> WorldSpec:
    count = draw(st.integers(1, 2))
    data = {"name": draw(st.sampled_from(["shop", "w", "Ünïcode world"])), "task": draw(texts),
            "initial_state": draw(states), "tools": [draw(tools(f"t{i}")) for i in range(count)],
            "rules": draw(st.lists(rules, max_size=4)), "directives": draw(st.lists(texts, max_size=2))}
    try:
        return parse_world(data)
    except InvalidInput:  # the strategy's own mistake (a check naming a field no schema has): not this test's
        assume(False)


@st.composite
def stepped(draw) -> tuple[WorldSpec, Call, dict]:
    """A world, a call of one of its tools (arguments fitting or not), and anchors on its response's fields (a
    message among them when the tool has one)."""
    world = draw(worlds())
    tool = draw(st.sampled_from(world.tools))
    arguments = {name: draw(st.sampled_from(["ORD-12", "ORD-77", 5, -1, "late", True]))
                 for name in draw(st.lists(st.sampled_from(sorted(PARAMETERS)), max_size=2, unique=True))}
    keys = sorted((tool.response or {}).get("properties", {}))
    anchors = {}
    if "message" in keys and draw(st.booleans()):
        anchors["message"] = draw(texts)
    if "status" in keys and draw(st.booleans()):
        anchors["status"] = draw(st.sampled_from(["ok", "error"]))
    return world, Call(tool.name, arguments), anchors


others = {"status": st.sampled_from(["ok", "error", 3]), "total_cents": st.integers(-5, 10**6), "order_id": texts}
answers = st.fixed_dictionaries({"message": texts}, optional=others) | st.fixed_dictionaries({}, optional=others) \
    | st.lists(texts, max_size=2) | texts


# -- the doors ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory, one_thread):
    folder = tmp_path_factory.mktemp("doors")
    store = open_store(folder / "studio.db")
    seed_first_run(store)
    backend = load_backend()
    server, url = serve(WorldModelService.create(backend, store=store, free_tokens=16))
    yield httpx.Client(base_url=url, timeout=120), folder
    server.should_exit = True


def test_the_check_behind_every_report_reads_any_world_and_any_answer():
    seen = {"text rules": 0, "messages": 0}

    @runs(400)
    @given(stepped(), answers)
    def one(case, answer):
        world, call, _ = case
        seen["text rules"] += any(rule.check is None for rule in world.rules)
        seen["messages"] += isinstance(answer, dict) and "message" in answer
        report = check_step(world, call, json.dumps(answer))
        json.dumps(report.to_json())

    one()
    assert seen["text rules"] > 100 and seen["messages"] > 100


def test_the_cli_checks_and_generates_in_any_world_with_no_traceback(tmp_path):
    codes = []

    @runs(60)
    @given(stepped(), answers)
    def check(case, answer):
        world, call, anchors = case
        world_file, call_file, response_file = write_case(tmp_path, world, call, answer)
        result = runner.invoke(cli, ["check", world_file, "--call", call_file, "--response", response_file,
                                     *anchor_options(anchors)])
        assert result.exit_code in (0, 1, 2) and not _crashed(result), result.output[-2000:]
        codes.append(result.exit_code)

    @runs(25)
    @given(stepped())
    def generate(case):
        world, call, anchors = case
        world_file, call_file, _ = write_case(tmp_path, world, call, {})
        result = runner.invoke(cli, ["generate", world_file, "--call", call_file, *anchor_options(anchors),
                                     "--steps", "2", "--json"])
        assert result.exit_code in (0, 1, 2) and not _crashed(result), result.output[-2000:]
        codes.append(result.exit_code)

    check()
    generate()
    assert codes.count(0) + codes.count(1) > 40


def test_simulate_steps_any_saved_world(studio, tmp_path):
    ctx = open_context(tmp_path / "simulate.db", None, None)  # the studio's own context: its store and model
    answered = []

    @runs(50)
    @given(stepped())
    def one(case):
        world, call, anchors = case
        world_id = save_world_version(ctx.store, world).id
        pinned = [Anchor(path, value) for path, value in anchors.items()]
        try:
            *_, last = run_simulation(ctx, world_id, call, pinned, SamplerSettings(steps=2))
        except InvalidInput:
            return
        answered.append(last.generation.samples[0].checks.to_json())

    one()
    assert len(answered) > 30


@pytest.mark.parametrize("door, examples", [("step", 160), ("proxy", 160), ("chat", 160)])
def test_http_answers_any_world_with_no_server_error(studio, door, examples):
    api, _ = studio
    codes = []

    @runs(examples)
    @given(stepped())
    def one(case):
        world, call, anchors = case
        if door == "step":
            body = {"world": world.to_json(), "call": call.to_json(), "anchors": anchors, "sampler": {"steps": 2}}
            path = "/v1/world/step"
        elif door == "proxy":  # the paper's plugin: the world travels as the system prompt, its rules as text
            paper = patronus_chat(world, call)["messages"]
            state, action = paper[1]["content"][len("State: "):].split("\n\nAction: ")
            body = {"input": {"system_prompt": paper[0]["content"], "state": json.loads(state),
                              "action": json.loads(action), "max_tokens": 64}}
            path = "/v1/world/proxy"
        else:
            body = {"messages": render_chat(world, call)["messages"], "max_tokens": 64}
            path = "/v1/chat/completions"
        reply = api.post(path, json=body)
        assert reply.status_code < 500, (path, json.dumps(body)[:600], reply.text[:600])
        codes.append(reply.status_code)

    one()
    print(door, {code: codes.count(code) for code in sorted(set(codes))})
    assert codes.count(200) > examples // 2


def test_a_server_error_keeps_the_keep_alive_connection(studio):
    """A route that fails unforeseen answers a JSON 500, and the same connection answers the next request."""
    from wmstudio.serve.server import create_app

    service = WorldModelService.create(load_backend(), free_tokens=8)
    app = create_app(service, openenv=False)

    @app.get("/v1/fails")
    def fails() -> None:
        raise RuntimeError("an unforeseen bug")

    server, url = serve(service, app)
    try:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            replies = []
            for path in ("/v1/fails", "/v1/models", "/v1/fails", "/v1/health"):
                conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
                replies.append(read_reply(conn))
        assert [status for status, _ in replies] == [500, 200, 500, 200]
        assert "log has the details" in json.loads(replies[0][1])["detail"][0]["msg"]
    finally:
        server.should_exit = True


# -- helpers ------------------------------------------------------------------------------------------------------

def write_case(folder: Path, world: WorldSpec, call: Call, answer) -> tuple[str, str, str]:
    """The world, call and answer as the files `check` and `generate` read."""
    files = {"world.json": world.dumps(), "call.json": json.dumps(call.to_json()), "response.json": json.dumps(answer)}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return tuple(str(folder / name) for name in files)


def anchor_options(anchors: dict) -> list[str]:
    return [f"--anchor={path}={json.dumps(value)}" for path, value in anchors.items()]


def _crashed(result) -> bool:
    """Whether the command ended in a traceback (an exception other than its own exit)."""
    return result.exception is not None and not isinstance(result.exception, SystemExit)
