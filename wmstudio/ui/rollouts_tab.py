"""The Rollouts tab: build multi-step trajectories with the world model (a trained agent policy may propose each
next call), branch, hand-edit, accept/reject and tag, filter and search them, gather them into curricula, and
export/import curricula as Hugging Face dataset folders.

Each handler is a plain function of form values over the store (and the loaded model for generation); bad input
comes back as a message naming the field, with the user's input left in place."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
from gradio.context import Context

from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import setting_specs
from wmstudio.studio.chat_rows import import_chat_rows, import_trajectories, looks_like_chat_rows
from wmstudio.studio.context import StudioContext
from wmstudio.studio.curricula import (
    add_to_curriculum,
    curriculum_rollouts,
    export_curriculum,
    import_dataset_file,
    list_curricula,
    push_curriculum,
    zip_folder,
)
from wmstudio.studio.policy_proposals import policy_choices, propose_next_call
from wmstudio.studio.rollouts import (
    ROLLOUT_STATUSES,
    Store,
    branch_at,
    create_rollout,
    edit_response,
    filter_rollouts,
    generate_next_step,
    get_rollout,
    rollout_steps,
    set_status,
    set_tags,
    step_at,
)
from wmstudio.studio.worlds import list_worlds, world_versions
from wmstudio.ui.forms import parse_json_field
from wmstudio.ui.identity import on_spaces, request_username
from wmstudio.ui.messages import as_uploaded, failure_markdown
from wmstudio.ui.rollout_view import RolloutView, render_rollout
from wmstudio.ui.setting_widgets import setting_widget
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import read_anchors

PAGE_SIZE = 15
TABLE_COLUMNS = ["id", "world", "title", "status", "tags", "steps", "failed", "created"]
TABLE_WIDTHS = ["7%", "14%", "29%", "11%", "12%", "8%", "8%", "11%"]


# --- finding rollouts -----------------------------------------------------------------------------------------


def world_choices(store: Store) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    """(world names for the filter, every world version for "new rollout": label and id), newest version first."""
    names, versions = [("any world", "")], []
    for summary in list_worlds(store):
        names.append((summary.name, summary.name))
        versions += [(f"{w.name} v{w.version}", w.id) for w in world_versions(store, summary.name)]
    return names, versions


def curriculum_choices(store: Store) -> list[tuple[str, int]]:
    """Every curriculum version as (label, id)."""
    return [(f"{s.curriculum.name} v{s.curriculum.version} ({s.rollout_count} rollouts)", s.curriculum.id)
            for s in list_curricula(store)]


def search_rollouts(store: Store, world: str | None, status: str | None, tag: str | None, text: str | None,
                    check: str | None, page: Any) -> tuple[pd.DataFrame, str, int]:
    """One page of rollouts matching the filters (empty filters match all): the table, a summary line, the page."""
    page = max(1, int(page or 1))
    check_ok = {"passed": True, "failed": False}.get(check or "")
    found = filter_rollouts(store, world=world or None, status=status or None, tag=(tag or "").strip() or None,
                            text=(text or "").strip() or None, check_ok=check_ok, page=page, page_size=PAGE_SIZE)
    if page > found.pages:
        page = found.pages
        found = filter_rollouts(store, world=world or None, status=status or None, tag=(tag or "").strip() or None,
                                text=(text or "").strip() or None, check_ok=check_ok, page=page, page_size=PAGE_SIZE)
    rows = [[r.id, f"{r.world_name} v{r.world_version}", r.title, r.status, ", ".join(r.tags), r.step_count,
             r.failed_steps, r.created_at.strftime("%m-%d %H:%M")] for r in found.items]
    counts = " · ".join(f"{name} {n}" for name, n in found.status_counts.items())
    info = f"**{found.total}** rollout(s) match ({counts}) · page {page} of {found.pages}"
    return pd.DataFrame(rows, columns=TABLE_COLUMNS), info, page


# --- actions: form values parsed here, the work done by wmstudio.studio --------------------------------------


def new_rollout(store: Store, world_id: Any, title: str) -> RolloutView:
    """Start an empty rollout in the chosen world version."""
    if world_id in (None, ""):
        raise InvalidInput(Problem("world", "choose a world version to start the rollout in"))
    rollout = create_rollout(store, int(world_id), title or "")
    return render_rollout(store, rollout.id)


def generate_step(ctx: StudioContext, rollout_id: Any, call_text: str, anchors_text: str,
                  temperature: Any = 0.0, seed: Any = 0) -> tuple[RolloutView, str]:
    """Generate the response to the typed call (history = the earlier steps), append it and show the rollout."""
    rid = _rollout_id(rollout_id)
    if not (call_text or "").strip():
        raise InvalidInput(Problem("call", 'type the next call as JSON, e.g. `{"name": "get_order", '
                                          '"arguments": {"order_id": "ORD-1"}}` (the tools are listed above)'))
    call = Call.from_json(parse_json_field(call_text, "call"), "call")
    anchors = read_anchors(anchors_text)
    settings = SamplerSettings.from_form(temperature=temperature, seed=seed)  # read as Simulate reads them
    was = get_rollout(ctx.store, rid).status
    step, simulation = generate_next_step(ctx, rid, call, anchors, settings)
    verdict = "checks pass" if step.check_ok else "checks fail (see the step)"
    elapsed = simulation.generation.elapsed_ms
    return render_rollout(ctx.store, rid), (f"Step {step.index + 1} generated in {elapsed:.0f} ms; {verdict}."
                                            f"{_unaccepted(was)}")


def propose_call(store: Store, rollout_id: Any, policy_path: str | None, task_text: str) -> tuple[str | None, str]:
    """Ask the chosen policy for the next call: (its JSON for the call box, message), or (None, its final answer)
    when the policy would end the episode here."""
    proposal = propose_next_call(store, _rollout_id(rollout_id), policy_path, task_text)
    if proposal.call is None:
        return None, (f"The policy would end the episode here with the answer: **{proposal.final_answer}**")
    return proposal.call_text, (f"The policy proposes `{proposal.call.name}` for the task “{proposal.task}”: "
                                "edit the call if you like, then press **Generate and append**.")


def branch(store: Store, rollout_id: Any, step_number: Any) -> tuple[RolloutView, str]:
    """A new rollout with copies of steps 1..step_number, opened in place of the current one."""
    rid = _rollout_id(rollout_id)
    index = _step_index(store, rid, step_number)
    made = branch_at(store, rid, index)
    return render_rollout(store, made.id), f"Rollout {made.id} branches rollout {rid} at step {index + 1}."


def load_response(store: Store, rollout_id: Any, step_number: Any) -> str:
    """The response text of one step, for the editor."""
    rid = _rollout_id(rollout_id)
    return step_at(store, rid, _step_index(store, rid, step_number)).response


def save_edit(store: Store, rollout_id: Any, step_number: Any, response_text: str,
              editor: str | None = None) -> tuple[RolloutView, str]:
    """Replace a step's response by hand (the original kept) and check it again."""
    rid = _rollout_id(rollout_id)
    index = _step_index(store, rid, step_number)
    before, was = step_at(store, rid, index).response, get_rollout(store, rid).status
    _, report = edit_response(store, rid, index, response_text, editor)
    if before == response_text:
        return render_rollout(store, rid), "Nothing changed: the response is the same."
    verdict = "checks pass" if report.ok else "checks fail (see the step)"
    return render_rollout(store, rid), (f"Step {index + 1} edited; the original is kept; {verdict}."
                                        f"{_unaccepted(was)}")


def change_status(store: Store, rollout_id: Any, status: str) -> tuple[RolloutView, str]:
    """Accept, reject or reset a rollout to pending."""
    rid = _rollout_id(rollout_id)
    set_status(store, rid, status)
    return render_rollout(store, rid), f"Rollout {rid} is {status}."


def change_tags(store: Store, rollout_id: Any, tags_text: str) -> tuple[RolloutView, str]:
    """Replace a rollout's tags with the comma-separated list."""
    rid = _rollout_id(rollout_id)
    tags = set_tags(store, rid, [t for t in (tags_text or "").split(",")])
    return render_rollout(store, rid), f"Tags of rollout {rid}: {', '.join(tags) or 'none'}."


def save_curriculum_version(store: Store, name: str, description: str, ids_text: str) -> tuple[str, int]:
    """Save the next version of a curriculum with the listed rollout ids added: a message, and the version's id."""
    ids = []
    for i, part in enumerate(p.strip() for p in re.split(r"[,\s]+", ids_text or "") if p.strip()):
        if not part.isdigit():
            raise InvalidInput(Problem(f"rollout_ids[{i}]", f"{part!r} is not a rollout id: list ids like 3, 7, 12"))
        ids.append(int(part))
    curriculum, added = add_to_curriculum(store, name, description, ids)
    total = len(curriculum_rollouts(store, curriculum.id))
    return f"Curriculum **{curriculum.name}** v{curriculum.version}: {total} rollouts ({added} added).", curriculum.id


def export_for_download(store: Store, curriculum_id: Any) -> tuple[str, str]:
    """Export a curriculum version as a dataset folder and zip it: (zip path, message)."""
    folder, name = export_curriculum(store, _curriculum_id(curriculum_id, "export"))
    return str(zip_folder(folder)), (f"Exported **{name}** to `{folder}` (parquet + JSONL + card); the zip is "
                                     "ready to download.")


def push(store: Store, curriculum_id: Any, repo_id: str, token: str | None, private: bool,
         signed_in: str | None = None, single_user: bool = False) -> str:
    """Push a curriculum version with the token typed in, the Space user's, or (single-user studio only) HF_TOKEN."""
    url = push_curriculum(store, _curriculum_id(curriculum_id, "push"), repo_id, token, private, signed_in,
                          single_user)
    return f"Pushed to {url}"


def import_upload(store: Store, upload: str | None) -> str:
    """Import an uploaded dataset export, or another project's world-model chat rows, as new rollouts."""
    if not upload:
        raise InvalidInput(Problem("file", "choose an exported dataset (the .zip, or its .parquet / .jsonl file) "
                                           "or a JSON Lines file of world-model chat rows"))
    path = Path(upload)
    if looks_like_chat_rows(path):
        result = import_chat_rows(store, path)
    elif path.suffix.lower() == ".json":  # a trajectory file: OpenAI messages, tau-bench records, our steps
        result = import_trajectories(store, path)
    else:
        result = import_dataset_file(store, path)
    ids = ", ".join(map(str, result.rollout_ids[:20])) + (" …" if len(result.rollout_ids) > 20 else "")
    if result.repeated:
        return (f"This file was imported before: nothing was added. Its {len(result.rollout_ids)} rollout(s) "
                f"with {result.steps} steps are {ids or 'none'}.")
    return (f"Imported {len(result.rollout_ids)} rollout(s) with {result.steps} steps as new rollouts: "
            f"{ids or 'none'}.")


def _unaccepted(was: str) -> str:
    return (" The rollout was accepted and is pending again: accept it once more to use it in a new curriculum "
            "version (saved versions keep what they were saved with).") if was == "accepted" else ""


def _curriculum_id(value: Any, doing: str) -> int:
    if value in (None, ""):
        raise InvalidInput(Problem("curriculum", f"choose a curriculum version to {doing}"))
    return int(value)


def _rollout_id(value: Any) -> int:
    """The open rollout's id; an empty box (which the page sends as 0: ids start at 1) means none is open."""
    if value in (None, "", 0) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidInput(Problem("rollout", "open a rollout first (pick one in the list or start a new one)"))
    return int(value)


def _step_index(store: Store, rollout_id: int, value: Any) -> int:
    """The 0-based index of step number `value` (the tabs count steps from 1, as the Simulate tab does)."""
    if value in (None, "") or (isinstance(value, float) and not value.is_integer()):
        raise InvalidInput(Problem("step", "give the step number (1 is the first step)"))
    count = len(rollout_steps(store, rollout_id))
    if not 1 <= int(value) <= count:
        have = f"steps 1..{count}" if count else "no steps yet"
        raise InvalidInput(Problem("step", f"rollout {rollout_id} has {have}; step {int(value)} does not exist"))
    return int(value) - 1


# --- layout and wiring ----------------------------------------------------------------------------------------


def _view_result(action, doing: str) -> list[Any]:
    """Run an action that returns (RolloutView, message) and spread it over the rollout components; a failure
    leaves every component as it was and only says what went wrong."""
    try:
        view, message = action()
    except Exception as err:  # noqa: BLE001 - shown as a message; the page keeps the user's input
        return [gr.skip()] * 4 + [failure_markdown(err, doing)]
    return [view.rollout_id, view.header, view.steps, view.tags, message]


def _message_result(action, doing: str) -> str:
    try:
        return action()
    except Exception as err:  # noqa: BLE001
        return failure_markdown(err, doing)


def build_rollouts_tab(ctx: StudioContext, studio: gr.Blocks, single_user: bool | None = None) -> None:
    """Lay out the Rollouts tab inside the current Blocks and wire its events. `single_user` (default: no --auth
    and not a Space) lets a push fall back to the server's HF_TOKEN; `launch` also requires a loopback host."""
    store = ctx.store
    if single_user is None:
        single_user = not ctx.users and not on_spaces()
    names, versions = world_choices(store)  # refreshed on every page load; custom values let API callers name
    curricula = curriculum_choices(store)   # worlds and curricula saved after the studio started
    policies = policy_choices(store)
    gr.Markdown("#### Find rollouts")
    with gr.Row():
        f_world = gr.Dropdown(names, value="", label="World", allow_custom_value=True, min_width=120)
        f_status = gr.Dropdown([("any", ""), *[(s, s) for s in ROLLOUT_STATUSES]], value="", label="Status",
                               min_width=110)
        f_check = gr.Dropdown([("any", ""), ("all pass", "passed"), ("some fail", "failed")], value="",
                              label="Checks", min_width=110)
        f_tag = gr.Textbox(label="Tag", placeholder="e.g. example", min_width=120)
        f_text = gr.Textbox(label="Search calls, responses, titles", placeholder="e.g. refund_id", scale=2)
    with gr.Row():
        search = gr.Button("Search", variant="primary", size="sm", scale=2, min_width=80)
        previous = gr.Button("◀ Newer", size="sm", scale=1, min_width=70)
        page = gr.Number(1, show_label=False, precision=0, minimum=1, scale=1, min_width=60)
        following = gr.Button("Older ▶", size="sm", scale=1, min_width=70)
        info = gr.Markdown(elem_id="rollouts-info")
    table = gr.Dataframe(headers=TABLE_COLUMNS, interactive=False, wrap=True, max_height=330,
                         column_widths=TABLE_WIDTHS, elem_id="rollouts-table")
    with gr.Row():
        with gr.Column(scale=7):
            header = gr.Markdown("Pick a rollout in the list (or type its id), or start a new one.",
                                 elem_id="rollout-header")
            steps = gr.Markdown(elem_id="rollout-steps", max_height=640)
        with gr.Column(scale=5):
            with gr.Row():
                rollout_id = gr.Number(label="Rollout id", precision=0, scale=2, min_width=100, elem_id="rollout-id")
                open_button = gr.Button("Open", size="sm", scale=1, min_width=70)
            with gr.Row():
                accept = gr.Button("Accept", size="sm", min_width=90)
                reject = gr.Button("Reject", size="sm", min_width=90)
                reset = gr.Button("Pending", size="sm", min_width=90)
            with gr.Row():
                tags = gr.Textbox(label="Tags (comma-separated)", scale=3)
                save_tags = gr.Button("Save tags", size="sm", scale=1, min_width=90)
            message = gr.Markdown(elem_id="rollout-message")
            with gr.Accordion("Next call", open=True):
                with gr.Row():
                    policy = gr.Dropdown(policies, value=policies[0][1], label="Agent policy", scale=3,
                                         allow_custom_value=True, elem_id="rollout-policy")
                    propose = gr.Button("Propose next call", size="sm", scale=1, min_width=90,
                                        elem_id="rollout-propose")
                task = gr.Textbox(label="Task for the policy (empty: the world's own)", elem_id="rollout-task",
                                  placeholder="The customer wants to cancel order ORD-1.")
                call_text = gr.Code(label='Call ({"name": ..., "arguments": {...}})', language="json", lines=5,
                                    elem_id="rollout-call")
                anchors = gr.Textbox(label="Anchors, one PATH=VALUE per line (optional)", lines=2,
                                     placeholder='status="error"')
                with gr.Row():  # as SamplerSettings declares them, like the Simulate tab's
                    specs = {spec.name: spec for spec in setting_specs(SamplerSettings)}
                    temperature = setting_widget(specs["temperature"], elem_id="rollout-temperature")
                    seed = setting_widget(specs["seed"], elem_id="rollout-seed")
                run = gr.Button("Generate and append", variant="primary")
            with gr.Accordion("Branch or edit a step", open=False):
                with gr.Row(equal_height=True):
                    step_index = gr.Number(1, label="Step (1 is the first)", precision=0, minimum=1, min_width=80)
                    branch_button = gr.Button("Branch from it", size="sm")
                    load = gr.Button("Load its response", size="sm")
                response = gr.Code(label="Response (edit, then save: recorded as a human edit)", language="json",
                                   lines=8, elem_id="rollout-edit")
                save_response = gr.Button("Save edit")
            with gr.Accordion("Start a new rollout", open=False):
                new_world = gr.Dropdown(versions, value=versions[0][1] if versions else None, label="World version",
                                        allow_custom_value=True)
                new_title = gr.Textbox(label="Title", placeholder="e.g. refund after partial shipment")
                create = gr.Button("Create rollout")
    with gr.Accordion("Curricula and datasets", open=False):
        with gr.Row():
            cur_name = gr.Textbox(label="Curriculum name", scale=2)
            cur_description = gr.Textbox(label="Description", scale=3)
            cur_ids = gr.Textbox(label="Rollout ids to add (accepted ones)", placeholder="3, 7, 12", scale=3)
        with gr.Row():
            add_open = gr.Button("+ open rollout", size="sm")
            add_page = gr.Button("+ every rollout on this page", size="sm")
            save_curriculum = gr.Button("Save curriculum version", variant="primary", size="sm")
        with gr.Row():
            cur_pick = gr.Dropdown(curricula, label="Curriculum version", scale=3, allow_custom_value=True)
            export = gr.Button("Export dataset folder (zip)", scale=1)
            archive = gr.File(label="Download", scale=2)
        with gr.Row():
            repo = gr.Textbox(label="Hub dataset repo", placeholder="owner/name", scale=2)
            token = gr.Textbox(label="Hugging Face token" + (" (or set HF_TOKEN)" if single_user else ""),
                               type="password", scale=2)
            private = gr.Checkbox(label="Private", value=True, scale=1)
            push_button = gr.Button("Push to hub", scale=1)
        with gr.Row():
            upload = gr.File(label="Import an exported dataset (.zip, .parquet or .jsonl), world-model chat rows "
                                   "(.jsonl, Patronus format) or trajectories (.json: OpenAI messages, tau-bench "
                                   "records)", type="filepath", scale=3)
            import_button = gr.Button("Import as new rollouts", scale=1)
        cur_message = gr.Markdown(elem_id="curriculum-message")

    view = [rollout_id, header, steps, tags, message]
    filters = [f_world, f_status, f_tag, f_text, f_check]

    def on_search(world, status, tag, text, check, page_number):
        try:
            return search_rollouts(store, world, status, tag, text, check, page_number)
        except Exception as err:  # noqa: BLE001
            return gr.skip(), failure_markdown(err, "search"), gr.skip()

    def on_choices():
        names, versions = world_choices(store)
        return (gr.update(choices=names), gr.update(choices=versions, value=versions[0][1] if versions else None),
                gr.update(choices=curriculum_choices(store)), gr.update(choices=policy_choices(store)))

    def on_select(evt: gr.SelectData):
        row = evt.row_value or []
        if not row:
            return [gr.skip()] * 5
        return _view_result(lambda: (render_rollout(store, int(row[0])), ""), "open the rollout")

    def on_edit(rid, index, text, request: gr.Request):
        return _view_result(lambda: save_edit(store, rid, index, text, request_username(request)), "save the edit")

    def on_load_response(rid, index):
        try:
            return load_response(store, rid, index), ""
        except Exception as err:  # noqa: BLE001
            return gr.skip(), failure_markdown(err, "load the response")

    def on_propose(rid, policy_path, task_text):
        try:
            proposed, said = propose_call(store, rid, policy_path, task_text)
        except Exception as err:  # noqa: BLE001
            return gr.skip(), failure_markdown(err, "propose the next call")
        return (gr.skip() if proposed is None else proposed), said

    def on_export(curriculum_id):
        try:
            return export_for_download(store, curriculum_id)
        except Exception as err:  # noqa: BLE001
            return gr.skip(), failure_markdown(err, "export")

    def on_save_curriculum(name, description, ids):
        try:
            message, saved = save_curriculum_version(store, name, description, ids)
        except Exception as err:  # noqa: BLE001
            return failure_markdown(err, "save the curriculum"), gr.skip()
        # the version just saved is the one to export or push next
        return message, gr.update(choices=curriculum_choices(store), value=saved)

    search.click(on_search, [*filters, page], [table, info, page], api_name="rollouts_search")
    for box in (f_tag, f_text):
        box.submit(on_search, [*filters, page], [table, info, page], api_visibility="private")
    previous.click(lambda *a: on_search(*a[:-1], max(1, int(a[-1] or 1) - 1)), [*filters, page], [table, info, page],
                   api_visibility="private")
    following.click(lambda *a: on_search(*a[:-1], int(a[-1] or 1) + 1), [*filters, page], [table, info, page],
                    api_visibility="private")
    table.select(on_select, None, view, api_visibility="private")
    open_button.click(lambda rid: _view_result(lambda: (render_rollout(store, _rollout_id(rid)), ""),
                                               "open the rollout"), rollout_id, view, api_name="rollout_open")
    refresh = {"fn": on_search, "inputs": [*filters, page], "outputs": [table, info, page],
               "api_visibility": "private"}  # every action that changes a rollout shows in the list at once
    create.click(lambda wid, title: _view_result(lambda: (new_rollout(store, wid, title), "New rollout."),
                                                 "start a rollout"), [new_world, new_title], view,
                 api_name="rollout_new").then(**refresh)
    run.click(lambda rid, text, pins, t, s: _view_result(lambda: generate_step(ctx, rid, text, pins, t, s),
                                                         "generate the step"),
              [rollout_id, call_text, anchors, temperature, seed], view, api_name="rollout_generate").then(**refresh)
    propose.click(on_propose, [rollout_id, policy, task], [call_text, message], api_name="rollout_propose")
    branch_button.click(lambda rid, index: _view_result(lambda: branch(store, rid, index), "branch"),
                        [rollout_id, step_index], view, api_name="rollout_branch").then(**refresh)
    load.click(on_load_response, [rollout_id, step_index], [response, message], api_name="rollout_load_response")
    save_response.click(on_edit, [rollout_id, step_index, response], view, api_name="rollout_edit").then(**refresh)
    for button, status, name in ((accept, "accepted", "rollout_accept"), (reject, "rejected", "rollout_reject"),
                                 (reset, "pending", "rollout_pending")):
        button.click(lambda rid, status=status: _view_result(lambda: change_status(store, rid, status),
                                                             "change the status"), rollout_id, view,
                     api_name=name).then(**refresh)
    save_tags.click(lambda rid, text: _view_result(lambda: change_tags(store, rid, text), "save the tags"),
                    [rollout_id, tags], view, api_name="rollout_tags").then(**refresh)
    add_open.click(lambda ids, rid: ", ".join(x for x in [ids.strip(" ,"), str(int(rid))] if x) if rid else ids,
                   [cur_ids, rollout_id], cur_ids, api_visibility="private")
    add_page.click(lambda ids, frame: ", ".join(x for x in [ids.strip(" ,"), *map(str, frame["id"])] if x)
                   if frame is not None and len(frame) else ids, [cur_ids, table], cur_ids, api_visibility="private")
    save_curriculum.click(on_save_curriculum, [cur_name, cur_description, cur_ids], [cur_message, cur_pick],
                          api_name="curriculum_add")
    export.click(on_export, cur_pick, [archive, cur_message], api_name="curriculum_export")

    def on_push(cid: Any, repo_id: str, typed: str, private_repo: bool, oauth: gr.OAuthToken | None) -> str:
        signed_in = oauth.token if oauth is not None and on_spaces() else None  # elsewhere a login is mocked locally
        return _message_result(lambda: push(store, cid, repo_id, typed, private_repo, signed_in, single_user), "push")

    push_button.click(on_push, [cur_pick, repo, token, private], cur_message, api_name="curriculum_push")
    import_button.click(lambda path: as_uploaded(_message_result(lambda: import_upload(store, path), "import"), path),
                        upload, cur_message, api_name="dataset_import")
    studio.load(on_choices, None, [f_world, new_world, cur_pick, policy], api_visibility="private")
    studio.load(on_search, [*filters, page], [table, info, page], api_visibility="private")
    tab = Context.block
    if isinstance(tab, gr.Tab):  # opened again after a step was saved elsewhere (Simulate): the list shows it
        tab.select(on_search, [*filters, page], [table, info, page], api_visibility="private")
