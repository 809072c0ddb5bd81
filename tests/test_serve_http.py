"""The world model over HTTP (serve/): a plain httpx client exercises the world step, the paper's proxy payload
and OpenAI chat completions (plain and streamed) on a real uvicorn server; bad payloads are 422s naming the
field; the API key, the body limit and the loopback rule hold; `wmstudio serve-wm` runs as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from serving import free_port, wait_for_http

from wmstudio.model.serving.backends import load_backend
from wmstudio.serve.server import create_app, server_config
from wmstudio.serve.service import WorldModelService
from wmstudio.store import open_store
from wmstudio.store.seeding import demo_worlds, seed_first_run

KEY = "test-key-123"
STATE = [{"role": "user", "content": "Where is my order ORD-23411?"}]
ACTION = [{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "get_order", "arguments": json.dumps({"order_id": "ORD-23411"})}}]}]
STEP = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}}


def serve(service: WorldModelService, app=None) -> tuple[uvicorn.Server, str]:
    """A real uvicorn server of `app` (default: `create_app(service)`) on a free loopback port, in a thread."""
    port = free_port()
    server = uvicorn.Server(server_config(app or create_app(service), "127.0.0.1", port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("serve") / "studio.db")
    seed_first_run(store)
    return store


@pytest.fixture(scope="module")
def api(store, one_thread):
    retail = next(world for world in demo_worlds() if world.name == "retail")
    service = WorldModelService.create(load_backend(), batching=True, store=store, world=retail,
                                       max_body_bytes=200_000)
    server, url = serve(service)
    yield httpx.Client(base_url=url, timeout=120)
    server.should_exit = True


def locs(reply: httpx.Response) -> list[str]:
    assert reply.status_code == 422, reply.text
    return [".".join(str(part) for part in item["loc"][1:]) for item in reply.json()["detail"]]


def test_world_step_by_saved_name_and_by_object_answers_with_a_checked_response(api):
    reply = api.post("/v1/world/step", json={**STEP, "anchors": {"status": "error"}})
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert set(data) >= {"response", "checks", "timing_ms", "model"}
    assert json.loads(data["response"])["status"] == "error"  # the pinned anchor holds
    assert data["checks"]["json_valid"] and data["checks"]["anchor_violations"] == []
    world = next(w for w in demo_worlds() if w.name == "retail").to_json()
    by_object = api.post("/v1/world/step", json={**STEP, "world": world, "anchors": {"status": "error"}}).json()
    assert by_object["response"] == data["response"]  # the same world, the same greedy answer
    samples = api.post("/v1/world/step", json={**STEP, "sampler": {"samples": 3, "temperature": 1.0}}).json()
    assert len(samples["samples"]) == 3 and samples["response"] == samples["samples"][0]["response"]


def test_bad_world_step_payloads_are_422s_naming_each_field(api):
    assert locs(api.post("/v1/world/step", json={"call": {"arguments": {}}, "sampler": {"temperature": 9},
                                                  "colour": 1})) == ["colour", "world", "call.name",
                                                                     "sampler.temperature"]
    assert locs(api.post("/v1/world/step", json={**STEP, "anchors": {"status": "processing"}})) == ["anchors.status"]
    assert locs(api.post("/v1/world/step", json={**STEP, "world": "atlantis"})) == ["world"]
    assert locs(api.post("/v1/world/step", json={**STEP, "call": {"name": "launch_rocket"}})) == ["call.name"]
    assert locs(api.post("/v1/world/step", json={**STEP, "history": [{"call": {}}]})) == ["history.0"]
    reply = api.post("/v1/world/step", content=b'{"world": "retail", "call": ', headers={"content-type": "application/json"})
    assert reply.status_code == 422 and "not JSON" in reply.json()["detail"][0]["msg"]


def test_the_papers_proxy_payload_round_trips(api):
    payload = {"input": {"system_prompt": "You simulate the shop's API.", "state": STATE, "action": ACTION,
                         "max_tokens": 2048, "num_diffusion_steps": 1}}
    reply = api.post("/v1/world/proxy", json=payload)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert set(data) == {"generated_text", "usage", "wmstudio"}
    assert data["wmstudio"]["grounding"] == "none" and data["wmstudio"]["sources"]["state"] == "world retail"
    answer = json.loads(data["generated_text"])  # the server's world knows get_order: a skeleton answer
    assert answer["order_id"] == "ORD-23411" and answer["status"] in ("ok", "error")
    as_text = {"input": {**payload["input"], "state": json.dumps(STATE), "action": json.dumps(ACTION)}}
    assert api.post("/v1/world/proxy", json=as_text).json()["generated_text"] == data["generated_text"]
    assert locs(api.post("/v1/world/proxy", json={"input": {"state": STATE, "max_tokens": 0}})) == \
        ["input.action", "input.max_tokens"]


def test_chat_completions_plain_and_streamed_agree(api):
    refund = [{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "refund_order", "arguments": json.dumps({"order_id": "ORD-22930", "amount_cents": 100})}}]}]
    # a refund of a delivered order, denoised over steps (a lookup's or a listing's answer is written from the state
    # in one frame)
    user = {"role": "user", "content": f"State: {json.dumps(STATE)}\n\nAction: {json.dumps(refund)}"}
    body = {"model": "anything", "messages": [user], "temperature": 0}
    reply = api.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    content = data["choices"][0]["message"]["content"]
    assert data["object"] == "chat.completion" and data["usage"]["completion_tokens"] > 0
    assert json.loads(content)["order_id"] == "ORD-22930" and data["wmstudio"]["checks"]["json_valid"]
    deltas, finish = [], None
    with api.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in stream.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    stages = []
    for line in lines[:-1]:
        chunk = json.loads(line[len("data: "):])
        choice = chunk["choices"][0]
        deltas.append(choice["delta"].get("content", ""))
        finish = choice["finish_reason"] or finish
        if choice["delta"].get("content"):
            stages.append(chunk["wmstudio"])
    assert "".join(deltas) == content and finish == "stop"
    assert len([d for d in deltas if d]) >= 2  # the answer arrived in pieces as the canvas settled, not at the end
    # by the Simulate tab's stages: what the helpers wrote before denoising (who wrote how much), then the model's steps
    assert stages[0]["stage"] == "before denoising" and sum(stages[0]["written_by"].values()) > 0
    steps = [int(s["stage"].removeprefix("denoising step ")) for s in stages if s["stage"] != "before denoising"]
    assert steps and steps == sorted(steps)
    lookup = [{**refund[0], "tool_calls": [{"id": "c2", "type": "function", "function": {
        "name": "get_order", "arguments": json.dumps({"order_id": "ORD-22930"})}}]}]
    looked = {**body, "messages": [{**user, "content": f"State: {json.dumps(STATE)}\n\nAction: {json.dumps(lookup)}"}]}
    whole = api.post("/v1/chat/completions", json=looked).json()["choices"][0]["message"]["content"]
    with api.stream("POST", "/v1/chat/completions", json={**looked, "stream": True}) as stream:
        pieces = [json.loads(line[len("data: "):])["choices"][0]["delta"].get("content", "")
                  for line in stream.iter_lines() if line.startswith("data: {")]
    pieces = [piece for piece in pieces if piece]  # a lookup settles in one frame: it still streams field by field
    assert "".join(pieces) == whole and len(pieces) >= len(json.loads(whole))
    free = api.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "list the files"}],
                                                  "max_tokens": 16}).json()
    assert free["wmstudio"]["mode"] == "free" and free["usage"]["completion_tokens"] <= 16
    assert locs(api.post("/v1/chat/completions", json={"messages": [{"role": "robot", "content": "hi"}],
                                                       "temperature": "hot"})) == ["messages.0.role", "temperature"]


def test_an_api_key_guards_every_v1_call_and_bodies_over_the_limit_are_refused(store, api):
    assert api.post("/v1/world/step", content=b"x" * 300_000).status_code == 413
    keyed = WorldModelService.create(load_backend(), store=store, api_key=KEY)
    server, url = serve(keyed)
    try:
        assert httpx.post(f"{url}/v1/world/step", json=STEP).status_code == 401
        assert httpx.post(f"{url}/v1/world/step", json=STEP, headers={"Authorization": "Bearer nope"}).status_code \
            == 401
        assert httpx.post(f"{url}/v1/world/step", json=STEP, headers={"Authorization": f"Bearer {KEY}"},
                          timeout=60).status_code == 200
        assert httpx.get(f"{url}/v1/models", headers={"X-API-Key": KEY}).json()["data"][0]["object"] == "model"
        assert httpx.get(f"{url}/health").status_code == 200  # a load balancer's probe needs no key
    finally:
        server.should_exit = True


@pytest.mark.slow
def test_serve_wm_runs_as_a_process_and_refuses_an_open_host_without_a_key(tmp_path):
    env = {**os.environ, "WMSTUDIO_HOME": str(tmp_path)}
    refused = subprocess.run([sys.executable, "-m", "wmstudio.cli", "serve-wm", "--host", "0.0.0.0"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--api-key" in refused.stderr
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "serve-wm", "--port", str(port), "--db",
                               str(tmp_path / "s.db")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(f"{url}/v1/health", process=server)
        reply = httpx.post(f"{url}/v1/world/step", json=STEP, timeout=60)  # "retail" was seeded on first run
        assert reply.status_code == 200 and json.loads(reply.json()["response"])["order_id"] == "ORD-23411"
        assert httpx.get(f"{url}/v1/health").json()["batching"] is False  # auto: batching on a GPU only
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.slow
def test_the_studio_serves_the_world_model_api_beside_itself(tmp_path):
    port = free_port()
    env = {**os.environ, "WMSTUDIO_HOME": str(tmp_path), "GRADIO_ANALYTICS_ENABLED": "False"}
    studio = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "app.py"), "--port", str(port), "--db", str(tmp_path / "s.db")],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(f"{url}/v1/health", process=studio)
        reply = httpx.post(f"{url}/v1/world/step", json=STEP, timeout=60)
        assert reply.status_code == 200 and json.loads(reply.json()["response"])["order_id"] == "ORD-23411"
        assert "World Model Studio" in httpx.get(f"{url}/config", timeout=10).text  # and the studio itself
    finally:
        studio.terminate()
        studio.wait(30)


def test_episodes_answered_by_a_served_world_model_match_the_local_one_and_errors_say_why(api, store):
    from wmstudio.model.serving.remote_world_model import RemoteWorldModel, WorldModelUnavailable
    from wmstudio.problems import InvalidInput
    from wmstudio.train.agent.environments import WORLD_MODEL, run_episode
    from wmstudio.train.agent.scenarios import HELDOUT, demo_scenarios, split_of
    from wmstudio.train.agent.scripted_policies import scripted_policy
    from wmstudio.world.spec import Call

    remote, local = RemoteWorldModel(str(api.base_url)), load_backend()
    expert = scripted_policy("expert", 0)
    for scenario in split_of(demo_scenarios(), HELDOUT)[::6]:  # five of the held-out scenarios
        served, _ = run_episode(expert, scenario, WORLD_MODEL, remote)
        here, _ = run_episode(expert, scenario, WORLD_MODEL, local)
        assert [s.response for s in served.steps] == [s.response for s in here.steps] and served.steps
    with pytest.raises(WorldModelUnavailable, match="could not be reached"):  # a run stops: no answer at all
        run_episode(expert, scenario, WORLD_MODEL, RemoteWorldModel(f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(InvalidInput, match="not an http"):
        RemoteWorldModel("localhost:8000")
    with pytest.raises(InvalidInput, match="no tool 'launch_rocket'") as refused:  # a call the world refuses
        remote.answer(scenario.world, Call("launch_rocket", {}))
    assert refused.value.problems[0].path == "call.name"


def test_evaluate_can_play_its_episodes_against_a_served_world_model(api, tmp_path):
    from typer.testing import CliRunner

    from wmstudio.cli import app

    db = str(tmp_path / "studio.db")
    common = ["evaluate", "--policy", "expert", "--episodes", "4", "--db", db, "--json"]
    served = CliRunner().invoke(app, [*common, "--world-model-url", str(api.base_url)])
    here = CliRunner().invoke(app, common)
    assert served.exit_code == here.exit_code == 0, served.output
    assert json.loads(served.stdout)["estimate"] == json.loads(here.stdout)["estimate"]
    gone = CliRunner().invoke(app, [*common, "--world-model-url", f"http://127.0.0.1:{free_port()}"])
    assert gone.exit_code == 2 and "could not be reached" in gone.output
