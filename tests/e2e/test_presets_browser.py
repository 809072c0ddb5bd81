"""Stress presets in the Simulate tab, in headless Chromium: one click on a preset fills the anchors and the run's
directives, and Run honours them (every pinned anchor holds in the report; the status line names the directives
the model was steered by). One test per preset, on the records demo world.

A tiny random world model stands in for the shipped one (the page and the data flow are the same)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from playwright.sync_api import expect
from serving import chromium_page, served_tabs

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import open_store, save_world_version
from wmstudio.studio.context import StudioContext
from wmstudio.ui.simulate_tab import build_simulate_tab
from wmstudio.world.spec import load_world
from wmstudio.world.steering.presets import PRESETS, preset_request

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LISTING = {"long-output", "pagination"}  # presets about listings run on search_records, the others on get_record


@pytest.fixture(scope="module")
def studio(tiny_model, demo_tokenizer, tmp_path_factory):
    """The Simulate tab on a tiny model with the records world saved; yields (url, world)."""
    torch.set_num_threads(1)
    world = load_world(DEMO_WORLDS_DIR / "records.json")
    model_dir = tiny_model(demo_tokenizer, tmp_path_factory.mktemp("mdlm"))
    store = open_store(tmp_path_factory.mktemp("db") / "studio.db")
    save_world_version(store, world)
    ctx = StudioContext(store=store, model=str(model_dir), ar_model=None)
    ctx.backend()
    with served_tabs(ctx, {"Simulate": build_simulate_tab}) as url:
        yield url, world


def loaded(tab) -> None:
    expect(tab.locator("#simulate-world input")).to_have_value("records (v1)", timeout=20_000)


@pytest.fixture(scope="module")
def page(studio):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(studio[0], viewport={"width": 1400, "height": 1100}, ready=loaded) as tab:
        yield tab


def pick(page, dropdown_id: str, option: str) -> None:
    page.locator(f"#{dropdown_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


@pytest.mark.parametrize("name", list(PRESETS))
def test_one_click_fills_the_presets_anchors_and_directives_and_run_honours_them(studio, page, name):
    _, world = studio
    tool = "search_records" if name in LISTING else "get_record"
    pick(page, "simulate-tool", tool)
    expect(page.locator("#simulate-tool-note")).to_contain_text(tool, timeout=10_000)
    anchors, directives = preset_request(name, world.tool(tool))

    page.locator(f"#simulate-preset-{name}").click()  # the one click
    directives_box = page.locator("#simulate-directives textarea")
    expect(directives_box).to_have_value("\n".join(directives), timeout=10_000)
    for anchor in anchors:
        slot = page.get_by_label(re.compile(rf"^{anchor.path} · "))
        expect(slot).to_have_value(str(anchor.value))
    expect(page.locator("#simulate-tool-note")).to_contain_text(PRESETS[name].title)
    page.screenshot(path=str(ARTIFACTS / f"preset-{name}-1-filled.png"), full_page=True)

    status = page.locator("#simulate-status")
    page.locator("#simulate-run").click()
    steered = "; ".join(d.rstrip(".") for d in directives)  # this run's own, unlike any other preset's
    expect(status).to_contain_text(f"Steered by: {steered}.", timeout=60_000)
    expect(status).to_contain_text("Done:")
    report = page.locator("#simulate-report")
    for anchor in anchors:
        shown = f'Anchor: {anchor}'
        expect(report.locator(".wm-badge.ok", has_text=shown)).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / f"preset-{name}-2-run.png"), full_page=True)


def test_the_directives_box_can_be_edited_and_a_bad_directive_is_explained(studio, page):
    pick(page, "simulate-tool", "get_record")
    expect(page.locator("#simulate-tool-note")).to_contain_text("get_record", timeout=10_000)
    page.locator("#simulate-preset-pagination").click()
    box = page.locator("#simulate-directives textarea")
    expect(box).to_have_value(re.compile("^page_size: 3\n"), timeout=10_000)
    box.fill("page_size: lots")
    page.locator("#simulate-run").click()
    status = page.locator("#simulate-status")
    expect(status).to_contain_text("page_size", timeout=30_000)
    expect(status).not_to_contain_text("Traceback")
    assert box.input_value() == "page_size: lots"  # the form is kept
