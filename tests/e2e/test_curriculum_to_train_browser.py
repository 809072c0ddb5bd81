"""From Rollouts to Train in headless Chromium: a curriculum saved in the Rollouts tab is chosen for Export at once,
exports, and appears in the Train tab's curriculum list, where picking it says what it still needs (scenarios with
success conditions) and Start refuses it saying the same, before any run is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import chromium_page, open_rollout, served_tabs

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import MadeBy, append_step, create_rollout, list_runs, open_store, save_world_version
from wmstudio.studio.context import StudioContext
from wmstudio.ui.rollouts_tab import build_rollouts_tab
from wmstudio.ui.train_tab import build_train_tab
from wmstudio.world.checks.report import check_step
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def studio(tmp_path, monkeypatch):
    """The Rollouts and Train tabs over a store holding one retail rollout; yields (url, store, rollout id)."""
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPACE_ID", raising=False)
    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    store = open_store(tmp_path / "studio.db")
    saved = save_world_version(store, world)
    call = Call("get_order", {"order_id": world.initial_state["orders"][0]["id"]})
    _, truth = get_simulator("retail").step(world.initial_state, call)
    rollout = create_rollout(store, saved.id, "a refund to train on")
    append_step(store, rollout.id, call, json.dumps(truth), MadeBy.by_hand("tester"),
                check_step(world, call, json.dumps(truth)))
    ctx = StudioContext(store=store, model="unused", ar_model=None)  # nothing here generates
    with served_tabs(ctx, {"Rollouts": build_rollouts_tab, "Train": build_train_tab}) as url:
        yield url, store, rollout.id


def test_a_curriculum_saved_in_rollouts_exports_and_appears_in_the_train_tab(studio):
    url, store, rid = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1200}) as page:
        open_rollout(page, rid, "a refund to train on")
        page.get_by_role("button", name="Accept", exact=True).click()
        expect(page.locator("#rollout-message")).to_contain_text(f"Rollout {rid} is accepted", timeout=10_000)

        page.get_by_text("Curricula and datasets").click()
        page.get_by_label("Curriculum name").fill("refunds")
        page.get_by_label("Rollout ids to add (accepted ones)").fill(str(rid))
        page.get_by_role("button", name="Save curriculum version").click()
        message = page.locator("#curriculum-message")
        expect(message).to_contain_text("refunds v1: 1 rollouts", timeout=10_000)
        expect(page.get_by_label("Curriculum version")).to_have_value("refunds v1 (1 rollouts)")  # chosen at once
        page.get_by_role("button", name="Export dataset folder (zip)").click()
        expect(message).to_contain_text("Exported refunds v1", timeout=30_000)

        page.get_by_role("tab", name="Train").click()
        page.locator("#train-curriculum input").click()
        page.get_by_role("option", name="refunds v1 · 1 rollouts, no scenarios yet").click()
        note = page.locator("#train-curriculum-note")
        expect(note).to_contain_text("refunds v1 holds 1 rollout(s) and no scenarios", timeout=10_000)
        expect(note).to_contain_text("success condition")
        page.locator("#train-start").click()
        expect(page.locator("#train-message")).to_contain_text("Cannot start training", timeout=10_000)
        expect(page.locator("#train-message")).to_contain_text("Curriculum")
        page.screenshot(path=str(ARTIFACTS / "train-curriculum-from-rollouts.png"), full_page=True)
    assert list_runs(store) == []
