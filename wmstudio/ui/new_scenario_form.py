"""The Train tab's *New scenario* form: a world from the selected curriculum, a task, a success condition in CEL
(tried on a saved episode of that world before saving), steering per call occurrence, and a split; *Add scenario*
saves the curriculum's next version with it (studio/scenario_authoring.py). Bad input is named, nothing saved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from wmstudio.problems import InvalidInput, Problem
from wmstudio.studio.curricula import DEMO_CURRICULUM, SUCCESS_EXAMPLE, Store
from wmstudio.studio.scenario_authoring import add_scenario, curriculum_worlds, saved_episodes, try_success
from wmstudio.ui.messages import failure_markdown
from wmstudio.ui.steering_lines import STEERING_EXAMPLE, STEERING_LABEL, read_steering

SPLITS = ("train", "heldout")
KEPT = "nothing was saved; the form keeps what you typed"


def world_choices(store: Store, curriculum: Any) -> list[str]:
    """The names of the worlds a new scenario of the curriculum can use."""
    return list(curriculum_worlds(store, str(curriculum or DEMO_CURRICULUM).strip()))


def chosen_world(store: Store, curriculum: Any, world: Any):
    """The curriculum's world named `world`; InvalidInput naming the World field when it is not one of them."""
    worlds = curriculum_worlds(store, str(curriculum or DEMO_CURRICULUM).strip())
    if world not in worlds:
        raise InvalidInput(Problem("World", f"pick one of the curriculum's worlds ({', '.join(worlds) or 'none'})"))
    return worlds[world]


def add_from_form(store: Store, curriculum: Any, world: Any, split: Any, key: Any, task: Any, success: Any,
                  steering: Any) -> str:
    """Save the form as a new scenario (the curriculum's next version); a message saying what was saved."""
    name = str(curriculum or DEMO_CURRICULUM).strip()
    spec = chosen_world(store, name, world)
    saved = add_scenario(store, name, spec, str(task or ""), str(success or ""), read_steering(steering),
                         split=split if split in SPLITS else "train", key=str(key or ""))
    return (f"Added to **{saved.name} v{saved.version}**: a run on {saved.name} now plays it with the other "
            "scenarios (earlier versions keep theirs).")


def build_new_scenario_form(store: Store, curriculum: gr.Dropdown, studio: gr.Blocks,
                            refreshed: Callable[[Any], list[Any]], listed: list[Any]) -> None:
    """Lay out the form and wire it; after a scenario is added, `refreshed(curriculum)` fills `listed`."""
    with gr.Accordion("New scenario", open=False, elem_id="train-new-scenario"):
        with gr.Row():
            world = gr.Dropdown([], label="World (one of the curriculum's)", elem_id="train-new-world", scale=2)
            split = gr.Radio(list(SPLITS), value="train", label="Split", elem_id="train-new-split", scale=1)
            key = gr.Textbox(label="Key (blank: world-split-number)", elem_id="train-new-key", scale=2)
        task = gr.Textbox(label="Task", lines=2, max_lines=6, elem_id="train-new-task",
                          placeholder="What the user asks the agent for, e.g. Refund order ORD-1.")
        success = gr.Textbox(label="Success condition (CEL over state and trajectory)", lines=2, max_lines=8,
                             placeholder=SUCCESS_EXAMPLE, elem_id="train-new-success")
        with gr.Row():
            episode = gr.Dropdown([], label="Episode of that world to try the condition on (saved, or none yet)",
                                  elem_id="train-new-episode", scale=4)
            try_it = gr.Button("Try it", elem_id="train-new-try", scale=1)
        tried = gr.Markdown(elem_id="train-new-tried")
        steering = gr.Textbox(label=STEERING_LABEL, lines=2, max_lines=10, placeholder=STEERING_EXAMPLE,
                              elem_id="train-new-steering")
        add = gr.Button("Add scenario", variant="primary", elem_id="train-new-add")
        message = gr.Markdown(elem_id="train-new-message")

    def on_curriculum(name: Any) -> Any:
        try:
            return gr.update(choices=world_choices(store, name), value=None)
        except Exception:  # noqa: BLE001 - the panel's summary says why the curriculum cannot be read
            return gr.update(choices=[], value=None)

    def on_world(name: Any) -> Any:
        if not name:
            return gr.update(choices=[], value=None)
        choices = saved_episodes(store, str(name))
        return gr.update(choices=choices, value=choices[0][1] if choices else None)

    def on_try(name: Any, world_name: Any, condition: Any, rollout: Any) -> str:
        try:
            spec = chosen_world(store, name, world_name)
            if rollout in (None, ""):
                raise InvalidInput(Problem("episode", f"no episode of {world_name} picked: pick one (or save one "
                                                      "in Simulate), then try again"))
            result = try_success(store, condition, spec, rollout)
        except Exception as err:  # noqa: BLE001 - shown beside the button
            return failure_markdown(err, "try the condition", "nothing was changed")
        return f"**{result.text}**"

    def on_add(name: Any, *fields: Any) -> list[Any]:
        try:
            note = add_from_form(store, name, *fields)
        except Exception as err:  # noqa: BLE001 - the form keeps what was typed
            return [failure_markdown(err, "add the scenario", KEPT), *[gr.skip()] * len(listed)]
        return [note, *refreshed(name)]

    curriculum.change(on_curriculum, curriculum, world, api_visibility="private")
    studio.load(on_curriculum, curriculum, world, api_visibility="private")
    world.change(on_world, world, episode, api_visibility="private")
    try_it.click(on_try, [curriculum, world, success, episode], tried, api_visibility="private")
    add.click(on_add, [curriculum, world, split, key, task, success, steering], [message, *listed],
              api_name="train_add_scenario")
