"""The Rollouts tab in headless Chromium: an accepted rollout saved in curriculum v1 stays frozen there.

Accept a rollout, save it in a curriculum version, then hand-edit its step: a response ending in `}}}` is refused
with the reason, a valid edit un-accepts the rollout, and exporting v1 still ships what it was saved with. And the
shipped agent policy, given a task, fills the call box with the call it proposes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect
from serving import chromium_page, open_rollout, served_tabs

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import (
    MadeBy,
    append_step,
    create_rollout,
    get_curriculum,
    get_rollout,
    get_world,
    open_store,
    rollout_steps,
    save_world_version,
)
from wmstudio.studio.context import StudioContext
from wmstudio.studio.curricula import export_rollouts
from wmstudio.ui.rollouts_tab import build_rollouts_tab
from wmstudio.world.checks.report import check_step
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def studio(tiny_model, demo_tokenizer, tmp_path_factory, one_thread):
    """The Rollouts tab on a tiny model, with one rollout holding a true retail step; yields (url, store, id)."""
    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    store = open_store(tmp_path_factory.mktemp("db") / "studio.db")
    saved = save_world_version(store, world)
    order = world.initial_state["orders"][0]["id"]
    call = Call("get_order", {"order_id": order})
    _, truth = get_simulator("retail").step(world.initial_state, call)
    text = json.dumps(truth)
    rollout = create_rollout(store, saved.id, "frozen in v1")
    append_step(store, rollout.id, call, text, MadeBy.by_hand("tester"), check_step(world, call, text))
    ctx = StudioContext(store=store, model=str(tiny_model(demo_tokenizer, tmp_path_factory.mktemp("mdlm"))),
                        ar_model=None)
    with served_tabs(ctx, {"Rollouts": build_rollouts_tab}) as url:
        yield url, store, rollout.id, text


def test_a_saved_curriculum_version_exports_what_it_was_saved_with(studio):
    url, store, rid, original = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(url, viewport={"width": 1400, "height": 1100}) as page:
        open_rollout(page, rid, "frozen in v1")
        page.get_by_role("button", name="Accept", exact=True).click()
        expect(page.locator("#rollout-message")).to_contain_text(f"Rollout {rid} is accepted")

        page.get_by_text("Curricula and datasets").click()
        page.get_by_label("Curriculum name").fill("frozen")
        page.get_by_label("Rollout ids to add (accepted ones)").fill(str(rid))
        page.get_by_role("button", name="Save curriculum version").click()
        expect(page.locator("#curriculum-message")).to_contain_text("v1: 1 rollouts")

        page.get_by_text("Branch or edit a step").click()
        page.get_by_role("button", name="Load its response").click()
        editor = page.locator("#rollout-edit .cm-content")
        expect(editor).to_contain_text('"status"')
        editor.fill(original[:-1] + "}}}")
        page.get_by_role("button", name="Save edit").click()
        expect(page.locator("#rollout-message")).to_contain_text("not saved: it is not JSON")
        assert rollout_steps(store, rid)[0].response == original  # the refused edit changed nothing
        assert get_rollout(store, rid).status == "accepted"

        edited = json.dumps({**json.loads(original), "message": "edited by hand"})
        editor.fill(edited)
        page.get_by_role("button", name="Save edit").click()
        expect(page.locator("#rollout-message")).to_contain_text("is pending again")
        page.screenshot(path=str(ARTIFACTS / "rollouts-frozen-curriculum.png"), full_page=True)
    assert json.loads(rollout_steps(store, rid)[0].response)["message"] == "edited by hand"
    assert get_rollout(store, rid).status == "pending"  # an edit un-accepts
    shipped = export_rollouts(store, get_curriculum(store, "frozen", 1).id)
    assert [step.response for step in shipped[0].steps] == [original]  # v1 ships what it was saved with


def test_a_trained_policy_proposes_the_next_call(studio):
    url, store, rid, _ = studio
    world = get_world(store, get_rollout(store, rid).world_id).spec()
    order = next(o["id"] for o in world.initial_state["orders"] if o["status"] == "pending")
    fresh = create_rollout(store, get_rollout(store, rid).world_id, "proposed")
    with chromium_page(url, viewport={"width": 1400, "height": 1100}) as page:
        page.get_by_role("button", name="Propose next call").click()
        expect(page.locator("#rollout-message")).to_contain_text("open a rollout first", timeout=20_000)
        page.locator("#rollout-id input").fill(str(fresh.id))
        page.get_by_role("button", name="Open", exact=True).click()
        expect(page.locator("#rollout-header")).to_contain_text("proposed", timeout=20_000)
        expect(page.locator("#rollout-policy input")).to_have_value("agent-small · shipped SFT policy")
        page.locator("#rollout-task textarea").fill(f"The customer wants to cancel order {order}.")
        page.get_by_role("button", name="Propose next call").click()
        expect(page.locator("#rollout-message")).to_contain_text("proposes cancel_order", timeout=20_000)
        expect(page.locator("#rollout-call .cm-content")).to_contain_text(f'"order_id": "{order}"')
        page.screenshot(path=str(ARTIFACTS / "rollouts-policy-proposal.png"), full_page=True)
