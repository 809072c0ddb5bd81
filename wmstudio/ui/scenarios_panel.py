"""The Train tab's Scenarios panel: the selected curriculum's scenarios (key, split, world, task, success), a form
to edit one's task, success condition (CEL) and steering (one anchor per line, `tool: path=value` for every call of
the tool, `tool#n: path=value` for its n-th call in an episode), and the New scenario form below it.

Saving checks everything first (store.update_scenario): bad input is named and nothing is changed."""

from __future__ import annotations

import json
from typing import Any

import gradio as gr

from wmstudio.problems import InvalidInput, Problem
from wmstudio.studio.curricula import (
    BUILT_IN,
    DEMO_CURRICULUM,
    SUCCESS_EXAMPLE,
    CurriculumScenario,
    Store,
    count_scenarios,
    curriculum_rollouts,
    curriculum_row,
    get_curriculum,
    get_scenario,
    list_curricula,
    list_scenarios,
    update_scenario,
)
from wmstudio.ui.messages import failure_markdown
from wmstudio.ui.new_scenario_form import build_new_scenario_form
from wmstudio.ui.steering_lines import STEERING_EXAMPLE, STEERING_LABEL, read_steering, steering_text

SCENARIO_COLUMNS = ["key", "split", "world", "task", "success"]
SHOWN_CHARS = 240
KEPT = "the saved scenario is unchanged"


# --- reading and showing ------------------------------------------------------------------------------------------


def trainable_curricula(store: Store) -> list[tuple[str, str]]:
    """Every curriculum the Train tab offers, as (label, name): the built-in ones (`demo`, `adversarial`), then each
    saved curriculum at its latest version (what a run trains on), saying how many scenarios it holds, or that it
    holds none yet."""
    latest = {}
    for summary in list_curricula(store):  # newest version of each name first
        latest.setdefault(summary.curriculum.name, summary)
    choices = [(f"{name} · {built_in.label}", name) for name, built_in in BUILT_IN.items()]
    for name in sorted(set(latest) - set(BUILT_IN)):
        summary = latest[name]
        holds = (f"{summary.scenario_count} scenarios" if summary.scenario_count else
                 f"{summary.rollout_count} rollouts, no scenarios yet")
        choices.append((f"{name} v{summary.curriculum.version} · {holds}", name))
    return choices


def missing_scenarios(store: Store, curriculum_name: Any) -> str:
    """What a curriculum needs before GRPO can train on it, in words; empty when its latest version has scenarios
    (or it is built in, and given its own). InvalidInput for a name that is not saved."""
    name = str(curriculum_name or DEMO_CURRICULUM).strip()
    if name in BUILT_IN:
        return ""
    curriculum = get_curriculum(store, name)
    if count_scenarios(store, curriculum.id):
        return ""
    rollouts = len(curriculum_rollouts(store, curriculum.id))
    return (f"**{name} v{curriculum.version}** holds {rollouts} rollout(s) and no scenarios, and a GRPO run plays "
            "scenarios: each a task for the agent with a success condition (CEL over `state` and `trajectory`, e.g. "
            f"`{SUCCESS_EXAMPLE}`). Add them: export the curriculum, write `scenarios.jsonl` into its folder (one "
            "JSON line per scenario: key, split, world, task, success, target) and import the folder (`wmstudio "
            "curricula import FOLDER`) or its zip (Rollouts tab), which saves the next version with them; or train "
            "on `demo`.")


def scenarios_of(store: Store, curriculum_name: Any) -> tuple[str, list[CurriculumScenario]]:
    """The latest version of the curriculum (a built-in one made and given its scenarios when missing): its label
    and scenarios."""
    name = str(curriculum_name or DEMO_CURRICULUM).strip()
    curriculum = curriculum_row(store, name)
    return f"{curriculum.name} v{curriculum.version}", list_scenarios(store, curriculum.id)


def scenario_table(store: Store, curriculum_name: Any) -> tuple[str, list[list[str]], list[tuple[str, int]]]:
    """A summary line, the table rows (key, split, world, task, success) and the scenario dropdown's choices."""
    label, rows = scenarios_of(store, curriculum_name)
    splits = {split: sum(row.split == split for row in rows) for split in ("train", "heldout")}
    summary = (f"**{label}** · {len(rows)} scenarios ({splits['train']} train, {splits['heldout']} held out)"
               if rows else missing_scenarios(store, curriculum_name))
    table = [[row.key, row.split, _world_name(row), _shown(row.task), _shown(row.success)] for row in rows]
    choices = [(f"{row.key} · {_world_name(row)}", row.id) for row in rows]
    return summary, table, choices


def scenario_form(store: Store, scenario_id: Any) -> tuple[str, str, str, str]:
    """The form for one scenario: its task, success condition, steering text and a line about the rest."""
    row = get_scenario(store, _scenario_id(scenario_id))
    target = json.dumps(row.target, ensure_ascii=False) if row.target is not None else "none"
    about = (f"World `{_world_name(row)}` · split {row.split} · target call `{target}` · "
             f"{'the world accepts it' if row.feasible else 'the world refuses it'} · "
             f"edited {row.updated_at:%Y-%m-%d %H:%M:%S} UTC")
    return row.task, row.success, steering_text(row.steering), about


def save_scenario(store: Store, scenario_id: Any, task: Any, success: Any, steering: Any) -> str:
    """Save the form's task, success condition and steering; a message saying what was saved."""
    row = update_scenario(store, _scenario_id(scenario_id), task=str(task or ""), success=str(success or ""),
                          steering=read_steering(steering))
    anchors = sum(len(texts) for texts in row.steering.values())
    return (f"Saved `{row.key}`: training on this curriculum uses its task, success condition and {anchors} "
            "anchor(s).")


def _scenario_id(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(Problem("Scenario", "pick a scenario in the list first")) from None


def _world_name(row: CurriculumScenario) -> str:
    try:
        return str(json.loads(row.world).get("name", "?"))
    except (json.JSONDecodeError, AttributeError):
        return "?"


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


# --- layout and wiring ----------------------------------------------------------------------------------------


def build_scenarios_panel(store: Store, curriculum: gr.Dropdown, studio: gr.Blocks) -> None:
    """Lay out the Scenarios accordion under the curriculum picker and wire it (filled when the page loads and
    whenever another curriculum is picked)."""
    with gr.Accordion("Scenarios", open=False, elem_id="train-scenarios"):
        summary = gr.Markdown(elem_id="train-scenarios-summary")
        table = gr.Dataframe(headers=SCENARIO_COLUMNS, interactive=False, wrap=True, max_height=320,
                             column_widths=["15%", "7%", "9%", "29%", "40%"], elem_id="train-scenarios-table")
        picked = gr.Dropdown([], label="Scenario to edit", allow_custom_value=True, elem_id="train-scenario")
        about = gr.Markdown(elem_id="train-scenario-about")
        task = gr.Textbox(label="Task", lines=2, max_lines=6, elem_id="train-scenario-task",
                          placeholder="What the user asks the agent for, e.g. Refund order ORD-1.")
        success = gr.Textbox(label="Success condition (CEL over state and trajectory)", lines=3, max_lines=10,
                             placeholder=SUCCESS_EXAMPLE, elem_id="train-scenario-success")
        steering = gr.Textbox(label=STEERING_LABEL, lines=3, max_lines=12, placeholder=STEERING_EXAMPLE,
                              elem_id="train-scenario-steering")
        save = gr.Button("Save scenario", variant="primary", elem_id="train-scenario-save")
        message = gr.Markdown(elem_id="train-scenario-message")
    ids = gr.State({})  # the table's keys -> scenario ids (a row click names its key)

    def on_curriculum(name: Any) -> list[Any]:
        try:
            text, rows, choices = scenario_table(store, name)
        except Exception as err:  # noqa: BLE001 - shown in place of the summary
            return [failure_markdown(err, "list the scenarios", "nothing was changed"), [],
                    gr.update(choices=[], value=None), {}]
        keys = {row[0]: scenario_id for row, (_, scenario_id) in zip(rows, choices, strict=True)}
        return [text, rows, gr.update(choices=choices, value=None), keys]

    def on_pick(scenario_id: Any) -> list[Any]:
        if scenario_id in (None, ""):
            return ["", "", "", "", ""]
        try:
            return [*scenario_form(store, scenario_id), ""]
        except Exception as err:  # noqa: BLE001
            return [gr.skip()] * 4 + [failure_markdown(err, "open the scenario", "nothing was changed")]

    def on_row(evt: gr.SelectData, keys: dict[str, int]) -> Any:
        key = evt.row_value[0] if evt.row_value else None
        return keys.get(key, gr.skip()) if isinstance(keys, dict) else gr.skip()

    def on_save(scenario_id: Any, task_text: Any, success_text: Any, steering_lines: Any, name: Any) -> list[Any]:
        try:
            note = save_scenario(store, scenario_id, task_text, success_text, steering_lines)
        except Exception as err:  # noqa: BLE001 - the form keeps what was typed
            return [failure_markdown(err, "save the scenario", KEPT), gr.skip(), gr.skip()]
        text, rows, _ = scenario_table(store, name)
        return [note, text, rows]

    form = [task, success, steering, about, message]
    listed = [summary, table, picked, ids]
    curriculum.change(on_curriculum, curriculum, listed, api_visibility="private")
    studio.load(on_curriculum, curriculum, listed, api_visibility="private")
    picked.change(on_pick, picked, form, api_visibility="private")
    table.select(on_row, ids, picked, api_visibility="private")
    save.click(on_save, [picked, task, success, steering, curriculum], [message, summary, table],
               api_name="train_save_scenario")
    build_new_scenario_form(store, curriculum, studio, on_curriculum, listed)
