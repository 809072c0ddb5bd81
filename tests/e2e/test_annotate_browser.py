"""The Annotate tab in headless Chromium: type a name, rate a step with the keyboard (1-5, Enter), skip with S,
see progress advance and the agreement view update, and find the name kept in the browser after a reload.

Screenshots go to test-artifacts/ (git-ignored) for a person to look at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import PLACEHOLDER, chromium_page, served_tabs

from wmstudio.store import (
    MadeBy,
    annotator_progress,
    append_step,
    create_rollout,
    get_annotator,
    get_rating,
    open_store,
    save_rating,
    save_world_version,
)
from wmstudio.store.seeding import demo_worlds, simulated_rollout
from wmstudio.studio.context import StudioContext
from wmstudio.ui.annotate_tab import ANNOTATE_SHORTCUTS_HEAD, build_annotate_tab

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def studio(tmp_path, monkeypatch):
    """A studio with the Annotate tab behind a first tab, three retail steps, and bob's ratings of all three."""
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    monkeypatch.delenv("SPACE_ID", raising=False)
    store = open_store(tmp_path / "studio.db")
    world = next(w for w in demo_worlds() if w.name == "retail")
    rollout = create_rollout(store, save_world_version(store, world).id, "three steps")
    steps = [append_step(store, rollout.id, s.call, s.response, MadeBy.by_model("wm-test"), s.checks)
             for s in simulated_rollout(world, seed=3, steps=3)]
    bob = get_annotator(store, "bob")
    for step, scores in zip(steps, ([5, 4, 4], [2, 2, 1], [4, 5, 3]), strict=True):
        save_rating(store, bob.id, step.id, *scores)
    ctx = StudioContext(store=store, model="unused", ar_model=None)
    with served_tabs(ctx, {"World": PLACEHOLDER, "Annotate": build_annotate_tab}, head=ANNOTATE_SHORTCUTS_HEAD) as url:
        yield url, ctx, steps


def test_rate_with_the_keyboard_and_watch_progress_and_agreement(studio):
    url, ctx, steps = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1300}) as page:
        page.get_by_role("tab", name="Annotate").click()
        name = page.locator("#annotate-name").locator("textarea, input").first
        name.fill("alice")
        page.locator("#annotate-start").click()
        progress, agreement = page.locator("#annotate-progress"), page.locator("#annotate-agreement")
        expect(progress).to_contain_text("rated 0 of 3", timeout=15_000)
        expect(agreement).to_contain_text("by 1 annotator(s)")
        expect(page.locator("#annotate-distribution .js-plotly-plot")).to_be_visible(timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "annotate-1-first-item.png"), full_page=True)

        page.keyboard.press("4")  # realism, then the highlight moves on
        page.keyboard.press("2")  # outcome correctness
        page.keyboard.press("5")  # training utility
        for question, score in (("realism", "4"), ("outcome_correctness", "2"), ("training_utility", "5")):
            expect(page.locator(f"#rate-{question} input:checked")).to_have_count(1)
            checked = page.locator(f"#rate-{question} label").filter(has=page.locator("input:checked"))
            expect(checked).to_have_text(re.compile(rf"^\s*{score}\s*$"))

        note = page.locator("#annotate-note textarea")  # keys typed in a text box stay text
        note.click()
        note.type("1 s 5")
        expect(note).to_have_value("1 s 5")
        expect(page.locator("#rate-realism label").filter(has=page.locator("input:checked"))).to_have_text(
            re.compile(r"^\s*4\s*$"))
        page.locator("#annotate-exchange").click()  # leave the text box
        page.screenshot(path=str(ARTIFACTS / "annotate-2-rated-by-keyboard.png"), full_page=True)

        page.keyboard.press("Enter")
        expect(progress).to_contain_text("rated 1 of 3", timeout=15_000)
        expect(agreement).to_contain_text("by 2 annotator(s)")
        expect(page.locator("#annotate-message")).to_contain_text("Saved your rating of that step")
        expect(page.locator("#rate-realism input:checked")).to_have_count(0)  # fresh answers for the next step
        page.screenshot(path=str(ARTIFACTS / "annotate-3-after-submit.png"), full_page=True)

        page.keyboard.press("s")
        expect(page.locator("#annotate-message")).to_contain_text("Skipped that step", timeout=15_000)
        expect(progress).to_contain_text("skipped 1")

        page.reload()  # the name is kept in this browser and the next item comes back by itself
        page.get_by_role("tab", name="Annotate").click()
        expect(page.locator("#annotate-name").locator("textarea, input").first).to_have_value("alice", timeout=15_000)
        expect(progress).to_contain_text("rated 1 of 3", timeout=15_000)
        expect(page.locator("#annotate-distribution .js-plotly-plot")).to_be_visible(timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "annotate-4-after-reload.png"), full_page=True)

    alice = get_annotator(ctx.store, "alice")
    rating = get_rating(ctx.store, alice.id, steps[0].id)
    assert (rating.realism, rating.outcome_correctness, rating.training_utility, rating.note) == (4, 2, 5, "1 s 5")
    progress = annotator_progress(ctx.store, alice.id)
    assert (progress.rated, progress.skipped) == (1, 1)
