"""The corpus over demo and synthetic worlds (issue 33): synthetic worlds are held out whole (no world in both train
and test), every synthetic row rebuilds from its meta and passes its world's checks, and `--preset` draws the
episode each stress preset describes; the CLI writes world files that `validate` and `check` read."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.train.world_model.examples import request_from_meta
from wmstudio.train.world_model.model_card import corpus_summary
from wmstudio.world.checks.report import check_step
from wmstudio.world.corpus.rows import SPLITS, write_corpus
from wmstudio.world.corpus.stress import neighbour_answer, paging_keys
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world
from wmstudio.world.steering.presets import PRESETS, stress_preset
from wmstudio.world.synth import is_synthetic
from wmstudio.world.synth.generate import generate_blueprint
from wmstudio.world.synth.registry import parse_ref

runner = CliRunner()


def read_rows(out: Path) -> dict[str, list[dict]]:
    return {split: [json.loads(line) for line in (out / f"{split}.jsonl").read_text("utf-8").splitlines()]
            for split in SPLITS}


def replay(meta: dict) -> tuple[dict, dict]:
    """The state before the row's call (replayed from its initial state) and the simulator's answer to the call."""
    simulator = get_simulator(meta["world"])
    state = meta["initial_state"]
    for step in meta["history"]:
        state, _ = simulator.step(state, Call.from_json(step["call"]))
    return state, simulator.step(state, Call.from_json(meta["call"]), meta["directives"])[1]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    out = tmp_path_factory.mktemp("mixed")
    stats = write_corpus(out, rows=240, seed=4, synthetic=10, synthetic_seed=3)
    return out, stats, read_rows(out)


def test_synthetic_worlds_are_held_out_whole_and_demo_rows_split_as_before(mixed):
    out, stats, rows = mixed
    listed = json.loads((out / "synthetic_worlds.json").read_text())
    worlds = {split: {r["meta"]["world"] for r in rows[split] if is_synthetic(r["meta"]["world"])} for split in SPLITS}
    assert worlds["train"].isdisjoint(worlds["test"]) and worlds["train"].isdisjoint(worlds["eval"])
    assert worlds["eval"].isdisjoint(worlds["test"])
    assert all(worlds[split] == set(listed[split]) for split in SPLITS) and listed["seed"] == 3
    assert sum(stats["synthetic_worlds"].values()) == 10 and min(stats["synthetic_worlds"].values()) >= 1
    themes = {split: {generate_blueprint(3, parse_ref(w)[1]).domain for w in listed[split]} for split in SPLITS}
    assert themes["train"].isdisjoint(themes["test"]) and themes["train"].isdisjoint(themes["eval"])
    assert themes["eval"].isdisjoint(themes["test"])  # held out by theme: the test worlds' nouns are new to training
    assert {split: sorted(found) for split, found in themes.items()} == listed["themes"]
    written = json.loads((out / "stats.json").read_text())
    assert "--synthetic 10 --synthetic-seed 3`" in corpus_summary(written)  # a card says how to draw them again
    assert stats["worlds"]["synthetic"] == 120 and sum(stats["splits"].values()) == 240
    for split in SPLITS:  # every split still holds each demo world
        demo = {r["meta"]["world"] for r in rows[split]} - worlds[split]
        assert demo == {"airline", "filesystem", "payments", "records", "retail"}


def test_every_synthetic_row_rebuilds_from_meta_passes_its_checks_and_replays(mixed):
    _, _, rows = mixed
    synthetic = [r for split in SPLITS for r in rows[split] if is_synthetic(r["meta"]["world"])]
    assert Counter(r["meta"]["grounding"] for r in synthetic).keys() == {"none", "oracle"}
    assert any(r["meta"]["directives"] for r in synthetic) and any(r["meta"]["invalid_call"] for r in synthetic)
    for row in synthetic:
        meta, response = row["meta"], row["messages"][-1]["content"]
        request = request_from_meta(meta)
        assert request.world.simulator == meta["world"] and request.grounding == meta["grounding"]
        report = check_step(request.world, request.call, response, history=request.history)
        assert report.ok, (meta["world"], meta["call"], response, report.to_json())
        assert json.loads(response) == replay(meta)[1]


def test_same_arguments_give_byte_identical_files(mixed, tmp_path):
    out, _, _ = mixed
    write_corpus(tmp_path, rows=240, seed=4, synthetic=10, synthetic_seed=3)
    assert all((tmp_path / f"{s}.jsonl").read_bytes() == (out / f"{s}.jsonl").read_bytes() for s in SPLITS)


def test_bad_synthetic_settings_and_presets_are_named(tmp_path):
    with pytest.raises(InvalidInput) as caught:
        write_corpus(tmp_path, rows=30, seed=0, synthetic=2, synthetic_seed=-1, synthetic_share=1.5)
    assert {p.path for p in caught.value.problems} == {"synthetic", "synthetic_seed", "synthetic_share"}
    with pytest.raises(InvalidInput, match="error-cascade"):
        write_corpus(tmp_path, rows=30, seed=0, preset="cascade")


@pytest.fixture(scope="module")
def stressed(tmp_path_factory):
    """A small corpus per preset: rows of the demo worlds and of six synthetic worlds."""
    made = {}
    for name in PRESETS:
        out = tmp_path_factory.mktemp(name)
        write_corpus(out, rows=36, seed=1, synthetic=6, preset=name)
        made[name] = [r for split in SPLITS for r in read_rows(out)[split]]
    return made


def _items(response: dict) -> list:
    return next((v for v in response.values() if isinstance(v, list) and v and isinstance(v[0], dict)), [])


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_draws_its_episode_and_its_rows_pass_their_checks(stressed, name):
    rows, preset = stressed[name], stress_preset(name)
    synthetic = [r for r in rows if is_synthetic(r["meta"]["world"])]
    for row in rows:
        meta, response = row["meta"], json.loads(row["messages"][-1]["content"])
        assert meta["preset"] == name and set(meta["directives"]) <= set(preset.directives)
        request = request_from_meta(meta)
        if request.call.name in {t.name for t in request.world.tools}:  # `check` refuses a tool the world lacks
            assert check_step(request.world, request.call, row["messages"][-1]["content"],
                              history=request.history).ok
        assert response == replay(meta)[1]
    answers = [json.loads(r["messages"][-1]["content"]) for r in synthetic]
    if name in ("insufficient-info", "impossible"):
        assert all(a["status"] == "error" for a in answers)
    if name in ("adjacent-info", "long-output", "pagination", "error-cascade"):
        assert all(a["status"] == "ok" for a in answers)
    if name == "adjacent-info":
        found = [neighbour_answer(replay(r["meta"])[0], Call.from_json(r["meta"]["call"]), a) for r, a in
                 zip(synthetic, answers, strict=True)]
        assert sum(f is not None for f in found) >= len(found) - 2
    if name == "long-output":
        assert all(len(_items(a)) >= 50 for a in answers)
    if name == "error-cascade":
        assert all(any(s["response"]["status"] == "error" for s in r["meta"]["history"]) for r in rows)
    if name == "impossible":
        assert any(r["meta"]["call"]["name"] not in {t.name for t in request_from_meta(r["meta"]).world.tools}
                   for r in synthetic)


def test_pagination_rows_continue_the_search_without_repeating_or_skipping(stressed):
    checked = 0
    for row in stressed["pagination"]:
        meta = row["meta"]
        world = request_from_meta(meta).world
        keys = paging_keys(world.tool(meta["call"]["name"]))
        if keys is None or keys[0] not in meta["call"]["arguments"]:
            continue  # a world without a paginated tool: an ordinary row
        pages = [s["response"] for s in meta["history"] if s["call"]["name"] == meta["call"]["name"]]
        pages.append(json.loads(row["messages"][-1]["content"]))
        seen = [json.dumps(item, sort_keys=True) for page in pages for item in _items(page)]
        assert len(pages) >= 2 and len(seen) == len(set(seen))
        first = Call(meta["call"]["name"], {k: v for k, v in meta["call"]["arguments"].items() if k != keys[0]})
        state, _ = replay({**meta, "call": first.to_json()})
        whole = get_simulator(meta["world"]).step(state, first, ["page_size: 50"])[1]
        listed = [json.dumps(item, sort_keys=True) for item in _items(whole)]
        assert seen == listed[: len(seen)], meta["world"]
        checked += 1
    assert checked >= 4


def test_cli_writes_worlds_that_validate_and_check(tmp_path):
    result = runner.invoke(app, ["worlds", "synth", "--count", "3", "--seed", "9", "--out", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["worlds"] == 3 and len(stats["files"]) == 3
    path = tmp_path / "w" / stats["files"][0]
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0
    world = load_world(path)
    simulator = get_simulator(world.simulator)
    call = simulator.valid_call(world.initial_state, random.Random(0))
    _, response = simulator.step(world.initial_state, call)
    (tmp_path / "call.json").write_text(json.dumps(call.to_json()))
    (tmp_path / "response.json").write_text(json.dumps(response))
    checked = runner.invoke(app, ["check", str(path), "--call", str(tmp_path / "call.json"),
                                  "--response", str(tmp_path / "response.json")])
    assert checked.exit_code == 0, checked.output
    bad = runner.invoke(app, ["worlds", "synth", "--count", "0", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--count" in bad.output


def test_cli_corpus_takes_synthetic_worlds_and_a_preset(tmp_path):
    result = runner.invoke(app, ["corpus", "--rows", "30", "--synthetic", "3", "--synthetic-seed", "2",
                                 "--preset", "error-cascade", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["preset"] == "error-cascade" and stats["synthetic_worlds"] == {"train": 1, "eval": 1, "test": 1}
    bad = runner.invoke(app, ["corpus", "--rows", "30", "--preset", "nope", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "pagination" in bad.output
