"""The studio's named API as a script sees it through gradio_client: `view_api` lists the API alone, with named,
typed parameters; worlds -> tools -> simulate -> save_step -> next_to_rate -> rate read JSON back; bad input is
an AppError naming the field; a training run starts and reports its status.

The whole studio (every tab) on a fresh SQLite file seeded with the demo worlds and the shipped world model."""

from __future__ import annotations

import json
import os
import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from serving import free_port

from wmstudio.store import get_annotator, get_rating, get_run, get_step, list_runs
from wmstudio.studio.context import open_context
from wmstudio.train.agent.jobs import cancel_job, job_alive
from wmstudio.ui.api import API_NAMES
from wmstudio.ui.studio import build_studio

pytestmark = pytest.mark.usefixtures("one_thread")
REFUND = {"order_id": "ORD-22930", "amount_cents": 500}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("WMSTUDIO_HOME", str(home))
    patch.delenv("SPACE_ID", raising=False)
    ctx = open_context(db=home / "studio.db")  # seeds the demo worlds and their example rollouts
    ctx.backend()
    app = build_studio(ctx)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False), ctx
    app.close()
    for run in list_runs(ctx.store):  # never leave a training process behind
        if run.pid and job_alive(run.id, ctx.store.path):
            os.kill(run.pid, 9)
    patch.undo()


def test_view_api_lists_the_named_api_alone_with_named_typed_parameters(studio):
    client, _ = studio
    endpoints = client.view_api(print_info=False, return_format="dict")
    named = endpoints["named_endpoints"]
    assert sorted(named) == sorted(f"/{name}" for name in API_NAMES) and len(named) <= 12
    assert endpoints["unnamed_endpoints"] == {}
    simulate = {p["parameter_name"]: p for p in named["/simulate"]["parameters"]}
    assert list(simulate)[:4] == ["world", "tool", "arguments", "anchors"]
    assert {"steps", "temperature", "samples", "seed", "copy_head", "grounding"} <= set(simulate)
    assert simulate["grounding"]["parameter_default"] == "none" and simulate["copy_head"]["parameter_default"] is True
    assert simulate["samples"]["python_type"]["type"] == "int" and not simulate["world"]["parameter_has_default"]
    for path, endpoint in named.items():
        assert endpoint["description"], path
        assert all(p["label"] == p["parameter_name"] for p in endpoint["parameters"]), path
        assert [r["label"] for r in endpoint["returns"]] == [path.strip("/")]
        assert endpoint["returns"][0]["python_type"]["type"] == "str", path  # JSON text
    assert client.predict("", api_name="/simulate_worlds")["choices"]  # the page's own events answer by name, unlisted


def call(client, endpoint: str, **inputs):
    """An endpoint's answer, read as the JSON text it is."""
    return json.loads(client.predict(**inputs, api_name=endpoint))


def test_worlds_tools_simulate_save_and_rate_read_json_back(studio):
    client, ctx = studio
    worlds = call(client, "/worlds")
    retail = next(w for w in worlds if w["name"] == "retail")
    assert {w["name"] for w in worlds} == {"airline", "filesystem", "payments", "records", "retail"}
    assert "refund_order" in retail["tools"] and retail["version"] == 1
    tools = {t["name"]: t for t in call(client, "/tools", world="retail")}
    assert tools["refund_order"]["parameters"]["required"] == ["order_id", "amount_cents"]
    assert tools["refund_order"]["response"]["properties"]["status"]["enum"] == ["ok", "partial", "error"]

    answer = call(client, "/simulate", world="retail", tool="refund_order", arguments=REFUND,
                  anchors={"status": "error"})
    response = json.loads(answer["response"])
    assert response["status"] == "error" and response["order_id"] == "ORD-22930"
    assert answer["checks"]["json_valid"] and answer["checks"]["anchor_violations"] == []
    assert answer["grounding"] == "none" == answer["settings"]["grounding"]
    assert answer["anchors"] == [{"path": "status", "value": "error"}]
    assert answer["call"] == {"name": "refund_order", "arguments": REFUND}
    assert answer["world"]["id"] == retail["id"] and len(answer["samples"]) == 1
    assert answer["steps"] == 0 and response["refund_id"] == ""  # a pinned refusal: the helpers decide every slot

    saved = call(client, "/save_step", simulation=answer["simulation"], title="refund refused over the API")
    step = get_step(ctx.store, saved["step_id"])
    assert saved["step"] == 1 and step.response == answer["response"] == saved["response"]
    assert saved["check_ok"] == step.check_ok and step.provenance().anchors == [{"path": "status", "value": "error"}]

    item = call(client, "/next_to_rate", annotator="ada")
    assert item["step_id"] is not None and "model" not in item  # blind: who made it is not shown
    rated = call(client, "/rate", step_id=saved["step_id"], realism=4, outcome_correctness=2, training_utility=5,
                 annotator="ada", failure_tags=["contradiction"], note="window")
    assert rated["annotator"] == "ada" and rated["progress"]["rated"] == 1
    rating = get_rating(ctx.store, get_annotator(ctx.store, "ada").id, saved["step_id"])
    assert (rating.realism, rating.outcome_correctness, rating.training_utility) == (4, 2, 5)
    assert rating.failure_tags == ["contradiction"] and rating.note == "window"


def test_simulate_takes_the_sampler_settings_by_name_and_reports_the_grounding(studio):
    client, _ = studio
    answer = call(client, "/simulate", world="retail", tool="get_order", arguments={"order_id": "ORD-22930"},
                  samples=2, temperature=1.0, seed=3, copy_head=False, grounding="oracle")
    assert answer["grounding"] == "oracle" and len(answer["samples"]) == 2
    assert answer["settings"].items() >= {"samples": 2, "temperature": 1.0, "seed": 3, "copy_head": False}.items()
    listing = call(client, "/simulate", world="filesystem", tool="ls", arguments={"path": "/home"})
    assert listing["call"]["arguments"] == {"path": "/home"}  # gradio_client would take it for a file: JSON text


@pytest.mark.parametrize(("endpoint", "inputs", "words"), [
    ("/tools", {"world": "atlantis"}, "world: no world 'atlantis'"),
    ("/simulate", {"world": "retail", "tool": "teleport"}, "call.name: no tool 'teleport'"),
    ("/simulate", {"world": "retail", "tool": "get_order", "samples": 99}, "samples: must be a whole number"),
    ("/simulate", {"world": "retail", "tool": "get_order", "anchors": {"colour": 1}}, "anchor colour"),
    ("/simulate", {"world": "retail", "tool": "get_order", "grounding": "peek"}, "grounding: 'peek'"),
    ("/simulate", {"world": "retail", "tool": "get_order", "arguments": '{"order_id": 1e400}'},
     "arguments: the number 1e400 is too large to hold"),
    ("/save_step", {"simulation": "nope"}, "simulation: no simulation 'nope'"),
    ("/rate", {"step_id": 1, "realism": 7, "outcome_correctness": 3, "training_utility": 3, "annotator": "ada"},
     "realism: must be a whole number from 1 to 5"),
    ("/rate", {"step_id": 1, "realism": 3, "outcome_correctness": 3, "training_utility": 3},
     "annotator: type your name"),
    ("/start_run", {"max_steps": 0}, "Max steps: 0 is not a whole number"),
    ("/start_run", {"env": "moon"}, "Environment: choose one of"),
], ids=["unknown world", "unknown tool", "bad sampler setting", "anchor on a missing field", "unknown grounding",
        "arguments as JSON text over a limit", "unknown simulation", "score out of range", "nobody to rate as", "zero steps", "unknown environment"])
def test_bad_input_is_an_app_error_naming_the_field(studio, endpoint, inputs, words):
    client, _ = studio
    with pytest.raises(AppError) as err:
        client.predict(**inputs, api_name=endpoint)
    assert words in str(err.value) and "Traceback" not in str(err.value)


def test_start_run_starts_a_background_run_that_run_status_reports(studio):
    client, ctx = studio
    started = call(client, "/start_run", curriculum="demo", env="simulator", max_steps=1)
    run_id = started["run_id"]
    assert started["status"] in ("queued", "running") and started["config"]["env"] == "simulator"
    assert f"Started run #{run_id}" in started["message"]
    cancel_job(ctx.store, run_id)
    deadline = time.monotonic() + 60
    while call(client, "/run_status", run_id=run_id)["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    status = call(client, "/run_status", run_id=run_id)
    assert status["status"] == get_run(ctx.store, run_id).status in ("cancelled", "finished", "failed")
    assert isinstance(status["metrics"], dict)
