"""Real clients' requests over HTTP, answered in the environment the request states: the Patronus GRPO plugin's
rollout as ms-swift drives it (the state ends with the pending call, in AppWorld's text form and OpenAI's), an
order only the request's state holds coming back on the proxy, the chat endpoint and the world step, grounding
`oracle` only when named, and a refused request leaving a line in the server's log."""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import replace

import httpx
import pytest
from test_serve_http import serve

from wmstudio.model.serving.backends import load_backend
from wmstudio.serve.service import WorldModelService
from wmstudio.store import open_store
from wmstudio.store.seeding import demo_worlds, seed_first_run
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.patronus import patronus_chat
from wmstudio.world.prompt.render import render_chat
from wmstudio.world.rules.cel import Rule
from wmstudio.world.spec import Call

RETAIL = next(world for world in demo_worlds() if world.name == "retail")
NEW_ORDER = {"id": "ORD-77777", "status": "shipped", "placed_on": "2025-07-10", "delivered_on": "",
             "total_cents": 4599, "refunded_cents": 0, "items": [{"sku": "SKU-1111", "name": "Coffee Mug", "qty": 3,
                                                                  "price_cents": 1533}]}
LOOKUP = Call("get_order", {"order_id": "ORD-77777"})


@pytest.fixture(scope="module")
def api(tmp_path_factory, one_thread):
    store = open_store(tmp_path_factory.mktemp("environment") / "studio.db")
    seed_first_run(store)
    service = WorldModelService.create(load_backend(), store=store, world=RETAIL)  # the paper's `--world`
    server, url = serve(service)
    yield httpx.Client(base_url=url, timeout=180)
    server.should_exit = True


def task_world():
    """The retail world as one task's request carries it: a state holding an order the served world lacks."""
    state = copy.deepcopy(RETAIL.initial_state)
    state["orders"] = [*state["orders"][:2], NEW_ORDER]
    return replace(RETAIL, initial_state=state)


def the_order(text: str) -> dict:
    answer = json.loads(text)
    assert answer["status"] == "ok", text
    assert answer["order_id"] == "ORD-77777" and answer["total_cents"] == 4599, text
    return answer


def test_an_order_only_the_request_states_comes_back_on_the_proxy_the_chat_and_the_step(api):
    assert NEW_ORDER["id"] not in json.dumps(RETAIL.initial_state)
    paper = patronus_chat(task_world(), LOOKUP)["messages"]
    proxy = api.post("/v1/world/proxy", json={"input": {
        "system_prompt": paper[0]["content"], "state": json.loads(paper[1]["content"][len("State: "):].split(
            "\n\nAction: ")[0]), "action": json.loads(paper[1]["content"].split("\n\nAction: ")[1])}}).json()
    the_order(proxy["generated_text"])
    assert proxy["wmstudio"]["sources"]["state"] == "request" and proxy["wmstudio"]["grounding"] == "none"

    ours = render_chat(task_world(), LOOKUP)["messages"]  # our layout, as `wmstudio prompt --format chat` writes it
    chat = api.post("/v1/chat/completions", json={"messages": ours}).json()
    the_order(chat["choices"][0]["message"]["content"])
    assert chat["wmstudio"]["sources"]["state"] == "request"
    assert chat["wmstudio"]["sources"]["tools"]["get_order"] == "request"  # our layout gives the schema whole

    step = api.post("/v1/world/step", json={"world": "retail", "state": task_world().initial_state,
                                            "call": LOOKUP.to_json()}).json()
    the_order(step["response"])
    assert step["sources"] == {"world": "retail", "state": "request", "task": "world retail",
                               "rules": "world retail", "directives": "none",
                               "tools": {tool.name: "world retail" for tool in RETAIL.tools}}
    assert step["grounding"] == "none" and step["model"] == "wm-mdlm-small"  # a name, no filesystem path


def test_the_grpo_plugins_rollout_gets_the_tools_json_every_turn_in_both_forms(api):
    """As ms-swift runs the paper's AppWorld plugin: the agent's reply is appended to `messages` before `step()`,
    which posts the whole list as `state` and the reply's call again as `action`; the tool's answer goes back into
    the conversation (a `<tool_response>` user turn, or a `tool` message) before the next turn."""
    system = patronus_chat(task_world(), LOOKUP)["messages"][0]["content"]
    calls = [Call("list_orders", {}), LOOKUP, Call("cancel_order", {"order_id": "ORD-23411"})]
    for form in ("appworld", "openai"):
        messages = [{"role": "system", "content": "You are a shopping assistant. Call one tool per turn."},
                    {"role": "user", "content": "Find order ORD-77777 and cancel ORD-23411."}]
        for number, call in enumerate(calls):
            if form == "appworld":
                reply = {"role": "assistant", "content": json.dumps([{"name": call.name,
                                                                      "parameters": call.arguments}])}
                action = [{"name": call.name, "parameters": call.arguments}]
            else:
                reply = {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{number}", "type": "function",
                         "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]}
                action = [reply]
            messages.append(reply)
            answer = api.post("/v1/world/proxy", json={"input": {"system_prompt": system, "state": messages,
                                                                 "action": action, "max_tokens": 1024}})
            assert answer.status_code == 200, answer.text
            data = answer.json()
            response = json.loads(data["generated_text"])
            assert isinstance(response, dict) and "status" in response, data["generated_text"]
            assert data["wmstudio"]["sources"]["state_ended_with_the_call"] is True
            if call == LOOKUP:
                the_order(data["generated_text"])
            messages.append({"role": "user", "content": f"<tool_response>\n{data['generated_text']}\n</tool_response>"}
                            if form == "appworld" else
                            {"role": "tool", "tool_call_id": f"call_{number}", "content": data["generated_text"]})


PLUGIN_RULES = [  # a task's own rules as the plugin's system prompt writes them: text only, no CEL check anywhere
    "Refunds close 30 days after delivery; an expired refund says so in its message, naming the order.",
    "An order that has shipped cannot be cancelled (ORDER_SHIPPED).",
    "Amounts are in cents: $12.99 is 1299.",
]


def test_the_patronus_plugins_episode_loop_gets_every_turn_answered(api):
    """The paper's GRPO plugin over a whole episode, on one keep-alive connection: its tools' text rules in `##
    DOMAIN RULES` (none of them the served world's, so none has a check), the agent's reply appended to the state
    before each post (the pending call), the state growing by every answer. A plain-text rule once crashed the
    message check: 1 turn of 7 answered, the rest 500s and reset connections."""
    world = replace(task_world(), rules=[Rule(text) for text in PLUGIN_RULES])
    calls = [Call("list_orders", {}), LOOKUP, Call("refund_order", {"order_id": "ORD-77777", "amount_cents": 1299}),
             Call("get_order", {"order_id": "ORD-23411"}), Call("cancel_order", {"order_id": "ORD-23411"}),
             Call("refund_order", {"order_id": "ORD-23411", "amount_cents": 99_999}),
             Call("get_order", {"order_id": "ORD-00000"})]
    messages = [{"role": "system", "content": "You are a shopping assistant. Call one tool per turn."},
                {"role": "user", "content": "Refund $12.99 on ORD-77777, then cancel ORD-23411."}]
    history: list[HistoryStep] = []
    answered = []
    for number, call in enumerate(calls):
        system = patronus_chat(world, call, history)["messages"][0]["content"]
        assert "## DOMAIN RULES\n- Refunds close 30 days" in system
        reply = {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{number}", "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]}
        messages.append(reply)
        answer = api.post("/v1/world/proxy", json={"input": {"system_prompt": system, "state": messages,
                                                             "action": [reply], "max_tokens": 1024}})
        assert answer.status_code == 200, (number, answer.text[:500])
        data = answer.json()
        response = json.loads(data["generated_text"])
        assert isinstance(response, dict) and response.get("status") in ("ok", "error"), data["generated_text"]
        assert data["wmstudio"]["sources"]["rules"] == "request"
        answered.append(response)
        history.append(HistoryStep(call=call, response=data["generated_text"]))
        messages.append({"role": "tool", "tool_call_id": f"call_{number}", "content": data["generated_text"]})
    assert len(answered) == len(calls)
    assert any("message" in response for response in answered)  # the check that once crashed ran on each


def test_grounding_is_none_unless_oracle_is_named_and_a_refusal_is_logged(api, caplog):
    step = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}}
    oracle = api.post("/v1/world/step", json={**step, "sampler": {"grounding": "oracle"}})
    assert oracle.status_code == 200 and oracle.json()["grounding"] == "oracle"
    server_log = logging.getLogger("wmstudio.serve")  # it writes to stderr and does not propagate to caplog's root
    server_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="wmstudio.serve"):
            refused = api.post("/v1/world/step", json={**step, "sampler": {"grounding": True}})
    finally:
        server_log.removeHandler(caplog.handler)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "sampler", "grounding"]
    chat = api.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                                  "grounding": "Oracle"})
    assert chat.status_code == 422 and chat.json()["detail"][0]["loc"] == ["body", "grounding"]
    assert any("/v1/world/step -> 422: body.sampler.grounding" in record.getMessage() for record in caplog.records)


def test_our_own_rows_are_answered_by_the_chat_endpoint_and_the_proxy(api, tmp_path):
    """Rows of `wmstudio corpus` (every simulated world, our `State: History: ...` layout, grounding none or
    oracle), of the dataset export and of `wmstudio prompt --format chat|patronus`, sent as they are written."""
    import random

    from typer.testing import CliRunner

    from wmstudio.cli import app
    from wmstudio.locations import DEMO_WORLDS_DIR
    from wmstudio.world.corpus.rows import corpus_row
    from wmstudio.world.simulators import SIMULATORS

    rows = [corpus_row(SIMULATORS[name], random.Random(seed)) for seed, name in enumerate(sorted(SIMULATORS))]
    call = tmp_path / "call.json"
    call.write_text(json.dumps({"name": "get_order", "arguments": {"order_id": "ORD-23411"}}))
    for fmt in ("chat", "patronus"):
        printed = CliRunner().invoke(app, ["prompt", str(DEMO_WORLDS_DIR / "retail.json"), "--call", str(call),
                                           "--format", fmt])
        rows.append(json.loads(printed.stdout))
    for row in rows:
        system, user = row["messages"][0]["content"], row["messages"][1]["content"]
        chat = api.post("/v1/chat/completions", json={"messages": row["messages"][:2], "max_tokens": 512})
        assert chat.status_code == 200, chat.text
        assert chat.json()["wmstudio"]["mode"] == "skeleton"  # read as a world step, in the world the row states
        state, action = user[len("State: "):].rsplit("\n\nAction: ", 1)
        proxy = api.post("/v1/world/proxy", json={"input": {"system_prompt": system, "state": state, "action": action,
                                                            "repetition_penalty": 1.0}})  # the chat's default
        assert proxy.status_code == 200, proxy.text
        assert proxy.json()["generated_text"] == chat.json()["choices"][0]["message"]["content"]
