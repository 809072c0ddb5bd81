"""The Rollouts tab over HTTP: seeded content, a 2-step rollout made by the world model, branching, hand edits,
status and tags, filters, curricula exported as a dataset folder that `datasets` loads and that imports back.

Launches the real Gradio app (only this tab) on a free loopback port with a tiny random world model saved to
disk, a seeded SQLite file, and drives it with gradio_client."""

from __future__ import annotations

import json
import zipfile

import gradio as gr
import pytest
import torch
from gradio_client import Client, handle_file
from serving import free_port

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.problems import InvalidInput
from wmstudio.store import (
    filter_rollouts,
    get_rollout,
    get_step,
    list_worlds,
    open_store,
    rollout_steps,
    rollout_tags,
    step_trace,
)
from wmstudio.store.seeding import seed_first_run
from wmstudio.studio.context import StudioContext
from wmstudio.ui.rollouts_tab import build_rollouts_tab, generate_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.steering.anchors import parse_anchors


@pytest.fixture(scope="module")
def studio(tiny_model, demo_tokenizer, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("WMSTUDIO_HOME", str(home))
    patch.delenv("HF_TOKEN", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    store = open_store(home / "studio.db")
    seed_first_run(store)
    model = tiny_model(demo_tokenizer, home / "model", max_positions=8192)
    ctx = StudioContext(store=store, model=model, ar_model=None)
    with gr.Blocks() as app:
        build_rollouts_tab(ctx, app)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False), ctx
    app.close()
    torch.set_num_threads(threads)
    patch.undo()


def world_id(ctx: StudioContext, name: str) -> int:
    return next(w.latest.id for w in list_worlds(ctx.store) if w.name == name)


def search(client, world="", status="", tag="", text="", check="", page=1):
    table, info, page = client.predict(world, status, tag, text, check, page, api_name="/rollouts_search")
    return [dict(zip(table["headers"], row, strict=True)) for row in table["data"]], info


def seeded_rollout(ctx: StudioContext, world: str, number: int = 1) -> int:
    return next(r.id for r in filter_rollouts(ctx.store, world=world, tag="example", page_size=50).items
                if r.title.startswith(f"Example {number}:"))


def test_the_seeded_examples_are_listed_and_can_be_filtered(studio):
    client, _ = studio
    rows, info = search(client, tag="example")
    assert len(rows) == 10 and "**10** rollout(s)" in info
    rows, _ = search(client, world="retail", tag="example")
    assert len(rows) == 2 and {r["world"] for r in rows} == {"retail v1"}
    rows, _ = search(client, text="refund_order", tag="example")
    assert rows and {r["world"] for r in rows} == {"retail v1"}
    rows, info = search(client, tag="no such tag")
    assert rows == [] and "**0** rollout(s)" in info


def test_a_two_step_rollout_is_generated_with_the_earlier_steps_as_history(studio):
    client, ctx = studio
    rid, header, _, _, message = client.predict(world_id(ctx, "retail"), "two steps", api_name="/rollout_new")
    assert "two steps" in header and "retail" in header

    first = json.dumps({"name": "list_orders", "arguments": {"page": 1}})
    _, _, steps_md, _, message = client.predict(rid, first, "", 0.0, 7, api_name="/rollout_generate")
    assert "Step 1 generated" in message and "**Step 1**" in steps_md  # counted from 1, as in Simulate
    second = json.dumps({"name": "get_order", "arguments": {"order_id": "ORD-10001"}})
    _, _, steps_md, _, message = client.predict(rid, second, 'status="error"', 0.0, 8, api_name="/rollout_generate")
    assert "Step 2 generated" in message and "**Step 2**" in steps_md
    assert 'steering: `get_order#1: status="error"`' in steps_md  # as the Train tab writes steering per call
    assert steps_md.count("steering:") == 1  # the unsteered first step shows none

    steps = rollout_steps(ctx.store, rid)
    assert [s.tool_call().name for s in steps] == ["list_orders", "get_order"]
    made_by = steps[1].provenance()
    assert made_by.kind == "model" and made_by.model == ctx.backend().name and made_by.seed == 8
    assert made_by.anchors == [{"path": "status", "value": "error"}]
    assert json.loads(steps[1].response)["status"] == "error"  # the pinned anchor holds
    assert steps[1].check_report is not None and step_trace(ctx.store, steps[1].id)

    world = get_rollout(ctx.store, rid).world_id
    spec = next(w.latest for w in list_worlds(ctx.store) if w.latest.id == world).spec()
    again = generate(ctx.backend(), spec, steps[1].tool_call(), parse_anchors(['status="error"']),
                     [HistoryStep(call=steps[0].tool_call(), response=steps[0].response)], SamplerSettings(seed=8))
    assert again.samples[0].response == steps[1].response  # generated after step 0, with it as history


def test_branching_copies_the_steps_up_to_the_chosen_one(studio):
    client, ctx = studio
    parent = seeded_rollout(ctx, "payments")
    branch, header, steps_md, _, message = client.predict(parent, 2, api_name="/rollout_branch")
    assert branch != parent and f"branched from rollout {parent} at step 2" in header
    assert f"Rollout {branch} branches rollout {parent} at step 2" in message
    assert "**Step 2**" in steps_md and "**Step 3**" not in steps_md  # steps count from 1, as in Simulate
    copies, originals = rollout_steps(ctx.store, branch), rollout_steps(ctx.store, parent)
    assert [(s.call, s.response) for s in copies] == [(s.call, s.response) for s in originals[:2]]


def test_a_hand_edit_is_recorded_rechecked_and_keeps_the_original(studio):
    client, ctx = studio
    rid = seeded_rollout(ctx, "filesystem")
    original = rollout_steps(ctx.store, rid)[0]
    loaded, _ = client.predict(rid, 1, api_name="/rollout_load_response")
    assert loaded == original.response

    *_, refused = client.predict(rid, 1, '{"status": "maybe"}', api_name="/rollout_edit")
    assert "not saved" in refused and "response schema" in refused  # breaks the schema: refused, with why
    assert get_step(ctx.store, original.id).response == original.response
    value = json.loads(original.response)
    value["path" if "path" in value else "source"] = "not/absolute"  # schema-valid, breaks a rule
    edited = json.dumps(value)
    _, _, steps_md, _, message = client.predict(rid, 1, edited, api_name="/rollout_edit")
    assert "edited" in message and "checks fail" in message
    step = get_step(ctx.store, original.id)
    made_by = step.provenance()
    assert step.response == edited and step.check_ok is False
    assert made_by.kind == "human edit" and made_by.original_response == original.response
    assert made_by.original.model == original.provenance().model
    assert "edited by" in steps_md

    rows, _ = search(client, world="filesystem", check="failed")
    assert [r["id"] for r in rows] == [rid]


def test_accept_reject_and_tags_change_what_the_filters_find(studio):
    client, ctx = studio
    rid = seeded_rollout(ctx, "airline", 2)
    _, header, _, _, _ = client.predict(rid, api_name="/rollout_accept")
    assert "accepted" in header
    _, _, _, tags, _ = client.predict(rid, "gold, edge case ,gold", api_name="/rollout_tags")
    assert tags == "edge case, gold" and rollout_tags(ctx.store, rid) == ["edge case", "gold"]
    rows, _ = search(client, status="accepted", tag="gold")
    assert [r["id"] for r in rows] == [rid]
    client.predict(rid, api_name="/rollout_reject")
    assert search(client, status="accepted", tag="gold")[0] == []
    assert [r["id"] for r in search(client, status="rejected", tag="gold")[0]] == [rid]


def test_a_curriculum_exports_as_a_dataset_folder_that_loads_and_imports_back(studio, tmp_path):
    from datasets import load_dataset

    client, ctx = studio
    chosen = [seeded_rollout(ctx, "records", 1), seeded_rollout(ctx, "records", 2)]
    for rid in chosen:
        client.predict(rid, api_name="/rollout_accept")
    message, picker = client.predict("records set", "two record rollouts", str(chosen[0]), api_name="/curriculum_add")
    assert "v1" in message
    message, picker = client.predict("records set", "", str(chosen[1]), api_name="/curriculum_add")
    assert "**records set** v2: 2 rollouts (1 added)" in message
    curriculum = next(value for label, value in picker["choices"] if label.startswith("records set v2"))
    assert picker["value"] == curriculum  # the version just saved is chosen for Export

    archive, message = client.predict(curriculum, api_name="/curriculum_export")
    assert "Exported" in message and archive.endswith(".zip")
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(tmp_path / "unzipped")
    folder = next((tmp_path / "unzipped").iterdir())
    rows = load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "cache"))
    assert len(rows) == 6 and rows[0]["messages"][-1]["role"] == "assistant"
    assert {r["rollout_id"] for r in rows} == {str(rid) for rid in chosen}

    before = filter_rollouts(ctx.store, world="records").total
    message = client.predict(handle_file(archive), api_name="/dataset_import")
    assert "Imported 2 rollout(s) with 6 steps" in message
    imported = filter_rollouts(ctx.store, world="records", page_size=50).items[:2]
    assert filter_rollouts(ctx.store, world="records").total == before + 2
    for copy, rid in zip(reversed(imported), chosen, strict=True):
        assert copy.status == "accepted" and copy.tags == rollout_tags(ctx.store, rid)
        assert [(s.call, s.response, s.made_by, s.check_report) for s in rollout_steps(ctx.store, copy.id)] == \
               [(s.call, s.response, s.made_by, s.check_report) for s in rollout_steps(ctx.store, rid)]


def test_bad_input_is_explained_with_the_field_and_nothing_changes(studio, tmp_path):
    client, ctx = studio
    rid = seeded_rollout(ctx, "retail", 2)
    before = [(s.call, s.response) for s in rollout_steps(ctx.store, rid)]
    call = json.dumps({"name": "get_order", "arguments": {"order_id": "ORD-1"}})

    def generate_message(*args):
        return client.predict(*args, api_name="/rollout_generate")[4]

    cases = {
        "`rollout`": generate_message(None, call, "", 0.0, 0),
        "`call`: invalid JSON at line 1": generate_message(rid, '{"name": "get_order", ', "", 0.0, 0),
        "`call.name`": generate_message(rid, json.dumps({"name": "launch_rocket", "arguments": {}}), "", 0.0, 0),
        "anchor": generate_message(rid, call, "status=error", 0.0, 0),
        "`step`: rollout": client.predict(rid, 99, api_name="/rollout_branch")[4],
        "`step`": client.predict(rid, 42, api_name="/rollout_load_response")[1],
        "`response`": client.predict(rid, 1, "  ", api_name="/rollout_edit")[4],
        "`rollout_ids`": client.predict("c", "", str(rid), api_name="/curriculum_add")[0],
        "`rollout_ids[0]`": client.predict("c", "", "seven", api_name="/curriculum_add")[0],
        "`curriculum`": client.predict(None, api_name="/curriculum_export")[1],
        "`token`": client.predict(1, "me/data", "", True, api_name="/curriculum_push"),
    }
    not_a_zip = tmp_path / "export.zip"
    not_a_zip.write_text("hello")
    cases["`file`"] = client.predict(handle_file(str(not_a_zip)), api_name="/dataset_import")
    escaping = tmp_path / "evil.zip"
    with zipfile.ZipFile(escaping, "w") as bundle:
        bundle.writestr("../../outside.txt", "no")
    cases["unsafe path"] = client.predict(handle_file(str(escaping)), api_name="/dataset_import")

    with pytest.raises(InvalidInput) as err:  # the slider stops this in the page; the plain function names it too
        generate_step(ctx, rid, call, "", "hot", 0)
    assert err.value.problems[0].path == "temperature"

    for expected, message in cases.items():
        assert message.startswith("**Cannot") and expected in message, (expected, message)
        assert "Traceback" not in message and "/gradio/" not in message  # uploads named as the user named them
    assert [(s.call, s.response) for s in rollout_steps(ctx.store, rid)] == before
