"""A scenario designer in headless Chromium: a scenario is added in the Train tab's New scenario form (its success
condition tried on a saved episode and on one the simulator plays first, bad steering named), a 2-step run trains on
the curriculum version that holds it, and a run the curriculum cannot feed is refused with its reason, before it
starts.

Screenshots go to test-artifacts/ (git-ignored) for a person to look at."""

from __future__ import annotations

import json
import time
from pathlib import Path

from playwright.sync_api import expect
from serving import chromium_page
from test_train_browser import studio  # noqa: F401 - the Train tab on a fresh database, its runs' policy and cleanup

from wmstudio.store import MadeBy, append_step, create_rollout, get_run, list_runs, save_world_version
from wmstudio.train.agent.curriculum_scenarios import curriculum_scenarios
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SUCCESS = 'trajectory.calls.exists(c, c.name == "get_order" && c.status == "ok")'


def saved_lookup(store) -> None:
    """One saved retail episode to try a condition on: a lookup the simulator answered."""
    simulator = get_simulator("retail")
    world = simulator.world()
    lookup = Call("get_order", {"order_id": world.initial_state["orders"][0]["id"]})
    _, answer = simulator.step(world.initial_state, lookup)
    rollout = create_rollout(store, save_world_version(store, world).id, "a lookup")
    append_step(store, rollout.id, lookup, json.dumps(answer), MadeBy.by_model("simulator", {}, 0, []))


def test_add_a_scenario_train_on_it_and_see_a_run_refused_with_its_reason(studio):  # noqa: F811 - the fixture
    url, store = studio
    saved_lookup(store)
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1600}) as page:
        page.get_by_role("tab", name="Train").click()
        page.locator("#train-scenarios").get_by_text("Scenarios").first.click()
        expect(page.locator("#train-scenarios-summary")).to_contain_text("demo v1 · 90 scenarios", timeout=30_000)
        page.locator("#train-new-scenario").get_by_text("New scenario").first.click()

        world = page.locator("#train-new-world input")
        world.click()
        page.get_by_role("option", name="retail").click()
        expect(page.locator("#train-new-episode input")).to_have_value("#1 a lookup · 1 step(s)", timeout=15_000)
        page.locator("#train-new-task textarea").fill("Look the customer's first order up, then report it.")
        success = page.locator("#train-new-success textarea")
        tried = page.locator("#train-new-tried")
        success.fill("trajectory.calls.exists(c, ")
        page.locator("#train-new-try").click()
        expect(tried).to_contain_text("CEL syntax error", timeout=15_000)
        success.fill(SUCCESS)
        page.locator("#train-new-try").click()
        expect(tried).to_contain_text("Holds on rollout #1", timeout=15_000)
        episode = page.locator("#train-new-episode input")  # an episode the simulator plays, where none saved fits
        episode.click()
        page.get_by_role("option", name="played by the simulator").first.click()
        success.fill('trajectory.calls.exists(c, c.name == "cancel_order" && c.status == "ok")')
        page.locator("#train-new-try").click()
        expect(tried).to_contain_text("Holds on the simulator's episode", timeout=30_000)
        success.fill(SUCCESS)

        steering = page.locator("#train-new-steering textarea")
        message = page.locator("#train-new-message")
        steering.fill('get_order#0: status="error"')
        page.locator("#train-new-add").click()
        expect(message).to_contain_text("Cannot add the scenario", timeout=15_000)
        expect(message).to_contain_text("steering.get_order#0")
        steering.fill('get_order#1: status="error"\nget_order#1: error="RATE_LIMITED"')
        page.locator("#train-new-add").click()
        expect(message).to_contain_text("Added to demo v2", timeout=15_000)
        expect(page.locator("#train-scenarios-summary")).to_contain_text("demo v2 · 91 scenarios (61 train",
                                                                         timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "train-5-scenario-added.png"), full_page=True)

        start, note = page.locator("#train-start"), page.locator("#train-message")
        per_step = page.locator("#train-scenarios-per-step input[type=number]")
        per_step.fill("64")
        per_step.press("Enter")
        start.click()
        expect(note).to_contain_text("Cannot start training", timeout=15_000)
        expect(note).to_contain_text("has 61 training scenario(s) and a step plays 64")
        page.screenshot(path=str(ARTIFACTS / "train-6-run-refused.png"), full_page=True)
        assert list_runs(store) == []

        per_step.fill("4")
        per_step.press("Enter")
        page.locator("#train-env").get_by_label("simulator").check()
        page.locator("#train-max-steps textarea, #train-max-steps input").first.fill("2")
        start.click()
        expect(note).to_contain_text("Started run #1", timeout=30_000)
        deadline = time.monotonic() + 240
        while get_run(store, 1).status in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(1)
        page.locator("#train-refresh").click()
        expect(page.locator("#train-status")).to_contain_text("Run #1 · finished", timeout=30_000)
        # the result where a user looks: held-out success before -> after (overall, by family), the version played
        expect(page.locator("#train-status")).to_contain_text("Held-out success (judged by the simulators):")
        expect(page.locator("#train-status")).to_contain_text("curriculum demo v2")
        expect(page.locator("#train-heldout .js-plotly-plot")).to_have_count(1)
        expect(page.locator("#train-cancel")).to_be_disabled()  # nothing left to cancel
        page.screenshot(path=str(ARTIFACTS / "train-7-run-finished.png"), full_page=True)

    run = get_run(store, 1)
    assert run.status == "finished" and run.config["curriculum"] == "demo", run.error
    added = curriculum_scenarios(store)[-1]
    assert added.id == "retail-train-12" and added.success == SUCCESS and added.world.name == "retail"
    assert added.steering == {"get_order#1": [Anchor("status", "error"), Anchor("error", "RATE_LIMITED")]}
