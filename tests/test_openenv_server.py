"""The OpenEnv environment (serve/openenv_server.py): `openenv-core`'s own client drives reset / step / state
for one curriculum scenario end to end over its WebSocket session, the scenario's steering holding."""

from __future__ import annotations

import json

import pytest
from openenv.core.generic_client import GenericEnvClient
from test_serve_http import serve

from wmstudio.model.serving.backends import load_backend
from wmstudio.serve.service import WorldModelService
from wmstudio.store import MadeBy, append_step, create_rollout, open_store
from wmstudio.store.curricula import create_curriculum_version
from wmstudio.store.rollouts import set_status
from wmstudio.store.seeding import demo_worlds
from wmstudio.store.worlds import save_world_version
from wmstudio.train.agent.scenarios import demo_scenarios, split_of
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor


@pytest.fixture(scope="module")
def served(tmp_path_factory, one_thread):
    """The OpenEnv server over a store holding one curriculum of rollouts; yields (its URL, the store)."""
    store = open_store(tmp_path_factory.mktemp("openenv") / "studio.db")
    retail = save_world_version(store, next(w for w in demo_worlds() if w.name == "retail"))
    rollout = create_rollout(store, retail.id, "the order lookup fails")
    append_step(store, rollout.id, Call("get_order", {"order_id": "ORD-23411"}),
                '{"status": "error", "error": "timeout"}', MadeBy.by_model("m", {}, 0, [Anchor("status", "error")]))
    set_status(store, rollout.id, "accepted")
    create_curriculum_version(store, "lookups", [rollout.id])
    server, url = serve(WorldModelService.create(load_backend(), store=store))
    yield f"{url}/openenv", store
    server.should_exit = True


@pytest.fixture(scope="module")
def url(served):
    return served[0]


def test_an_openenv_client_plays_one_scenario_end_to_end(url):
    with GenericEnvClient(base_url=url).sync() as env:
        start = env.reset(curriculum="lookups", scenario=0)
        assert not start.done
        assert "the order lookup fails" in start.observation["task"]
        assert [tool["function"]["name"] for tool in start.observation["tools"]][:1] == ["get_order"]

        answered = env.step({"tool": "get_order", "arguments": {"order_id": "ORD-23411"}})
        response = json.loads(answered.observation["response"])
        assert response["status"] == "error"  # the scenario's steering: its rollout pinned status=error here
        assert response["order_id"] == "ORD-23411" and answered.reward == 1.0 and not answered.done
        assert answered.observation["grounding"] == "none"
        assert answered.observation["checks"]["anchor_violations"] == []

        refused = env.step({"tool": "launch_rocket", "arguments": {}})
        assert "get_order" in refused.observation["error"] and refused.reward == 0.0

        state = env.state()
        assert state["curriculum"] == "lookups" and state["step_count"] == 2
        assert [c["call"]["name"] for c in state["calls"]] == ["get_order"]

        assert env.step({"final_answer": "Your order lookup failed; please try later."}).done


def test_a_demo_scenario_rewards_the_episode_by_its_success_condition(url):
    with GenericEnvClient(base_url=url).sync() as env:
        start = env.reset(curriculum="demo", split="heldout", scenario=4)  # the retail world's first
        assert "order" in start.observation["task"]
        state = env.state()
        assert state["curriculum"] == "demo" and state["world"] == "retail"
        scenario = split_of(demo_scenarios(), "heldout")[4]
        answered = env.step({"tool": scenario.target.name, "arguments": scenario.target.arguments})
        status = json.loads(answered.observation["response"])["status"]
        verdict = "Done" if status == "ok" else "Could not"
        ended = env.step({"final_answer": f"{verdict}: {scenario.task}"})
        expected = (status == "ok") == scenario.feasible  # what the world model said decides the episode
        assert ended.done and ended.reward == (1.0 if expected else 0.0)
        wrong = env.reset(curriculum="demo", split="heldout", scenario=4)
        assert not wrong.done
        assert env.step({"final_answer": "Done without calling anything"}).reward == 0.0


def test_a_demo_scenario_edited_in_the_studio_is_what_the_server_plays(served, monkeypatch, tmp_path):
    from wmstudio.store import list_scenarios, update_scenario
    from wmstudio.train.agent.jobs import demo_curriculum

    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    url, store = served
    first = split_of(demo_scenarios(), "heldout")[0]
    row = next(r for r in list_scenarios(store, demo_curriculum(store).id) if r.key == first.id)
    update_scenario(store, row.id, task="Check the flight first, then " + first.task)
    with GenericEnvClient(base_url=url).sync() as env:
        start = env.reset(curriculum="demo", split="heldout", scenario=0)
        assert start.observation["task"].startswith("Check the flight first, then ")


def test_the_documented_openenv_example_prints_the_order_its_scenario_concerns(url):
    import contextlib
    import io
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "http-api.md").read_text()
    block = re.search(r"^## OpenEnv\n.*?```python\n(.*?)```", page, re.DOTALL | re.MULTILINE).group(1)
    assert "http://127.0.0.1:8000/openenv" in block
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.replace("http://127.0.0.1:8000/openenv", url), "docs/http-api.md", "exec"), {})
    task, response = printed.getvalue().strip().split("\n")
    assert "ORD-35137" in task
    answer = json.loads(response)
    assert answer["order_id"] == "ORD-35137" and answer["status"] == "ok"  # what the page says it prints


def test_a_done_episode_answers_no_more_steps_until_the_next_reset(url):
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(curriculum="demo", split="heldout", scenario=4)
        assert env.step({"final_answer": "Done."}).done
        after = env.step({"final_answer": "Done: the refund went through."})
        assert after.done and after.reward == 0.0 and "reset" in after.observation["error"]
        assert env.step({"tool": "get_order", "arguments": {"order_id": "ORD-35137"}}).observation["response"] is None
        env.reset(curriculum="demo", split="heldout", scenario=4)
        for _ in range(7):  # MAX_TURNS = 8: the eighth step ends the episode
            assert not env.step({"tool": "launch_rocket", "arguments": {}}).done
        assert env.step({"tool": "launch_rocket", "arguments": {}}).done
        assert "reset" in env.step({"tool": "get_order", "arguments": {}}).observation["error"]


def test_a_bad_reset_over_http_is_a_422_naming_the_field(url):
    import httpx

    for body, field in (({"curriculum": "demo", "scenario": -1}, "scenario"), ({"scenario": "x"}, "scenario"),
                        ({"curriculum": "demo", "scenario": 10**30}, "scenario"), ({"split": "bogus"}, "split"),
                        ({"curriculum": "no-such-curriculum"}, "curriculum"), ({"curriculum": 5}, "curriculum")):
        reply = httpx.post(f"{url}/reset", json=body, timeout=30)
        assert reply.status_code == 422, (body, reply.text)
        assert reply.json()["detail"][0]["loc"] == ["body", field], reply.text
