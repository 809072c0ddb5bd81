"""The Simulate tab in headless Chromium: open the tab, pick the retail world and a tool, pin status to "error",
Run and watch the canvas change frame by frame, read the check report, replay a step, save the step.

A tiny random world model stands in for the shipped one (the page and the data flow are the same); screenshots
go to test-artifacts/ for a person to look at."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from playwright.sync_api import expect
from serving import PLACEHOLDER, chromium_page, served_tabs
from sqlmodel import func, select

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import open_store, rollout_steps, save_world_version, step_trace
from wmstudio.store.tables import Rollout
from wmstudio.studio.context import StudioContext
from wmstudio.ui.simulate_tab import build_simulate_tab
from wmstudio.world.spec import load_world

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Records every canvas the page shows (frame number, masks left, text, when it was painted) into window.__frames.
WATCH_CANVAS = """() => {
  window.__frames = [];
  const root = document.querySelector('#simulate-canvas');
  const record = () => {
    const canvas = root.querySelector('.wm-canvas');
    if (!canvas) return;
    const key = canvas.dataset.step + '/' + canvas.dataset.done;
    const last = window.__frames[window.__frames.length - 1];
    if (last && last.key === key) return;
    const entry = {key, step: +canvas.dataset.step, done: canvas.dataset.done === '1',
                   masked: +canvas.dataset.masked, text: canvas.querySelector('.wm-tokens')?.textContent || ''};
    window.__frames.push(entry);
  };
  new MutationObserver(record).observe(root, {childList: true, subtree: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def studio(tiny_model, demo_tokenizer, tmp_path_factory):
    """The Simulate tab (after a placeholder first tab, as in the studio) on a tiny model; yields (url, store)."""
    torch.set_num_threads(1)
    worlds = [load_world(p) for p in sorted(DEMO_WORLDS_DIR.glob("*.json"))]
    model_dir = tiny_model(demo_tokenizer, tmp_path_factory.mktemp("mdlm"))
    store = open_store(tmp_path_factory.mktemp("db") / "studio.db")
    save_world_version(store, next(w for w in worlds if w.name == "airline"))
    ctx = StudioContext(store=store, model=str(model_dir), ar_model=None)
    ctx.backend()
    with served_tabs(ctx, {"World": PLACEHOLDER, "Simulate": build_simulate_tab}) as url:
        yield url, store, worlds


def loaded(tab) -> None:
    """Wait until the Simulate tab has loaded its worlds, then go back to the first tab."""
    tab.get_by_role("tab", name="Simulate").click()
    expect(tab.locator("#simulate-world input")).to_have_value("airline (v1)", timeout=20_000)  # page loaded
    tab.get_by_role("tab", name="World").click()


@pytest.fixture(scope="module")
def page(studio):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(studio[0], ready=loaded) as tab:
        yield tab


def _newest_rollout_id(store) -> int:
    with store.read() as session:
        return session.exec(select(func.max(Rollout.id))).one() or 0


def pick(page, dropdown_id: str, option: str) -> None:
    box = page.locator(f"#{dropdown_id} input")
    box.click()
    box.fill("")  # the list shows only the options matching what the box holds
    page.get_by_role("option", name=option, exact=True).click()


def test_pin_an_anchor_run_watch_the_frames_and_save_the_step(studio, page):
    _, store, worlds = studio
    # a world saved after the page opened shows up when the tab is opened again
    save_world_version(store, next(w for w in worlds if w.name == "retail"))
    page.get_by_role("tab", name="Simulate").click()
    pick(page, "simulate-world", "retail (v1)")
    expect(page.locator("#simulate-tool-note")).to_contain_text("get_order", timeout=10_000)
    pick(page, "simulate-tool", "refund_order")
    expect(page.locator("#simulate-tool-note")).to_contain_text("refund_order", timeout=10_000)  # forms laid out
    page.get_by_label("order_id · text · required").press_sequentially("ORD-22930")
    page.get_by_label("amount_cents · whole number · required").press_sequentially("500")
    arguments = page.locator("#simulate-arguments")
    expect(arguments).to_contain_text('"amount_cents": 500', timeout=10_000)
    expect(arguments).to_contain_text('"order_id": "ORD-22930"')
    page.get_by_label("status · one of ok | partial | error").click()
    page.get_by_role("option", name="error", exact=True).click()
    page.screenshot(path=str(ARTIFACTS / "simulate-1-form.png"), full_page=True)

    page.evaluate(WATCH_CANVAS)
    page.locator("#simulate-run").click()
    page.wait_for_function("window.__frames.some(f => f.done)", timeout=60_000)
    frames = page.evaluate("window.__frames")
    steps = [f for f in frames if f["step"] >= 0 and not f["done"]]
    assert len(steps) >= 3, frames  # the canvas was redrawn while denoising, not just at the end
    masked = [f["masked"] for f in steps]
    assert masked == sorted(masked, reverse=True) and masked[0] > masked[-1]
    assert steps[0]["text"] != steps[-1]["text"]
    assert frames[-1]["done"] and frames[-1]["masked"] == 0

    report = page.locator("#simulate-report")
    expect(report).to_contain_text('Anchor: status="error"')
    expect(report.locator(".wm-badge.ok", has_text='Anchor: status="error"')).to_have_count(1)
    expect(report).to_contain_text("JSON: valid")
    retail = next(w for w in worlds if w.name == "retail")  # every one of the world's rules has its badge
    rules = report.locator(".wm-card").first.locator(".wm-badge", has_text=re.compile(r"^. Rule\b"))
    expect(rules).to_have_count(len(retail.rules))
    expect(page.locator("#simulate-heatmap .js-plotly-plot")).to_have_count(1, timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "simulate-2-done.png"), full_page=True)

    scrubber = page.locator("#simulate-scrubber input[type=number]")
    scrubber.fill("1")
    scrubber.press("Enter")
    expect(page.locator("#simulate-canvas .wm-canvas")).to_have_attribute("data-step", "0")
    page.screenshot(path=str(ARTIFACTS / "simulate-3-replay.png"), full_page=True)

    page.get_by_label("Title of a new rollout (optional)").fill("refund refused in the browser")
    page.locator("#simulate-save").click()
    saved = page.locator("#simulate-save-status")
    expect(saved).to_contain_text("Saved as step 1 of rollout #", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "simulate-4-saved.png"), full_page=True)
    rollout_id = int(saved.inner_text().split("rollout #")[1].split()[0])
    [step] = rollout_steps(store, rollout_id)
    assert step.call == {"name": "refund_order", "arguments": {"order_id": "ORD-22930", "amount_cents": 500}}
    assert json.loads(step.response)["status"] == "error" and step_trace(store, step.id)


def test_a_bad_anchor_is_explained_and_the_form_is_kept(studio, page):
    page.get_by_role("tab", name="Simulate").click()
    pick(page, "simulate-tool", "get_order")
    expect(page.locator("#simulate-tool-note")).to_contain_text("get_order", timeout=10_000)
    order = page.get_by_label("order_id · text · required")
    expect(order).to_have_value("")  # a tool switch starts an empty form (refund_order's ORD-22930 is not kept)
    expect(page.locator("#simulate-canvas")).to_contain_text("Press Run")  # and clears the last run's canvas
    expect(page.locator("#simulate-report")).to_have_text("")
    page.screenshot(path=str(ARTIFACTS / "simulate-tool-switch-cleared.png"), full_page=True)
    order.fill("ORD-")
    order.press_sequentially("1")
    expect(page.locator("#simulate-arguments")).to_contain_text('"order_id": "ORD-1"', timeout=10_000)
    page.locator("#simulate-free-anchors textarea").fill("colour=1")
    page.locator("#simulate-run").click()
    status = page.locator("#simulate-status")
    expect(status).to_contain_text("anchor colour", timeout=10_000)
    expect(status).not_to_contain_text("Traceback")
    assert page.locator("#simulate-free-anchors textarea").input_value() == "colour=1"
    assert page.get_by_label("order_id · text · required").input_value() == "ORD-1"
    page.screenshot(path=str(ARTIFACTS / "simulate-5-bad-anchor.png"), full_page=True)


def test_a_value_pasted_into_a_field_reaches_the_call_that_is_saved(studio, page):
    _, store, _ = studio
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("tab", name="Simulate").click()
    pick(page, "simulate-tool", "cancel_order")
    expect(page.locator("#simulate-tool-note")).to_contain_text("cancel_order", timeout=10_000)
    order = page.get_by_label("order_id · text · required")
    page.evaluate("navigator.clipboard.writeText('ORD-77777')")
    order.click()
    order.press("Control+A")
    order.press("Control+V")  # pasted over whatever the field held, not typed
    expect(order).to_have_value("ORD-77777")
    expect(page.locator("#simulate-arguments")).to_contain_text('"order_id": "ORD-77777"', timeout=10_000)
    page.locator("#simulate-free-anchors textarea").fill("")
    status = page.locator("#simulate-status")
    before = status.inner_text()  # an earlier test's run may have left "Done:" there
    page.locator("#simulate-run").click()
    expect(status).not_to_have_text(before, timeout=60_000)
    expect(status).to_contain_text("Done:", timeout=60_000)
    pick(page, "simulate-rollout", "New rollout")
    page.get_by_label("Title of a new rollout (optional)").fill("pasted id")
    newest = _newest_rollout_id(store)
    page.locator("#simulate-save").click()
    saved = page.locator("#simulate-save-status")
    expect(saved).to_contain_text(f"Saved as step 1 of rollout #{newest + 1} ", timeout=10_000)
    [step] = rollout_steps(store, newest + 1)
    assert step.call == {"name": "cancel_order", "arguments": {"order_id": "ORD-77777"}}


def test_a_refused_run_clears_the_last_runs_canvas_and_report(studio, page):
    page.get_by_role("tab", name="Simulate").click()
    pick(page, "simulate-tool", "get_order")
    expect(page.locator("#simulate-tool-note")).to_contain_text("get_order", timeout=10_000)
    page.locator("#simulate-free-anchors textarea").fill("")
    status = page.locator("#simulate-status")
    before = status.inner_text()  # an earlier test's run may have left "Done:" there
    page.locator("#simulate-run").click()
    expect(status).not_to_have_text(before, timeout=60_000)
    expect(status).to_contain_text("Done:", timeout=60_000)
    expect(page.locator("#simulate-report")).to_contain_text("JSON: valid")
    page.wait_for_timeout(1000)  # the run's event ends after its last frame is drawn; a click before then is dropped
    anchors = page.locator("#simulate-free-anchors textarea")
    anchors.fill("status=not json")  # refused whatever the tool
    expect(anchors).to_have_value("status=not json")
    anchors.blur()  # the box's value reaches the server before Run reads it, even on a loaded machine
    page.wait_for_timeout(1000)
    page.locator("#simulate-run").click()
    expect(status).to_contain_text("anchor status=not json", timeout=10_000)
    expect(page.locator("#simulate-report")).not_to_contain_text("JSON: valid")
    expect(page.locator("#simulate-canvas .wm-canvas")).to_have_attribute("data-step", "-1")
    page.locator("#simulate-free-anchors textarea").fill("")
