"""The studio's main path in headless Chromium, on the whole app and the embedded default model: open it, edit a
world and save a new version, pin an anchor and watch the denoising frames change, save the step, rate it, and see
the agreement view update. Screenshots go to test-artifacts/main-*.png."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import chromium_page, free_port

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import (
    filter_rollouts,
    get_annotator,
    get_rating,
    open_store,
    rollout_steps,
    save_rating,
    save_world_version,
    world_versions,
)
from wmstudio.studio.context import StudioContext
from wmstudio.ui.annotate_tab import ANNOTATE_SHORTCUTS_HEAD
from wmstudio.ui.studio import build_studio
from wmstudio.world.spec import load_world

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
NEW_TASK = "A customer whose refund was refused asks again."
WATCH_CANVAS = """() => {
  window.__frames = [];
  const root = document.querySelector('#simulate-canvas');
  new MutationObserver(() => {
    const canvas = root.querySelector('.wm-canvas');
    if (!canvas) return;
    const key = canvas.dataset.step + '/' + canvas.dataset.done;
    const last = window.__frames[window.__frames.length - 1];
    if (!last || last.key !== key)
      window.__frames.push({key, step: +canvas.dataset.step, done: canvas.dataset.done === '1',
                            masked: +canvas.dataset.masked});
  }).observe(root, {childList: true, subtree: true, attributes: true});
}"""


@pytest.fixture
def studio(tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    monkeypatch.delenv("SPACE_ID", raising=False)
    store = open_store(tmp_path / "studio.db")
    save_world_version(store, load_world(DEMO_WORLDS_DIR / "retail.json"))
    ctx = StudioContext(store=store)
    ctx.backend()
    app = build_studio(ctx)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                           head=ANNOTATE_SHORTCUTS_HEAD)
    yield url, store
    app.close()


def pick(page, dropdown_id: str, option: str) -> None:
    page.locator(f"#{dropdown_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def test_edit_a_world_run_with_an_anchor_save_rate_and_see_agreement(studio):
    url, store = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1100}) as page:
        # World: the saved world opens by itself; edit its task and save a new version
        expect(page.locator("#world-status")).to_contain_text("Loaded retail v1", timeout=30_000)
        task = page.locator("#world-task textarea")
        task.fill(NEW_TASK)
        page.locator("#world-save").click()
        expect(page.locator("#world-status")).to_contain_text("Saved retail as v2", timeout=15_000)
        assert world_versions(store, "retail")[0].spec().task == NEW_TASK
        page.screenshot(path=str(ARTIFACTS / "main-1-world-saved.png"), full_page=True)

        # Simulate: the new version, refund_order, status pinned to "error"; Run and watch the frames change
        page.get_by_role("tab", name="Simulate").click()
        expect(page.locator("#simulate-world input")).to_have_value("retail (v2)", timeout=20_000)
        pick(page, "simulate-tool", "refund_order")
        expect(page.locator("#simulate-tool-note")).to_contain_text("refund_order", timeout=10_000)
        page.get_by_label("order_id · text · required").press_sequentially("ORD-22930")
        page.get_by_label("amount_cents · whole number · required").press_sequentially("500")
        expect(page.locator("#simulate-arguments")).to_contain_text('"amount_cents": 500', timeout=10_000)
        page.get_by_label("status · one of ok | partial | error").click()
        page.get_by_role("option", name="error", exact=True).click()
        page.evaluate(WATCH_CANVAS)
        page.locator("#simulate-run").click()
        page.wait_for_function("window.__frames.some(f => f.done)", timeout=60_000)
        frames = page.evaluate("window.__frames")
        masked = [f["masked"] for f in frames]
        assert masked and masked == sorted(masked, reverse=True) and masked[-1] == 0, frames  # drawn as it filled
        # (here the helpers fill every slot under the pin, a refusal's other fields empty, so no denoising step is
        # left; test_simulate_browser watches a run the denoiser writes)
        expect(page.locator("#simulate-report")).to_contain_text('Anchor: status="error"')
        expect(page.locator("#simulate-report .wm-neutral")).to_contain_text("not values made up")  # "" and 0
        expect(page.locator("#simulate-status")).to_contain_text("The outcome head chose error")  # within the pin
        # who wrote what: the outcome head's and the call's values labelled; under a pinned refusal nothing is left
        written = page.locator("#simulate-canvas .wm-written")
        expect(written).to_contain_text("the outcome head")
        expect(written).to_contain_text("every slot is decided, so no denoising step is left")
        assert page.locator("#simulate-canvas .wm-tokens u.w-outcome").count() > 0
        assert page.locator("#simulate-canvas .wm-tokens u.w-call").count() > 0
        page.screenshot(path=str(ARTIFACTS / "main-2-denoised.png"), full_page=True)
        page.locator("#simulate-save").click()
        expect(page.locator("#simulate-save-status")).to_contain_text("Saved as step 1 of rollout #", timeout=10_000)
        [rollout] = filter_rollouts(store).items
        [step] = rollout_steps(store, rollout.id)
        assert json.loads(step.response)["status"] == "error"
        page.get_by_role("tab", name="Rollouts").click()  # the list shows the step just saved, with no reload
        expect(page.locator("#rollouts-table")).to_contain_text(str(rollout.id), timeout=15_000)
        page.get_by_role("tab", name="Simulate").click()

        # Model only, one click: the denoiser writes every value, step by step, around the pinned status
        page.locator("#simulate-model-only input").check()
        page.evaluate(WATCH_CANVAS)
        page.locator("#simulate-run").click()
        page.wait_for_function("window.__frames.some(f => f.done)", timeout=60_000)
        expect(page.locator("#simulate-canvas .wm-written")).to_contain_text("The model writes every masked token")
        expect(page.locator("#simulate-status")).to_contain_text("Done: ")
        steps = int(page.locator("#simulate-status").inner_text().split("Done: ")[1].split(" step")[0])
        assert steps >= 3  # the model's own denoising steps, each one a frame to replay
        assert page.locator("#simulate-canvas .wm-tokens u.w-outcome").count() == 0
        page.screenshot(path=str(ARTIFACTS / "main-2b-model-only.png"), full_page=True)
        page.locator("#simulate-model-only input").uncheck()  # the helpers back, as the Sampler had them
        page.locator("#simulate-run").click()
        expect(page.locator("#simulate-canvas .wm-written")).to_contain_text("the outcome head", timeout=60_000)

        # Annotate: rate the saved step with the keyboard; a second annotator's rating shows in the agreement view
        page.get_by_role("tab", name="Annotate").click()
        page.locator("#annotate-name").locator("textarea, input").first.fill("alice")
        page.locator("#annotate-start").click()
        expect(page.locator("#annotate-progress")).to_contain_text("rated 0 of 1", timeout=15_000)
        expect(page.locator("#annotate-exchange")).to_contain_text("refund_order")
        for key in ("4", "3", "5"):
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        expect(page.locator("#annotate-progress")).to_contain_text("rated 1 of 1", timeout=15_000)
        agreement = page.locator("#annotate-agreement")
        expect(agreement).to_contain_text("by 1 annotator(s)", timeout=15_000)
        bob = get_annotator(store, "bob")
        save_rating(store, bob.id, step.id, 4, 3, 4)
        page.get_by_role("button", name="Refresh agreement").click()
        expect(agreement).to_contain_text("by 2 annotator(s)", timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "main-3-rated.png"), full_page=True)
    rating = get_rating(store, get_annotator(store, "alice").id, step.id)
    assert (rating.realism, rating.outcome_correctness, rating.training_utility) == (4, 3, 5)
