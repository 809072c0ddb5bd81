"""The Train tab in headless Chromium: bad settings are named, a short GRPO run (`wmstudio train-grpo`, simulator
environment) starts in the background, its curves grow while the page watches, and Cancel stops it; a scenario's
success condition and steering are edited, bad input named.

Screenshots go to test-artifacts/ (git-ignored) for a person to look at."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import PLACEHOLDER, chromium_page, served_tabs
from test_jobs import policy_for_tests

from wmstudio.store import get_run, list_runs, open_store, run_metrics
from wmstudio.studio.context import StudioContext
from wmstudio.train.agent import jobs
from wmstudio.train.agent.curriculum_scenarios import curriculum_scenarios
from wmstudio.train.agent.jobs import job_alive, refresh_jobs
from wmstudio.ui.train_tab import build_train_tab
from wmstudio.world.steering.anchors import Anchor

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MAX_STEPS = 1000  # far more than the test waits for: the run is still going when it is cancelled
POINTS = "el => el.data[0].x.length"  # how many reward values the plotted figure holds


@pytest.fixture
def studio(tmp_path, monkeypatch):
    """The Train tab behind a first tab, on a fresh database; yields (url, store). Until the agent policy ships,
    the jobs it starts train a small SFT policy made here (`--policy`)."""
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the training process: one torch thread
    policy = policy_for_tests(tmp_path / "policy")
    if policy is not None:
        command = jobs.training_command
        monkeypatch.setattr(jobs, "training_command", lambda *args, **kwargs: [*command(*args, **kwargs),
                                                                               "--policy", policy])
    store = open_store(tmp_path / "studio.db")
    ctx = StudioContext(store=store, model="unused", ar_model=None)
    with served_tabs(ctx, {"World": PLACEHOLDER, "Train": build_train_tab}) as url:
        yield url, store
    for run in list_runs(store):  # never leave a training process behind
        if run.pid and job_alive(run.id, store.path):
            os.kill(run.pid, 9)


def test_start_watch_and_cancel_a_training_run(studio):
    url, store = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1500}) as page:
        page.get_by_role("tab", name="Train").click()
        message, runs = page.locator("#train-message"), page.locator("#train-runs")
        steps = page.locator("#train-max-steps textarea, #train-max-steps input").first
        expect(page.locator("#train-status")).to_contain_text("Start a run", timeout=15_000)

        for bad in ("0", "twenty"):  # the field is named, nothing starts
            steps.fill(bad)
            page.locator("#train-start").click()
            expect(message).to_contain_text("Cannot start training", timeout=15_000)
            expect(message).to_contain_text("Max steps")
            expect(message).to_contain_text(bad)
        assert list_runs(store) == []

        page.locator("#train-env").get_by_label("simulator").check()
        steps.fill(str(MAX_STEPS))
        page.locator("#train-start").click()
        expect(message).to_contain_text("Started run #1", timeout=30_000)
        expect(runs).to_contain_text("running", timeout=60_000)
        expect(page.locator("#train-status")).to_contain_text("Run #1")

        plot = page.locator("#train-curves .js-plotly-plot")
        page.wait_for_function("() => { const el = document.querySelector('#train-curves .js-plotly-plot');"
                               " return el && el.data && el.data[0].x.length >= 1; }", timeout=90_000)
        first = plot.evaluate(POINTS)
        page.screenshot(path=str(ARTIFACTS / "train-1-running.png"), full_page=True)
        page.wait_for_function(f"() => document.querySelector('#train-curves .js-plotly-plot').data[0].x.length"
                               f" > {first}", timeout=90_000)  # the timer redrew it with a new step
        grown = plot.evaluate(POINTS)
        assert grown > first
        expect(page.locator("#train-episodes")).to_contain_text("Step", timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "train-2-curves-grown.png"), full_page=True)

        page.locator("#train-cancel").click()
        expect(message).to_contain_text("Run #1 is cancelled", timeout=60_000)
        expect(runs).to_contain_text("cancelled", timeout=15_000)
        expect(page.locator("#train-status")).to_contain_text("cancelled")
        expect(page.locator("#train-cancel")).to_be_disabled(timeout=15_000)  # only a live run can be cancelled
        page.screenshot(path=str(ARTIFACTS / "train-3-cancelled.png"), full_page=True)

    run = get_run(store, 1)
    assert run.status == "cancelled" and run.config["env"] == "simulator"
    assert not job_alive(run.id, store.path)
    assert refresh_jobs(store) == [] and get_run(store, 1).status == "cancelled"
    logged = {m.step for m in run_metrics(store, 1, "reward")}
    assert grown <= len(logged) < MAX_STEPS


@pytest.fixture
def scenarios_studio(tmp_path, monkeypatch):
    """The Train tab alone on a fresh database (no run is started here); yields (url, store)."""
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    store = open_store(tmp_path / "studio.db")
    with served_tabs(StudioContext(store=store, model="unused", ar_model=None), {"Train": build_train_tab}) as url:
        yield url, store


def test_edit_a_scenarios_success_condition_and_steering(scenarios_studio):
    url, store = scenarios_studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1500}) as page:
        page.locator("#train-scenarios").get_by_text("Scenarios").first.click()
        expect(page.locator("#train-scenarios-summary")).to_contain_text("demo v1 · 90 scenarios", timeout=30_000)
        page.locator("#train-scenarios-table").get_by_text("airline-train-0", exact=True).click()
        success = page.locator("#train-scenario-success textarea")
        expect(success).to_have_value(re.compile(r'c\.name == "change_booking"'), timeout=15_000)
        steering = page.locator("#train-scenario-steering textarea")
        message = page.locator("#train-scenario-message")

        success.fill("trajectory.calls.exists(c, ")
        page.locator("#train-scenario-save").click()
        expect(message).to_contain_text("Cannot save the scenario", timeout=15_000)
        expect(message).to_contain_text("success")
        expect(message).to_contain_text("CEL syntax error")

        success.fill('trajectory.calls.exists(c, c.name == "change_booking" && c.status == "error")')
        steering.fill('change_booking: status="error"\nlaunch_rocket: status="ok"')
        page.locator("#train-scenario-save").click()
        expect(message).to_contain_text("steering.launch_rocket", timeout=15_000)

        steering.fill('change_booking: status="error"')
        page.locator("#train-scenario-save").click()
        expect(message).to_contain_text("Saved airline-train-0", timeout=15_000)
        expect(page.locator("#train-scenarios-table")).to_contain_text('c.status == "error"')
        page.screenshot(path=str(ARTIFACTS / "train-4-scenario-edited.png"), full_page=True)

    [edited] = [s for s in curriculum_scenarios(store) if s.id == "airline-train-0"]
    assert edited.success.endswith('c.status == "error")')
    assert edited.steering == {"change_booking": [Anchor("status", "error")]}
