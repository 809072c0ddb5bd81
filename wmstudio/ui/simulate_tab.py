"""The Simulate tab: choose a world and tool, fill the arguments, pin anchors, run the world model and watch it
denoise; replay any step, read the checks, compare with the autoregressive baseline, save the step.

Handlers are plain functions of form values (tests call them directly or over HTTP); layout and wiring sit in
`build_simulate_tab` at the bottom. No handler shows a traceback, and a failed action never clears the form."""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import gradio as gr
from gradio.context import Context

from wmstudio.model.denoising.sampler_settings import SETTING_NAMES, SamplerSettings
from wmstudio.model.denoising.trace import DecodeTrace
from wmstudio.problems import InvalidInput
from wmstudio.settings import setting_specs
from wmstudio.studio.context import StudioContext
from wmstudio.studio.memory import release_memory
from wmstudio.studio.rollouts import filter_rollouts
from wmstudio.studio.simulation import (
    Simulation,
    run_baseline,
    run_simulation,
    save_simulation,
    tool_of,
    world_spec,
)
from wmstudio.studio.worlds import get_world, list_worlds
from wmstudio.ui.check_view import REPORT_CSS, generation_html, outcome_sentence
from wmstudio.ui.denoise_view import CANVAS_CSS, canvas_html, heatmap_figure
from wmstudio.ui.forms import (
    MASKED,
    FormField,
    anchors_from_form,
    argument_fields,
    arguments_from_form,
    form_from_arguments,
    read_arguments,
    response_fields,
    show_value,
)
from wmstudio.ui.messages import failure_markdown, markdown_as_html
from wmstudio.ui.setting_widgets import setting_widget
from wmstudio.ui.state_view import state_change_markdown
from wmstudio.world.episode.state import episode_state
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call
from wmstudio.world.steering.presets import PRESETS, preset_request
from wmstudio.world.tools import Tool

ARG_SLOTS = 10  # argument inputs in the form; further arguments are edited in the JSON
SETTINGS_PER_ROW = 4  # sampler widgets side by side
ANCHOR_SLOTS = 16  # pinnable response fields in the form; further ones are written as PATH=VALUE lines
NEW_ROLLOUT = 0
ROLLOUT_CHOICES = 50
HELPERS = ("outcome_head", "record_copy", "rule_outcomes", "rule_fields")  # what "Model only" switches off
EMPTY_CANVAS = '<div class="wm-canvas" data-step="-1" data-done="0" data-masked="0">Press <b>Run</b> to watch the ' \
               "world model fill in the response.</div>"
BASELINE_HINT = "<p>Press <b>Compare with AR baseline</b> to see the autoregressive model's answer to the same " \
                "call, with the anchors given as steering directives, and its checks.</p>"


# ---- worlds, tools and the generated forms ----------------------------------------------------------------------

def refresh_worlds(ctx: StudioContext, current: Any) -> Any:
    """The world dropdown re-read from the store: the current world stays chosen, moved to its newest version
    when one was saved since (e.g. in the World tab)."""
    summaries = list_worlds(ctx.store)
    choices = [(f"{w.name} (v{w.latest.version})", w.latest.id) for w in summaries]
    latest = {w.name: w.latest.id for w in summaries}
    value = next(iter(latest.values()), None)
    if current in latest.values():
        value = current
    elif str(current or "").isdigit():
        try:
            value = latest.get(get_world(ctx.store, int(current)).name, value)
        except InvalidInput:
            pass  # a world id this database does not have: fall back to the first world
    return gr.update(choices=choices, value=value)


def rollout_choices(ctx: StudioContext, world_id: Any) -> list[tuple[str, int]]:
    """"New rollout" and the newest rollouts of this world version, for the Save dropdown."""
    choices = [("New rollout", NEW_ROLLOUT)]
    if world_id in (None, ""):
        return choices
    page = filter_rollouts(ctx.store, world_id=int(world_id), page_size=ROLLOUT_CHOICES)
    return choices + [(f"#{r.id} {r.title or 'untitled'} · {r.step_count} steps · {r.status}", r.id)
                      for r in page.items]


def choose_world(ctx: StudioContext, world_id: Any) -> tuple[Any, Any, str]:
    """The tools of the chosen world (first one selected) and its rollouts for saving."""
    try:
        world = world_spec(ctx.store, world_id)
        rollouts = rollout_choices(ctx, world_id)
    except InvalidInput as err:
        return gr.update(choices=[], value=None), gr.update(), failure_markdown(err, "open the world")
    names = [t.name for t in world.tools]
    note = "" if names else f"World **{world.name}** has no tools yet: add some in the World tab."
    return (gr.update(choices=names, value=names[0] if names else None),
            gr.update(choices=rollouts, value=NEW_ROLLOUT), note)


def tool_forms(ctx: StudioContext, world_id: Any, tool_name: Any) -> tuple[Tool | None, list[FormField],
                                                                            list[FormField]]:
    """A world's tool with its argument fields and pinnable response fields (None and no fields without a tool)."""
    if not tool_name:
        return None, [], []
    tool = tool_of(world_spec(ctx.store, world_id), Call(str(tool_name)))
    return tool, argument_fields(tool.parameters), response_fields(tool.response)


def choose_tool(ctx: StudioContext, world_id: Any, tool_name: Any) -> tuple:
    """Lay the forms out for a tool, empty: another tool's arguments are not carried over (a same-named value
    silently kept surprised newcomers) and every response field starts masked. Returns the arguments JSON,
    ARG_SLOTS input updates, ANCHOR_SLOTS anchor updates and a note."""
    try:
        tool, arguments, responses = tool_forms(ctx, world_id, tool_name)
    except InvalidInput as err:
        hidden = [gr.update(visible=False)] * (ARG_SLOTS + ANCHOR_SLOTS)
        return (gr.update(), *hidden, failure_markdown(err, "open the tool"))
    arg_updates = [gr.update(visible=True, label=f.label, info=f.description, value="",
                             placeholder=" | ".join(show_value(o) for o in f.options))
                   if i < len(arguments) else gr.update(visible=False, value="")
                   for i, f in enumerate(_pad(arguments, ARG_SLOTS))]
    anchor_updates = [gr.update(visible=True, label=f.label, info=f.description,
                                choices=[MASKED, *f.choices()], value=MASKED)
                      if i < len(responses) else gr.update(visible=False, value=MASKED)
                      for i, f in enumerate(_pad(responses, ANCHOR_SLOTS))]
    notes = []
    if tool is not None and tool.description:
        notes.append(f"**{tool.name}**: {tool.description}")
    if tool is not None and tool.response is None:
        notes.append("This tool has no response schema: the model writes a free response (nothing to pin by "
                     "field; free `PATH=VALUE` anchors still apply to JSON it writes).")
    if len(arguments) > ARG_SLOTS:
        notes.append(f"{len(arguments) - ARG_SLOTS} more argument(s) than the form shows: edit them in the JSON.")
    if len(responses) > ANCHOR_SLOTS:
        extra = ", ".join(f.path for f in responses[ANCHOR_SLOTS:])
        notes.append(f"Pin further response fields as `PATH=VALUE` lines: {extra}.")
    return ("{}", *arg_updates, *anchor_updates, "\n\n".join(notes))


def form_to_json(ctx: StudioContext, world_id: Any, tool_name: Any, arguments_json: str, *values: str) -> tuple:
    """Write the argument inputs into the arguments JSON (which stays authoritative); a broken JSON is kept."""
    try:
        _, fields, _ = tool_forms(ctx, world_id, tool_name)
        return arguments_from_form(fields[:ARG_SLOTS], values, arguments_json), ""
    except InvalidInput as err:
        return gr.update(), failure_markdown(err, "copy the field into the JSON")


def json_to_form(ctx: StudioContext, world_id: Any, tool_name: Any, arguments_json: str) -> tuple:
    """Show the arguments JSON in the argument inputs; while the JSON is broken the inputs stay as they are."""
    try:
        _, fields, _ = tool_forms(ctx, world_id, tool_name)
        texts = form_from_arguments(fields[:ARG_SLOTS], arguments_json)
    except InvalidInput as err:
        return (*[gr.update()] * ARG_SLOTS, failure_markdown(err, "read the arguments JSON"))
    return (*texts, *[gr.update()] * (ARG_SLOTS - len(texts)), "")


# ---- running ------------------------------------------------------------------------------------------------------

def read_request(ctx: StudioContext, world_id: Any, tool_name: Any, arguments_json: str, free_anchors: str,
                 values: Sequence[Any]) -> tuple[Call, list, SamplerSettings]:
    """The call, anchors and settings the form describes (`values`: the sampler inputs in SETTING_NAMES order,
    then the anchor inputs); InvalidInput lists everything wrong at once."""
    settings = dict(zip(SETTING_NAMES, values[: len(SETTING_NAMES)], strict=True))
    anchor_values = values[len(SETTING_NAMES):]
    problems = []
    call = anchors = sampler = None
    try:
        if not tool_name:
            raise InvalidInput("choose a tool first")
        call = Call(str(tool_name), read_arguments(arguments_json))
    except InvalidInput as err:
        problems += err.problems
    try:
        _, _, responses = tool_forms(ctx, world_id, tool_name)
        anchors = anchors_from_form(responses[:ANCHOR_SLOTS], anchor_values, free_anchors)
    except InvalidInput as err:
        problems += err.problems
    try:
        sampler = SamplerSettings.from_form(**settings)
    except InvalidInput as err:
        problems += err.problems
    if problems:
        raise InvalidInput(problems)
    return call, anchors, sampler


def simulate(ctx: StudioContext, world_id: Any, tool_name: Any, arguments_json: str, free_anchors: str,
             *values: Any, directives: str = "") -> Iterator[tuple]:
    """Run: stream the canvas frame by frame, then the scrubber, heatmap, report and sample picker. `values` are
    the sampler inputs (SETTING_NAMES order) and then the anchor inputs.

    Yields (status, canvas, scrubber, heatmap, report, simulation state, sample picker); outputs that do not
    change in a frame are skipped, so each streamed frame carries only the canvas."""
    skip = gr.skip()
    simulation = None
    try:
        call, anchors, sampler = read_request(ctx, world_id, tool_name, arguments_json, free_anchors, values)
        for simulation in run_simulation(ctx, world_id, call, anchors, sampler, directives=_lines(directives)):
            if simulation.done:
                break
            index = len(simulation.frames) - 1 if simulation.frames else None
            drawn = canvas_html(simulation.canvas, simulation.frames, index, simulation.traces, sampler.steps)
            if index is None:  # the layout, before the first step: clear the previous run's results
                yield "Denoising…", drawn, skip, None, "", skip, skip
            else:
                yield skip, drawn, skip, skip, skip, skip, skip
    except Exception as err:  # noqa: BLE001 - the edge: never show a traceback
        # a refused run leaves nothing of the previous one on the page: its canvas and report were for other inputs
        cleared = gr.update(minimum=0, maximum=1, value=0, interactive=False)
        yield failure_markdown(err, "run"), EMPTY_CANVAS, cleared, None, "", None, skip
        return
    finally:
        release_memory()  # a burst of runs leaves freed blocks mapped in malloc's arenas
    yield finished_view(simulation)


def finished_view(simulation: Simulation) -> tuple:
    """Everything shown once a run is over: summary, last frame, scrubber at the end, heatmap, report, state."""
    generation = simulation.generation
    frames = len(simulation.frames)
    last = frames - 1 if frames else None
    warnings = "".join(f"\n- {w}" for w in simulation.warnings)
    if warnings:
        warnings = "\n\nThe call breaks its parameter schema (simulated as written):" + warnings
    passed = sum(s.checks.ok for s in generation.samples)
    copied = sum(len(f.copied[0]) for f in simulation.frames if f.copied)
    copies = (f" {copied} token(s) of sample 1 filled whole by the copy head, with a value the prompt shows or one "
              "computed from them (underlined purple)." if copied else "")
    decided = generation.decided_first()
    outcome = (f" Outcome decided first, from the prompt: status \"{decided[0]}\" (p = {decided[1]:.2f}); the other "
               "values were written to agree with it." if decided else "")
    if generation.outcome is not None:
        outcome = f" {outcome_sentence(generation)}"
    steered = "; ".join(d.rstrip(".") for d in simulation.world.directives)
    steered = f" Steered by: {steered}." if steered else ""
    canvas = simulation.canvas
    before = sum(1 for position in canvas.written_by if canvas.tokens[position] != canvas.pad_id)
    by_model = len(canvas.masked_positions)
    left = f"the model denoised the {by_model} left." if by_model else "nothing was left for the model to denoise."
    helped = (f" Before the model's first step the helpers wrote {before} token(s) (coloured by who wrote them); "
              f"{left}" if before else "")
    status = (f"Done: {frames} step(s), {len(simulation.canvas)}-token canvas ({generation.mode}), "
              f"{len(generation.samples)} sample(s), {passed} pass every check, {generation.elapsed_ms:.0f} ms."
              f"{helped}{outcome}{copies}{steered}{warnings}")
    samples = [(f"Sample {k + 1}", k) for k in range(len(generation.samples))]
    return (
        status,
        canvas_html(simulation.canvas, simulation.frames, last, simulation.traces, done=True),
        gr.update(minimum=0, maximum=max(1, frames), value=frames, step=1, interactive=True),
        heatmap_figure(simulation.canvas, simulation.frames, 0),
        generation_html(generation, simulation.world, simulation.tool, simulation.anchors) + repair_html(generation)
        + state_html(simulation),
        simulation,
        gr.update(choices=samples, value=0),
    )


def state_html(simulation: Simulation) -> str:
    """What the first sample's answer would change in the world's state, were it a step of an episode."""
    first = simulation.generation.samples[0].response if simulation.generation.samples else None
    if first is None:
        return ""
    tracked = episode_state(simulation.world, [HistoryStep(simulation.call, first)])
    return f'<div id="simulate-state">{markdown_as_html(state_change_markdown(tracked.steps[0]))}</div>'


def repair_html(generation) -> str:
    """Each repair round of the first sample as a canvas: the remasked fields refilled, the rest held."""
    rounds = generation.samples[0].repairs if generation.samples else []
    parts = []
    for number, repair in enumerate(rounds, start=1):
        if repair.canvas is None or not repair.frames:
            continue
        head = (f"<h4>Repair round {number}: remasked {html.escape(', '.join(repair.remasked))} · "
                f"{sum(repair.passed)} of {len(repair.candidates)} candidates pass · the kept one</h4>")
        traces = [DecodeTrace.of_frames(repair.frames)]
        parts.append(head + canvas_html(repair.canvas, repair.frames, len(repair.frames) - 1, traces, done=True))
    return f'<div class="wm-repairs">{"".join(parts)}</div>' if parts else ""


def replay(simulation: Simulation | None, frame_number: Any) -> Any:
    """The canvas as it was after step `frame_number` (0: before the first step)."""
    if simulation is None or not simulation.done:
        return gr.skip()
    number = int(frame_number or 0)
    index = None if number <= 0 else min(number, len(simulation.frames)) - 1
    return canvas_html(simulation.canvas, simulation.frames, index, simulation.traces, done=True)


def heatmap_for(simulation: Simulation | None, sample: Any) -> Any:
    """The decode heatmap of the chosen sample."""
    if simulation is None or not simulation.done or sample in (None, ""):
        return gr.skip()
    last = len(simulation.generation.samples) - 1
    return heatmap_figure(simulation.canvas, simulation.frames, max(0, min(int(sample), last)))


def compare_baseline(ctx: StudioContext, world_id: Any, tool_name: Any, arguments_json: str, free_anchors: str,
                     *values: Any, directives: str = "") -> str:
    """The autoregressive baseline's answer(s) to the form's request, with checks, as HTML."""
    try:
        call, anchors, sampler = read_request(ctx, world_id, tool_name, arguments_json, free_anchors, values)
        world = world_spec(ctx.store, world_id)
        generation = run_baseline(ctx, world_id, call, anchors, sampler, directives=_lines(directives))
    except Exception as err:  # noqa: BLE001 - the edge: never show a traceback
        return markdown_as_html(failure_markdown(err, "run the baseline"))
    note = " (anchors given as steering directives)" if anchors else ""
    return (f"<h4>Autoregressive baseline · {generation.model}{note}</h4>"
            + generation_html(generation, world, tool_of(world, call), anchors, label="Baseline"))


def save_step(ctx: StudioContext, simulation: Simulation | None, sample: Any, rollout: Any, title: str) -> tuple:
    """Save the chosen sample into the chosen rollout (or a new one); returns (status, rollout dropdown)."""
    try:
        rollout_id = None if rollout in (None, "", NEW_ROLLOUT) else int(rollout)
        step = save_simulation(ctx, simulation, int(sample or 0), rollout_id, (title or "").strip())
        choices = rollout_choices(ctx, simulation.world_id)
    except Exception as err:  # noqa: BLE001 - the edge: never show a traceback
        return failure_markdown(err, "save"), gr.update()
    verdict = "passes every check" if step.check_ok else "fails some checks"
    return (f"Saved as step {step.index + 1} of rollout #{step.rollout_id} (it {verdict}).",
            gr.update(choices=choices, value=step.rollout_id))


# ---- stress presets: one click fills the anchors and the run's directives ---------------------------------------

def fill_preset(ctx: StudioContext, name: str, world_id: Any, tool_name: Any) -> tuple:
    """The form as stress preset `name` sets it for the chosen tool: its anchors in their slots (the others
    masked; those without a slot as PATH=VALUE lines) and its directives. Returns ANCHOR_SLOTS anchor updates,
    the free anchors, the directives and a note."""
    try:
        tool, _, responses = tool_forms(ctx, world_id, tool_name)
        anchors, directives = preset_request(name, tool)
    except InvalidInput as err:
        return (*[gr.update()] * (ANCHOR_SLOTS + 2), failure_markdown(err, "apply the preset"))
    pins = {a.path: show_value(a.value) for a in anchors}
    slots = [f.path for f in responses[:ANCHOR_SLOTS]]
    updates = [gr.update(value=pins.get(path, MASKED)) for path in slots]
    updates += [gr.update()] * (ANCHOR_SLOTS - len(updates))
    free = "\n".join(str(a) for a in anchors if a.path not in slots)
    preset = PRESETS[name]
    note = f"**{preset.title}** preset: {preset.summary} Edit the anchors and directives, then Run."
    return (*updates, free, "\n".join(directives), note)


def simulate_steered(ctx: StudioContext, *inputs: Any) -> Iterator[tuple]:
    """`simulate` with the run's directives (the Directives box) as the last input."""
    yield from simulate(ctx, *inputs[:-1], directives=inputs[-1])


def baseline_steered(ctx: StudioContext, *inputs: Any) -> str:
    """`compare_baseline` with the run's directives (the Directives box) as the last input."""
    return compare_baseline(ctx, *inputs[:-1], directives=inputs[-1])


def _lines(text: Any) -> list[str]:
    return [line.strip() for line in str(text or "").splitlines() if line.strip()]


def _pad(fields: list[FormField], slots: int) -> list[FormField | None]:
    return [*fields[:slots], *[None] * (slots - min(slots, len(fields)))]


# ---- layout and wiring ----------------------------------------------------------------------------------------------

def build_simulate_tab(ctx: StudioContext, studio: gr.Blocks) -> None:
    """Lay out the Simulate tab inside the current Blocks context (a gr.Tab) and wire its events."""
    tab = Context.block
    with gr.Row(equal_height=True):
        world = gr.Dropdown([], label="World (latest saved version)", scale=4, elem_id="simulate-world",
                            allow_custom_value=True)  # choices differ per session: the handlers check the id
        refresh = gr.Button("↻ Refresh", scale=0, min_width=110, size="sm")
        tool = gr.Dropdown([], label="Tool", scale=4, elem_id="simulate-tool", allow_custom_value=True)
    tool_note = gr.Markdown(elem_id="simulate-tool-note")
    with gr.Row():
        with gr.Column(scale=1):
            gr.Markdown("### Arguments")
            with gr.Row():
                arg_inputs = [gr.Textbox(visible=False, min_width=220, elem_classes="simulate-arg")
                              for _ in range(ARG_SLOTS)]
            arguments = gr.Code("{}", language="json", label="Arguments as JSON (authoritative: Run sends this)",
                                lines=6, elem_id="simulate-arguments")
            arguments_note = gr.Markdown()
        with gr.Column(scale=1):
            gr.Markdown("### Anchors\nPin a response field to a value, or leave it **masked** for the model.")
            with gr.Row():
                anchor_inputs = [gr.Dropdown([MASKED], value=MASKED, allow_custom_value=True, visible=False,
                                             min_width=200, elem_classes="simulate-anchor")
                                 for _ in range(ANCHOR_SLOTS)]
            free_anchors = gr.Textbox(label="More anchors, one PATH=VALUE per line (JSON values)", lines=2,
                                      placeholder='items[0].price=12.5\nmessage="Card declined"',
                                      elem_id="simulate-free-anchors")
            gr.Markdown("Stress presets: one click sets their anchors and directives.")
            with gr.Row():
                preset_buttons = {name: gr.Button(p.title, size="sm", min_width=120, elem_id=f"simulate-preset-{name}")
                                  for name, p in PRESETS.items()}
            run_directives = gr.Textbox("", label="Directives for this run, one per line (after the world's own)",
                                        lines=2, elem_id="simulate-directives")
    with gr.Accordion("Sampler", open=False):  # every widget as SamplerSettings declares it (ui/setting_widgets.py)
        specs = setting_specs(SamplerSettings)
        sampler_inputs = {}
        for first in range(0, len(specs), SETTINGS_PER_ROW):
            with gr.Row():
                for spec in specs[first:first + SETTINGS_PER_ROW]:
                    sampler_inputs[spec.name] = setting_widget(spec, elem_id=f"simulate-{spec.name.replace('_', '-')}")
    with gr.Row(equal_height=True):
        run = gr.Button("Run", variant="primary", elem_id="simulate-run")
        stop = gr.Button("Stop")
        baseline_button = gr.Button("Compare with AR baseline", elem_id="simulate-baseline-button")
        model_only = gr.Checkbox(False, label="Model only", elem_id="simulate-model-only",
                                 info="the denoiser writes every value: no outcome head, copies or rule-fixed fields")
    status = gr.Markdown(elem_id="simulate-status")
    canvas = gr.HTML(EMPTY_CANVAS, css_template=CANVAS_CSS, elem_id="simulate-canvas")
    scrubber = gr.Slider(0, 1, value=0, step=1, label="Replay step (0 = before the first step)", interactive=False,
                         elem_id="simulate-scrubber")
    with gr.Row():
        report = gr.HTML("", css_template=REPORT_CSS + CANVAS_CSS, elem_id="simulate-report")
        baseline = gr.HTML(BASELINE_HINT, css_template=REPORT_CSS, elem_id="simulate-baseline")
    heatmap = gr.Plot(label="Decode order and confidence", elem_id="simulate-heatmap")
    with gr.Row(equal_height=True):
        sample = gr.Dropdown([("Sample 1", 0)], value=0, label="Sample (heatmap and Save)", scale=1,
                             allow_custom_value=True)
        rollout = gr.Dropdown([("New rollout", NEW_ROLLOUT)], value=NEW_ROLLOUT, label="Save into", scale=2,
                              elem_id="simulate-rollout", allow_custom_value=True)
        title = gr.Textbox(label="Title of a new rollout (optional)", scale=2)
        save = gr.Button("Save step", variant="primary", scale=1, elem_id="simulate-save")
    save_status = gr.Markdown(elem_id="simulate-save-status")
    simulation = gr.State(None, time_to_live=3600)

    request = [world, tool, arguments, free_anchors, *(sampler_inputs[name] for name in SETTING_NAMES),
               *anchor_inputs]
    refresh.click(partial(refresh_worlds, ctx), world, world, api_name="simulate_worlds")
    studio.load(partial(refresh_worlds, ctx), world, world, api_visibility="private")
    if isinstance(tab, gr.Tab):  # the lead builds this tab inside a gr.Tab: re-read the worlds when it is opened
        tab.select(partial(refresh_worlds, ctx), world, world, api_visibility="private")
    last_run = [canvas, heatmap, report, simulation, baseline]
    clear_last_run = lambda: (EMPTY_CANVAS, None, "", None, BASELINE_HINT)  # noqa: E731 - another world or tool
    world.change(clear_last_run, None, last_run, api_visibility="private")
    tool.input(clear_last_run, None, last_run, api_visibility="private")
    world.change(partial(choose_world, ctx), world, [tool, rollout, tool_note], api_name="simulate_world").then(
        partial(choose_tool, ctx), [world, tool], [arguments, *arg_inputs, *anchor_inputs, tool_note],
        api_visibility="private")
    tool.input(partial(choose_tool, ctx), [world, tool], [arguments, *arg_inputs, *anchor_inputs,
                                                                     tool_note], api_name="simulate_tool")
    # `change`, not `input`: a value pasted, dropped or autofilled into a field must reach the call too
    gr.on([box.change for box in arg_inputs], partial(form_to_json, ctx), [world, tool, arguments, *arg_inputs],
          [arguments, arguments_note], show_progress="hidden", trigger_mode="always_last",
          api_name="simulate_form_to_json")
    arguments.input(partial(json_to_form, ctx), [world, tool, arguments], [*arg_inputs, arguments_note],
                    show_progress="hidden", trigger_mode="always_last", api_name="simulate_arguments_to_form")
    outputs = [status, canvas, scrubber, heatmap, report, simulation, sample]
    steered = [*request, run_directives]  # the directives box last: callers that leave it out get ""
    for name, button in preset_buttons.items():
        button.click(partial(fill_preset, ctx, name), [world, tool],
                     [*anchor_inputs, free_anchors, run_directives, tool_note],
                     api_name=f"simulate_preset_{name.replace('-', '_')}")
    running = run.click(partial(simulate_steered, ctx), steered, outputs, api_name="simulate_run",
                        show_progress="minimal")  # scripts: the API's /simulate (ui/api.py) answers JSON
    run.click(lambda: BASELINE_HINT, None, baseline, api_visibility="private")  # its answer was for other inputs
    stop.click(lambda: "Stopped: the run was cancelled; press Run to start again.", None, status, cancels=[running],
               api_visibility="private")
    helpers = [sampler_inputs[name] for name in HELPERS]
    model_only.input(lambda only: [gr.update(value=not only) for _ in helpers], model_only, helpers,
                     api_visibility="private")  # the Sampler's own boxes say what a run uses (one update each:
    # Gradio consumes an update as it applies it)
    scrubber.input(replay, [simulation, scrubber], canvas, show_progress="hidden", trigger_mode="always_last",
                   api_name="simulate_replay")
    sample.input(heatmap_for, [simulation, sample], heatmap, api_name="simulate_heatmap")
    baseline_button.click(partial(baseline_steered, ctx), steered, baseline, api_name="simulate_baseline")
    save.click(partial(save_step, ctx), [simulation, sample, rollout, title], [save_status, rollout],
               api_name="simulate_save")
