"""The Annotate tab over HTTP: a blind queue with the world context, ratings and skips, own progress, the
agreement view (Krippendorff's alpha, ordinal) after two annotators rate the same steps, who counts as the
annotator in each sign-in mode, and clear messages instead of tracebacks.

Each test launches the real Gradio app (only this tab) on a fresh SQLite file and drives it with gradio_client."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio_client import Client
from serving import free_port

from wmstudio.metrics.agreement import agreement_report
from wmstudio.problems import InvalidInput
from wmstudio.store import (
    MadeBy,
    append_step,
    branch_rollout,
    create_rollout,
    get_annotator,
    list_annotators,
    open_store,
    ratings_for_dimension,
    save_rating,
    save_world_version,
)
from wmstudio.store.seeding import demo_worlds, simulated_rollout
from wmstudio.studio.context import StudioContext
from wmstudio.ui.annotate_tab import (
    ANNOTATE_SHORTCUTS_HEAD,
    ANNOTATE_SHORTCUTS_JS,
    build_annotate_tab,
)
from wmstudio.ui.identity import (
    profile_username,
    request_username,
    resolve_identity,
    sign_in_mode,
)

SECRET_MODEL = "wm-secret-model-7"
ITEM = 9  # the item components come first in every output; then the message and your progress


def fill_store(path):
    """One retail rollout of three steps made by a named model, plus a branch copy that must not be rated."""
    store = open_store(path)
    world = next(w for w in demo_worlds() if w.name == "retail")
    row = save_world_version(store, world)
    rollout = create_rollout(store, row.id, "three steps")
    for step in simulated_rollout(world, seed=3, steps=3):
        append_step(store, rollout.id, step.call, step.response,
                    MadeBy.by_model(SECRET_MODEL, {"steps": 12, "strategy": "low_confidence"}, seed=4242),
                    step.checks)
    branch_rollout(store, rollout.id, 1)
    return store


@pytest.fixture
def launch(tmp_path, monkeypatch):
    """Start the tab on a fresh store; `launch(users={...})` signs clients in as with `--auth`."""
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    monkeypatch.delenv("SPACE_ID", raising=False)
    apps = []

    def start(users=None):
        store = fill_store(tmp_path / f"studio{len(apps)}.db")
        ctx = StudioContext(store=store, model="unused", ar_model=None, users=dict(users or {}))
        with gr.Blocks() as app:
            build_annotate_tab(ctx, app)
        app.queue()
        auth = list(ctx.users.items()) or None
        _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                               quiet=True, auth=auth, head=ANNOTATE_SHORTCUTS_HEAD)
        apps.append(app)
        client = Client(url, verbose=False, auth=next(iter(ctx.users.items()), None))
        return client, ctx

    yield start
    for app in apps:
        app.close()


def start(client, name):
    saved, identity, *rest = client.predict(name, api_name="/annotate_start")
    return saved, identity, rest[:ITEM], rest[ITEM:]


def agreement(client):
    """The agreement table and chart, as the page shows them after each rating."""
    table, chart = client.predict(api_name="/annotate_agreement")
    return table, {trace["name"]: trace["y"] for trace in json.loads(chart["plot"])["data"]}


def rate(client, name, step_id, scores, tags=(), note=""):
    out = client.predict(name, step_id, *scores, list(tags), note, api_name="/annotate_submit")
    return out[:ITEM], out[ITEM:]


def test_the_queue_shows_each_step_blind_with_its_world_context(launch):
    client, _ctx = launch()
    saved, identity, item, (message, progress) = start(client, "alice")
    assert saved == "alice" and "Rating as **alice**" in identity
    step_id, context, state, exchange, *answers = item
    world = next(w for w in demo_worlds() if w.name == "retail")
    assert world.task[:60] in context and world.rules[0].text in context
    assert "first step of its rollout" in context
    assert '"name": "' in exchange and "The response to rate" in exchange
    assert json.dumps(world.initial_state, indent=2)[:40] in state
    assert answers == [None, None, None, [], ""]
    everything = json.dumps([identity, item, message, progress, agreement(client)[0]])
    assert SECRET_MODEL not in everything and "4242" not in everything and "low_confidence" not in everything
    assert "rated **0** of 3" in progress  # the branch copies are not in the queue

    item, (message, progress) = rate(client, "alice", step_id, [4, 5, 3])
    assert "Saved your rating of that step" in message and "rated **1** of 3" in progress
    assert item[0] != step_id and "Earlier steps** (1)" in item[1]  # the second step, with the first as history


def test_two_annotators_rating_the_same_steps_show_alpha_and_distributions(launch):
    client, ctx = launch()
    scores = {"alice": [[4, 5, 3], [2, 2, 1], [5, 4, 4]], "bob": [[5, 5, 3], [1, 3, 1], [4, 4, 5]]}
    for name, rows in scores.items():
        *_, item, _ = start(client, name)
        for row in rows:
            item, after = rate(client, name, item[0], row, tags=["error cascade"] if row[0] < 3 else ())
    _message, progress = after
    table, bars = agreement(client)
    assert "rated **3** of 3" in progress and "Nothing left to rate" in item[1]

    units = sorted({v.step_id for v in ratings_for_dimension(ctx.store, "realism")})
    expected = agreement_report([
        {"unit": unit, "annotator": name, **dict(zip(("realism", "outcome_correctness", "training_utility"),
                                                     rows[i], strict=True))}
        for name, rows in scores.items() for i, unit in enumerate(units)
    ])
    for entry in expected.dimensions:
        assert entry.alpha is not None and f"**{entry.alpha:.3f}**" in table
    assert "over 3 rated steps by 2 annotator(s)" in table
    assert bars["Realism"] == [1, 1, 0, 2, 2] and bars["Outcome correctness"] == [0, 1, 1, 2, 2]


def test_skipping_moves_on_for_you_only_and_counts(launch):
    client, _ = launch()
    *_, item, _ = start(client, "carol")
    first = item[0]
    out = client.predict("carol", first, api_name="/annotate_skip")
    item, (message, progress) = out[:ITEM], out[ITEM:]
    assert "Skipped that step" in message and item[0] != first
    assert "skipped 1" in progress and "2 to go" in progress
    *_, other, _ = start(client, "dave")
    assert other[0] == first  # a skip takes the step out of carol's queue only


def test_someone_else_rating_first_changes_the_agreement_view_you_see(launch):
    client, ctx = launch()
    erin = get_annotator(ctx.store, "erin")
    *_, item, _ = start(client, "frank")
    before, _ = agreement(client)
    save_rating(ctx.store, erin.id, item[0], 3, 3, 3)
    rate(client, "frank", item[0], [3, 3, 2])
    after, bars = agreement(client)
    assert "no ratings yet" in before and "by 2 annotator(s)" in after and bars["Training utility"] == [0, 1, 1, 0, 0]


def test_bad_input_is_explained_and_the_answers_stay(launch):
    client, _ = launch()
    *_, item, _ = start(client, "gina")
    step_id = item[0]
    out = client.predict("gina", step_id, None, 4, None, ["other"], "my note", api_name="/annotate_submit")
    message = out[ITEM]
    assert "Realism" in message and "Training utility" in message and "Outcome" not in message
    assert all(value == {"__type__": "update"} for value in out[:ITEM])  # nothing cleared on the page
    cases = [
        client.predict("", step_id, 3, 3, 3, [], "", api_name="/annotate_submit")[ITEM],
        client.predict("gina", None, 3, 3, 3, [], "", api_name="/annotate_submit")[ITEM],
        client.predict("gina", 999_999, 3, 3, 3, [], "", api_name="/annotate_submit")[ITEM],
        client.predict("gina", 999_999, api_name="/annotate_skip")[ITEM],
        client.predict("x" * 101, api_name="/annotate_start")[2 + ITEM],
    ]
    expected = ["type your name", "press Start", "`step_id`", "`step_id`", "keep it under 100"]
    for want, message in zip(expected, cases, strict=True):
        assert message.startswith("**Cannot") and want in message and "Traceback" not in message, (want, message)


def test_with_auth_the_signed_in_user_rates_whatever_name_is_typed(launch):
    client, ctx = launch(users={"ann": "secret"})
    saved, identity, item, _ = start(client, "mallory")
    assert "Rating as **ann** (signed-in user)" in identity and saved == {"__type__": "update"}
    rate(client, "mallory", item[0], [2, 3, 4])
    assert [(a.name, a.source) for a in list_annotators(ctx.store)] == [("ann", "auth")]


def test_identity_follows_the_sign_in_mode(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert sign_in_mode({}) == "local" and sign_in_mode({"ann": "pw"}) == "auth"
    assert resolve_identity("  ada ", None, None, {}).name == "ada"
    assert resolve_identity("ada", "ann", None, {"ann": "pw"}).name == "ann"
    with pytest.raises(InvalidInput, match="type your name"):
        resolve_identity("   ", None, None, {})
    with pytest.raises(InvalidInput, match="sign in"):
        resolve_identity("ada", None, None, {"ann": "pw"})

    monkeypatch.setenv("SPACE_ID", "me/studio")
    assert sign_in_mode({}) == "hf"
    assert resolve_identity("ada", None, "hf-user", {}) == resolve_identity("", None, "hf-user", {})
    assert resolve_identity("", None, "hf-user", {}).source == "hf"
    with pytest.raises(InvalidInput, match="log in with Hugging Face"):
        resolve_identity("ada", None, None, {})

    assert profile_username(SimpleNamespace(username="hf-user")) == "hf-user" and profile_username(None) is None
    assert request_username(SimpleNamespace(username="ann")) == "ann" and request_username(None) is None


def test_the_shortcut_script_is_one_function_for_launch_and_a_script_tag_for_head():
    assert ANNOTATE_SHORTCUTS_JS.strip().startswith("() =>")
    assert ANNOTATE_SHORTCUTS_HEAD.startswith("<script>") and ANNOTATE_SHORTCUTS_JS.strip() in ANNOTATE_SHORTCUTS_HEAD
    for element in ("annotate-panel", "annotate-submit", "annotate-skip", "rate-realism"):
        assert element in ANNOTATE_SHORTCUTS_JS
