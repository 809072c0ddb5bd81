"""Stress presets on the command line (issue 33): `wmstudio generate --preset NAME` pins the preset's anchors and puts
its directives in the prompt, on a demo world and on a synthetic one; `wmstudio presets` shows what each adds.

A tiny random world model stands in for the shipped one: its answers are nonsense, but anchors are pinned on the
canvas, so honouring them is the sampler's job, which is what these tests hold it to."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world, save_world
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.presets import PRESETS, apply_preset, preset_request, stress_preset
from wmstudio.world.tools import Tool

runner = CliRunner()
LISTING = {"long-output", "pagination"}


@pytest.fixture(scope="module")
def files(tiny_model, demo_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("presets")
    torch.set_num_threads(1)
    tiny_model(demo_tokenizer, folder / "model")
    save_world(get_simulator("synthetic:0:3").world(), folder / "synthetic.json")
    (folder / "search.json").write_text(json.dumps({"name": "search_records", "arguments": {"plan": "pro"}}))
    (folder / "get.json").write_text(json.dumps({"name": "get_record", "arguments": {"id": "ACC-1007"}}))
    return folder


def generate(files, world, call, *extra: str) -> dict:
    result = runner.invoke(app, ["generate", str(world), "--call", str(call), "--model", str(files / "model"),
                                 "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", list(PRESETS))
def test_generate_with_a_preset_pins_its_anchors_and_prompts_its_directives(files, name):
    preset = stress_preset(name)
    world, call = DEMO_WORLDS_DIR / "records.json", files / ("search.json" if name in LISTING else "get.json")
    data = generate(files, world, call, "--preset", name, "--samples", "2", "--temperature", "1")
    assert data["directives"][-len(preset.directives):] == list(preset.directives)
    pinned = {a["path"]: a["value"] for a in data["anchors"]}
    assert pinned["status"] == preset.status and pinned.get("error") == preset.error
    assert "the steering directives" not in data["prompt_cut"]  # they are in the prompt the model read
    for sample in data["samples"]:
        response = json.loads(sample["response"])
        assert response["status"] == preset.status and sample["checks"]["anchor_violations"] == []
        if preset.error:
            assert response["error"] == preset.error


def test_a_preset_works_on_a_synthetic_world_and_an_anchor_given_by_hand_wins(files):
    world = load_world(files / "synthetic.json")
    tool = next(t for t in world.tools if "search" in t.description.lower() or t.name.startswith(("list", "find")))
    (files / "synthetic-call.json").write_text(json.dumps({"name": tool.name, "arguments": {}}))
    data = generate(files, files / "synthetic.json", files / "synthetic-call.json", "--preset", "error-cascade",
                    "--anchor", 'error="UPSTREAM_TIMEOUT"')
    pinned = {a["path"]: a["value"] for a in data["anchors"]}
    assert pinned == {"status": "error", "error": "UPSTREAM_TIMEOUT"}
    assert json.loads(data["samples"][0]["response"])["error"] == "UPSTREAM_TIMEOUT"
    assert "inject_error: SERVICE_UNAVAILABLE" in data["directives"]


def test_apply_preset_adds_what_the_tool_can_hold_and_no_directive_twice():
    world = load_world(DEMO_WORLDS_DIR / "records.json")
    steered, anchors = apply_preset("pagination", world, Call("search_records", {}), [Anchor("status", "error")])
    assert anchors == [Anchor("status", "error")] and steered.directives[-2].startswith("page_size: 3")
    again, _ = apply_preset("pagination", steered, Call("search_records", {}), [])
    assert again.directives == steered.directives and world.directives == []
    bare = Tool(name="lookup", description="", parameters={"type": "object", "properties": {}})
    anchors, directives = preset_request("insufficient-info", bare)  # an imported tool without a response schema
    assert anchors == [] and directives == list(PRESETS["insufficient-info"].directives)


def test_presets_command_lists_each_preset_for_a_tool_and_names_a_typo(files):
    result = runner.invoke(app, ["presets", "--world", str(DEMO_WORLDS_DIR / "records.json"), "--tool", "get_record"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.stdout)}
    assert list(listed) == list(PRESETS)
    assert listed["error-cascade"]["anchors"] == ['status="error"', 'error="SERVICE_UNAVAILABLE"']
    assert listed["pagination"]["directives"][0] == "page_size: 3"
    typo = runner.invoke(app, ["generate", str(DEMO_WORLDS_DIR / "records.json"), "--call", str(files / "get.json"),
                               "--model", str(files / "model"), "--preset", "cascade"])
    assert typo.exit_code == 2 and "error-cascade" in typo.stderr
    unknown = runner.invoke(app, ["presets", "--world", str(DEMO_WORLDS_DIR / "records.json"), "--tool", "nope"])
    assert unknown.exit_code == 2 and "--tool" in unknown.stderr
