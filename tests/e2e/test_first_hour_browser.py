"""A newcomer's first hour in headless Chromium, as `python app.py` serves the studio (issue 38): a New world from
the World tab and tools imported into it (or in place of those shown), the Annotate tab starting at the step you
just saved with its scores in view at 1000 px, and the Train tab's curriculum label shown whole. Screenshots go
to test-artifacts/ for a person to look at."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import chromium_page, free_port

from wmstudio.store import MadeBy, append_step, create_rollout, latest_world
from wmstudio.ui.studio import launch
from wmstudio.world.spec import Call

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    folder = tmp_path_factory.mktemp("first-hour")
    port = free_port()
    opened = {}
    app = launch(port=port, db=folder / "studio.db", ar_model=None, prevent_thread_lock=True, quiet=True,
                 on_started=lambda blocks, ctx: opened.update(ctx=ctx))
    yield f"http://127.0.0.1:{port}/", opened["ctx"]
    app.close()


def loaded(tab) -> None:
    expect(tab.locator("#world-status")).to_contain_text("Loaded", timeout=60_000)


@pytest.fixture(scope="module")
def page(studio):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(studio[0], viewport=VIEWPORT, ready=loaded) as tab:
        yield tab


def test_a_new_world_and_tools_imported_into_it_or_in_place_of_those_shown(page, tmp_path):
    page.get_by_role("tab", name="World").click()
    page.locator("#world-new").click()
    status = page.locator("#world-status")
    expect(status).to_contain_text("A new world", timeout=10_000)
    expect(page.locator("#world-name textarea, #world-name input").first).to_have_value("")
    expect(page.locator("#world-task textarea")).to_have_value("")

    page.get_by_text("Import tools from a file").click()
    tool_file = page.locator("#world-tool-file")
    tool_file.locator("input[type=file]").set_input_files(str(SAMPLES / "bfcl" / "multi_turn_func_doc" /
                                                               "math_api.json"))
    expect(tool_file).to_contain_text(re.compile(r"math_api\s*\.json"), timeout=10_000)  # Gradio may break the name
    page.locator("#world-import-mode").get_by_label("start a new world with them").check()
    page.locator("#world-import").click()
    expect(status).to_contain_text("Imported 17 tool(s) from math_api.json, as a new world", timeout=30_000)
    expect(page.locator("#world-name textarea, #world-name input").first).to_have_value("math_api")
    page.screenshot(path=str(ARTIFACTS / "first-hour-1-new-world.png"), full_page=True)

    mine = tmp_path / "two.json"
    mine.write_text(json.dumps([{"type": "function", "function": {"name": name, "description": name,
                                                                  "parameters": {"type": "object"}}}
                                for name in ("open_door", "close_door")]))
    tool_file.get_by_role("button", name="Clear").click()
    tool_file.locator("input[type=file]").set_input_files(str(mine))
    expect(tool_file).to_contain_text(re.compile(r"two\s*\.json"), timeout=10_000)  # name and extension: two spans
    page.locator("#world-import-mode").get_by_label("replace the tools shown").check()
    page.locator("#world-import").click()
    expect(status).to_contain_text("Imported 2 tool(s) from two.json, in place of the tools shown", timeout=30_000)
    expect(page.locator("#world-name textarea, #world-name input").first).to_have_value("math_api")  # the world stays; its tools change
    page.screenshot(path=str(ARTIFACTS / "first-hour-2-tools-replaced.png"), full_page=True)


def test_annotate_starts_at_the_step_just_saved_with_its_scores_in_view(studio, page):
    _, ctx = studio
    retail = latest_world(ctx.store, "retail")
    rollout = create_rollout(ctx.store, retail.id, "saved just now")
    append_step(ctx.store, rollout.id, Call("get_order", {"order_id": "ORD-35137"}), '{"status": "ok"}',
                MadeBy.by_hand("newcomer"))
    page.get_by_role("tab", name="Annotate").click()
    page.locator("#annotate-name textarea, #annotate-name input").first.fill("newcomer")
    page.locator("#annotate-start").click()
    exchange = page.locator("#annotate-exchange")
    expect(exchange).to_contain_text("ORD-35137", timeout=30_000)  # not a seeded example
    for dimension in ("realism", "outcome_correctness", "training_utility"):
        box = page.locator(f"#rate-{dimension}").bounding_box()
        assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], (dimension, box)
    page.screenshot(path=str(ARTIFACTS / "first-hour-3-annotate-newest.png"))


def test_the_train_tab_shows_the_curriculum_label_whole(page):
    page.get_by_role("tab", name="Train").click()
    box = page.locator("#train-curriculum input")
    expect(box).to_have_value("demo · the five simulated worlds' scenarios", timeout=30_000)
    assert box.evaluate("element => element.scrollWidth <= element.clientWidth")
    page.screenshot(path=str(ARTIFACTS / "first-hour-4-train.png"))
