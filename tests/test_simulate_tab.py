"""The Simulate tab: schema-generated forms, running and saving a simulated call, and the same over HTTP.

A tiny random world model (built here, saved to disk, loaded like the shipped one) denoises real responses of
the demo worlds; the app is launched on a free loopback port and driven with gradio_client as a client would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gradio as gr
import pytest
from gradio_client import Client
from serving import free_port

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.denoising.sampler_settings import SETTING_NAMES
from wmstudio.model.generation.generation import generate_stream
from wmstudio.problems import InvalidInput
from wmstudio.store import (
    create_rollout,
    filter_rollouts,
    get_rollout,
    list_worlds,
    open_store,
    rollout_steps,
    save_world_version,
    step_trace,
)
from wmstudio.studio.context import StudioContext
from wmstudio.studio.simulation import (
    run_baseline,
    run_simulation,
    save_simulation,
)
from wmstudio.ui.denoise_view import canvas_html, heatmap_figure
from wmstudio.ui.forms import (
    MASKED,
    anchors_from_form,
    argument_fields,
    arguments_from_form,
    form_from_arguments,
    parse_json_field,
    read_arguments,
    read_value,
    response_fields,
    show_value,
)
from wmstudio.ui.simulate_tab import ANCHOR_SLOTS, build_simulate_tab, finished_view
from wmstudio.world.spec import Call, WorldSpec, load_world
from wmstudio.world.steering.anchors import Anchor, parse_anchors
from wmstudio.world.tools import import_tools_file

DEMO_WORLDS = sorted(DEMO_WORLDS_DIR.glob("*.json"))
SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"
TOOL_FILES = sorted(p for p in SAMPLES.rglob("*") if p.suffix in {".json", ".yaml"} and "possible_answer" not in p.parts
                    and "init_database" not in p.parts and "lv1-lv2-samples" not in p.parts)
EXAMPLES = {"string": "a b", "integer": 3, "number": 2.5, "boolean": True, "json": [1, {"k": "v"}]}
FAST = SamplerSettings(steps=4)


def parsed(call, anchors=()):
    """A call and anchors as the UI and the CLI hand them on: parsed once, at the boundary."""
    text_or_object = parse_json_field(call, "call") if isinstance(call, str) else call
    return Call.from_json(text_or_object, "call"), parse_anchors(anchors)  # four denoising steps keep each run short on a busy CPU
CANVAS_STATE = re.compile(r'data-step="(-?\d+)" data-done="(\d)" data-masked="(\d+)"')


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tiny_model, demo_tokenizer, tmp_path_factory):
    """A tiny masked diffusion world model and a tiny autoregressive baseline sharing one tokenizer."""
    return {kind: tiny_model(demo_tokenizer, tmp_path_factory.mktemp(kind), kind=kind) for kind in ("mdlm", "ar")}


@pytest.fixture(scope="module")
def ctx(models, tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("db") / "studio.db")
    for path in DEMO_WORLDS:
        save_world_version(store, load_world(path))
    context = StudioContext(store=store, model=models["mdlm"], ar_model=models["ar"])
    context.backend()
    return context


@pytest.fixture(scope="module")
def worlds(ctx):
    """World name -> id of its saved version."""
    return {w.name: w.latest.id for w in list_worlds(ctx.store)}


@pytest.fixture(scope="module")
def client(ctx):
    with gr.Blocks() as app, gr.Tab("Simulate"):
        build_simulate_tab(ctx, app)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False)
    app.close()


def retail_tool(name: str):
    return load_world(DEMO_WORLDS_DIR / "retail.json").tool(name)


# ---- forms generated from schemas --------------------------------------------------------------------------------

def test_every_demo_tool_gets_a_field_per_argument_and_per_response_value():
    for path in DEMO_WORLDS:
        for tool in load_world(path).tools:
            arguments = argument_fields(tool.parameters)
            assert [f.path for f in arguments] == list(tool.parameters["properties"])
            required = set(tool.parameters.get("required", []))
            assert {f.path for f in arguments if f.required} == required
            assert [f.path for f in response_fields(tool.response)] == list(tool.response["properties"])


def test_field_kinds_labels_and_choices_follow_the_schema():
    refund = {f.path: f for f in argument_fields(retail_tool("refund_order").parameters)}
    assert refund["amount_cents"].kind == "integer" and refund["amount_cents"].required
    assert "whole number" in refund["amount_cents"].label and "required" in refund["amount_cents"].label
    response = {f.path: f for f in response_fields(retail_tool("refund_order").response)}
    assert response["status"].kind == "enum" and response["status"].choices() == ["ok", "partial", "error"]
    assert response["refund_processed"].choices() == ["true", "false"]
    listing = {f.path: f for f in response_fields(retail_tool("list_orders").response)}
    assert listing["orders"].kind == "json"  # a list is pinned as a whole JSON value


def test_nested_objects_refs_and_nullable_unions_become_typed_fields():
    schema = {
        "type": "object",
        "$defs": {"money": {"type": "object", "properties": {"cents": {"type": "integer"},
                                                               "currency": {"enum": ["usd", "eur"]}}}},
        "properties": {
            "price": {"$ref": "#/$defs/money"},
            "note": {"anyOf": [{"type": "null"}, {"type": "string", "description": "free text"}]},
            "flags": {"type": ["boolean", "null"]},
        },
    }
    fields = {f.path: f for f in response_fields(schema)}
    assert list(fields) == ["price.cents", "price.currency", "note", "flags"]
    assert fields["price.cents"].kind == "integer" and fields["price.currency"].options == ("usd", "eur")
    assert fields["note"].kind == "string" and fields["note"].description == "free text"
    assert fields["flags"].kind == "boolean"


def test_forms_work_for_every_imported_tool_of_the_sample_files():
    tools = []
    for path in TOOL_FILES:
        try:
            tools += import_tools_file(path).tools
        except InvalidInput:
            continue  # files of calls or tasks rather than tools: the importer tests cover them
    assert len(tools) > 300
    for tool in tools:
        fields = argument_fields(tool.parameters) + response_fields(tool.response)
        assert [f.path for f in argument_fields(tool.parameters)] == list(tool.parameters.get("properties", {}))
        for field in fields:
            example = field.options[0] if field.kind == "enum" else EXAMPLES[field.kind]
            assert read_value(field, show_value(example)) == example, (tool.name, field)
            assert field.label.startswith(field.path)


def test_typed_text_is_read_as_the_json_value_it_stands_for():
    fields = {f.path: f for f in response_fields(retail_tool("refund_order").response)}
    assert read_value(fields["order_total_cents"], "1250") == 1250
    assert read_value(fields["refund_processed"], "false") is False
    assert read_value(fields["order_id"], "1250") == "1250"  # a text field keeps digits as text
    assert read_value(fields["error"], '""') == ""  # the empty string is written as ""
    assert read_value(fields["order_total_cents"], "twelve") == "twelve"  # left for the schema check to reject


def test_form_and_arguments_json_stay_in_step_and_the_json_keeps_what_the_form_lacks():
    fields = argument_fields(retail_tool("refund_order").parameters)
    merged = json.loads(arguments_from_form(fields, ["ORD-23411", "1250", ""], '{"reason": "late", "extra": [1]}'))
    assert merged == {"order_id": "ORD-23411", "amount_cents": 1250, "extra": [1]}  # emptied reason removed
    assert form_from_arguments(fields, json.dumps(merged)) == ["ORD-23411", "1250", ""]
    with pytest.raises(InvalidInput) as err:
        arguments_from_form(fields, ["x", "", ""], '{"order_id": ')
    assert err.value.problems[0].path == "arguments"
    with pytest.raises(InvalidInput, match="JSON object"):
        form_from_arguments(fields, "[1, 2]")


@pytest.mark.parametrize("typed", ["1e400", "-1e400", "Infinity", "NaN", "inf"])
def test_a_number_json_cannot_hold_is_refused_at_the_form_naming_the_field(typed):
    fields = argument_fields(retail_tool("refund_order").parameters)
    with pytest.raises(InvalidInput) as err:
        arguments_from_form(fields, ["ORD-23411", typed, ""], '{"order_id": "ORD-23411", "amount_cents": 500}')
    [problem] = err.value.problems
    assert problem.path == "amount_cents" and typed in problem.message and "whole number" in problem.message
    with pytest.raises(InvalidInput) as err:  # typed into the JSON that Run sends instead
        read_arguments('{"order_id": "ORD-23411", "amount_cents": %s}' % typed)
    assert err.value.problems[0].path == "arguments"
    assert read_value(fields[1], "1e3") == 1000.0  # a finite number in exponent form is still read


def test_anchor_form_skips_masked_fields_adds_free_lines_and_rejects_a_double_pin():
    fields = response_fields(retail_tool("refund_order").response)
    texts = [MASKED] * len(fields)
    texts[[f.path for f in fields].index("status")] = "error"
    anchors = anchors_from_form(fields, texts, 'refund_processed=false\nmessage="Card declined"')
    assert anchors == [Anchor("status", "error"), Anchor("refund_processed", False), Anchor("message", "Card declined")]
    with pytest.raises(InvalidInput, match="pinned twice"):
        anchors_from_form(fields, texts, 'status="ok"')
    with pytest.raises(InvalidInput, match="anchor"):
        anchors_from_form(fields, texts, "not an anchor")


def test_sampler_settings_name_every_bad_value_at_once():
    with pytest.raises(InvalidInput) as err:
        SamplerSettings.from_form(steps=-3, strategy="fastest", threshold=1.5, samples=40, free_length=0)
    paths = {p.path for p in err.value.problems}
    assert paths == {"steps", "strategy", "threshold", "samples", "free_length"}
    assert SamplerSettings.from_form(steps=0.0, threshold=0, block=0, samples=2.0).threshold is None
    assert SamplerSettings.from_form(steps=0.0, samples=2.0) == SamplerSettings(samples=2)


# ---- running and saving (plain functions) --------------------------------------------------------------------------

def test_a_run_shows_the_canvas_first_then_each_step_and_honours_the_anchor(ctx, worlds):
    call = {"name": "refund_order", "arguments": {"order_id": "ORD-22930", "amount_cents": 500}}
    masked_left, finished = [], None
    for simulation in run_simulation(ctx, worlds["retail"], *parsed(call, ['status="error"']), SamplerSettings(steps=6)):
        if simulation.done:
            finished = simulation
        else:
            index = len(simulation.frames) - 1 if simulation.frames else None
            state = CANVAS_STATE.search(canvas_html(simulation.canvas, simulation.frames, index, simulation.traces))
            masked_left.append(int(state.group(3)))
    assert len(masked_left) >= 4 and masked_left[0] == len(finished.canvas.masked_positions)
    assert masked_left == sorted(masked_left, reverse=True) and masked_left[-1] == 0
    sample = finished.generation.samples[0]
    assert json.loads(sample.response)["status"] == "error"
    assert sample.checks.json_valid and not sample.checks.anchor_violations
    assert finished.warnings == []  # the call fits the parameter schema


def test_the_report_says_when_the_outcome_was_decided_first_and_how_surely(ctx, worlds):
    shipped = StudioContext(store=ctx.store)  # the embedded default model, trained outcome first
    call = {"name": "refund_order", "arguments": {"order_id": "ORD-22930", "amount_cents": 500}}
    *_, headed = run_simulation(shipped, worlds["retail"], *parsed(call, []), SamplerSettings())
    chosen = headed.generation.outcome  # by default the outcome head chooses and the canvas is denoised under it
    assert chosen is not None and json.loads(headed.generation.samples[0].response)["status"] == chosen.status
    assert headed.generation.decided_first() is None and "The outcome head chose" in finished_view(headed)[0]
    saved = save_simulation(shipped, headed, sample=0)  # provenance says the head, not the user, chose the outcome
    assert saved.made_by["outcome"] == chosen.to_json() and "anchors" not in saved.made_by
    *_, free = run_simulation(shipped, worlds["retail"], *parsed(call, []), SamplerSettings(outcome_head=False))
    decided, probability = free.generation.decided_first()
    assert decided == json.loads(free.generation.samples[0].response)["status"] and 0.0 < probability <= 1.0
    outcome = free.canvas.outcome_span()
    assert free.frames[0].unmasked[0] == [outcome.start]  # the shipped model is trained outcome first
    assert f'Outcome decided first, from the prompt: status "{decided}" (p = {probability:.2f})' in \
        finished_view(free)[0]
    *_, pinned = run_simulation(shipped, worlds["retail"], *parsed(call, ['status="error"']), SamplerSettings())
    within = pinned.generation.outcome  # the pin narrows the head's choice to the codes whose cause holds
    assert within is not None and within.status == "error" and within.error
    assert json.loads(pinned.generation.samples[0].response)["error"] == within.error
    assert pinned.generation.decided_first() is None and "Outcome decided first" not in finished_view(pinned)[0]


def test_saving_puts_the_step_its_provenance_checks_and_trace_into_a_rollout(ctx, worlds):
    call = {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}
    simulation = list(run_simulation(ctx, worlds["retail"], *parsed(call, ['order_status="processing"']),
                                     SamplerSettings(steps=4, samples=2, temperature=1.0, seed=7)))[-1]
    step = save_simulation(ctx, simulation, sample=1, title="lookup")
    rollout = get_rollout(ctx.store, step.rollout_id)
    assert rollout.title == "lookup" and rollout.world_id == worlds["retail"]
    [saved] = rollout_steps(ctx.store, rollout.id)
    assert saved.call == call and saved.response == simulation.generation.samples[1].response
    made_by = saved.made_by
    assert made_by["kind"] == "model" and made_by["model"] == ctx.model and made_by["seed"] == 7
    assert made_by["anchors"] == [{"path": "order_status", "value": "processing"}]
    assert made_by["sampler"]["samples"] == 2 and made_by["sampler"]["sample_index"] == 1
    assert saved.check_report == simulation.generation.samples[1].checks.to_json()
    trace = step_trace(ctx.store, saved.id)
    assert sorted(e.position for e in trace) == simulation.canvas.masked_positions  # each slot committed once
    assert {e.step for e in trace} <= set(range(len(simulation.frames)))

    second = save_simulation(ctx, simulation, sample=0, rollout_id=rollout.id)
    assert second.rollout_id == rollout.id and second.index == 1
    other = create_rollout(ctx.store, worlds["airline"], "elsewhere")
    with pytest.raises(InvalidInput, match="another world version"):
        save_simulation(ctx, simulation, rollout_id=other.id)
    with pytest.raises(InvalidInput, match="sample"):
        save_simulation(ctx, simulation, sample=5)
    with pytest.raises(InvalidInput, match="press Run"):
        save_simulation(ctx, None)


@pytest.mark.parametrize(
    ("call", "anchors", "settings", "path", "words"),
    [
        ({"name": "teleport", "arguments": {}}, [], FAST, "call.name", "choose one of get_order"),
        ('{"name": "get_order", "arguments": ', [], FAST, "call", "invalid JSON"),
        ({"name": "get_order", "arguments": {}}, ["colour=1"], FAST, "anchor colour", "no field `colour`"),
        ({"name": "get_order", "arguments": {}}, ['total_cents="lots"'], FAST, "anchor total_cents", "expected an"),
        ({"name": "get_order", "arguments": {}}, [], SamplerSettings(free=True, free_length=4080), "",
         "over the model's context"),
    ],
    ids=["unknown tool", "broken call JSON", "anchor on a missing field", "anchor of the wrong type",
         "canvas too long"],
)
def test_bad_requests_are_refused_before_anything_runs(ctx, worlds, call, anchors, settings, path, words):
    with pytest.raises(InvalidInput) as err:
        next(run_simulation(ctx, worlds["retail"], *parsed(call, anchors), settings))
    assert any(p.path == path and words in p.message for p in err.value.problems), err.value.problems


def test_an_imported_bfcl_tool_is_simulated_with_its_anchor(ctx):
    tools = import_tools_file(SAMPLES / "bfcl" / "multi_turn_func_doc" / "math_api.json").tools[:3]
    world = save_world_version(ctx.store, WorldSpec(name="math", task="Compute things.", tools=tools))
    call = {"name": tools[0].name, "arguments": {"number": -5}}
    simulation = list(run_simulation(ctx, world.id, *parsed(call, ["result=5"]), FAST))[-1]
    assert json.loads(simulation.generation.samples[0].response)["result"] == 5


def test_an_unknown_world_is_named(ctx):
    with pytest.raises(InvalidInput, match="choose a world"):
        next(run_simulation(ctx, None, Call("get_order")))
    with pytest.raises(InvalidInput, match="world_id"):
        next(run_simulation(ctx, 99999, Call("get_order")))


def test_arguments_that_break_the_parameter_schema_are_simulated_with_a_warning(ctx, worlds):
    call = {"name": "refund_order", "arguments": {"order_id": "ORD-22930", "amount_cents": "all of it"}}
    simulation = list(run_simulation(ctx, worlds["retail"], *parsed(call), FAST))[-1]
    assert simulation.done
    assert simulation.warnings == ["arguments.amount_cents: 'all of it' is not of type 'integer'"]


def test_the_heatmap_has_one_cell_per_committed_slot(ctx, worlds):
    simulation = list(run_simulation(ctx, worlds["payments"], Call("get_balance"), [], FAST))[-1]
    [heatmap] = heatmap_figure(simulation.canvas, simulation.frames).data
    cells = [(step, x) for step, row in enumerate(heatmap.z) for x, v in enumerate(row) if v is not None]
    assert len(heatmap.z) == len(simulation.frames)
    assert sorted(x for _, x in cells) == simulation.canvas.masked_positions


def test_the_baseline_answers_the_same_call_with_anchors_as_directives(ctx, worlds, tmp_path):
    generation = run_baseline(ctx, worlds["retail"], *parsed({"name": "get_order", "arguments": {"order_id": "ORD-1"}},
                                                             ['status="error"']), SamplerSettings(free_length=16))
    assert generation.mode == "autoregressive" and len(generation.samples) == 1
    assert generation.samples[0].checks.anchor_violations  # a random AR model does not write status "error"
    no_baseline = StudioContext(store=ctx.store, model=ctx.model, ar_model=None)
    with pytest.raises(InvalidInput, match="no autoregressive baseline"):
        run_baseline(no_baseline, worlds["retail"], Call("get_order"), [], FAST)


# ---- over HTTP, as the browser and API clients use it ----------------------------------------------------------------

def request(world_id, tool, arguments="{}", pins=None, free="", steps=4, samples=1, temperature=0.0,
            free_mode=False, free_length=64, outcome_head=True):
    """The /simulate_run inputs in order: the form, the sampler, then the anchor slots (field -> value)."""
    fields = [f.path for f in response_fields(retail_tool(tool).response)] if tool in {
        t.name for t in load_world(DEMO_WORLDS_DIR / "retail.json").tools} else []
    slots = [MASKED] * ANCHOR_SLOTS
    for path, value in (pins or {}).items():
        slots[fields.index(path)] = value
    settings = {"steps": steps, "strategy": "low_confidence", "threshold": 0.9, "block": 0,
                "temperature": temperature, "repetition_penalty": 1.0, "samples": samples, "seed": 0,
                "free": free_mode, "free_length": free_length, "repair": False, "outcome_head": outcome_head,
                "copy_head": True, "record_copy": True, "rule_outcomes": True, "rule_fields": True, "grounding": "none",
                "retrieval": True}
    return [world_id, tool, arguments, free, *(settings[name] for name in SETTING_NAMES), *slots]


def test_run_streams_frames_then_the_report_and_save_stores_the_step(client, ctx, worlds):
    job = client.submit(*request(worlds["retail"], "refund_order", '{"order_id": "ORD-22930", "amount_cents": 500}',
                                 pins={"status": "error"}, steps=6), api_name="/simulate_run")
    status, _, scrubber, heatmap, report, _ = job.result()
    canvases = [CANVAS_STATE.search(out[1]).groups() for out in job.outputs() if isinstance(out[1], str)]
    steps = [int(step) for step, _, _ in canvases]
    masked = [int(m) for _, _, m in canvases]
    assert steps[0] == -1 and len(set(steps)) >= 4, canvases  # the empty canvas, then frame after frame
    assert masked == sorted(masked, reverse=True) and masked[0] > masked[-1] == 0
    assert canvases[-1][1] == "1" and "Done:" in status
    assert scrubber["value"] == scrubber["maximum"] == steps[-1] + 1 and heatmap["type"] == "plotly"
    assert "Anchor: status=&quot;error&quot;" in report and "JSON: valid" in report

    replayed = client.predict(1, api_name="/simulate_replay")
    assert CANVAS_STATE.search(replayed).group(1) == "0"  # step 1 of the replay is the first frame

    before = filter_rollouts(ctx.store, world_id=worlds["retail"]).total
    message, rollouts = client.predict(0, 0, "refund turned down", api_name="/simulate_save")
    assert "Saved as step 1" in message
    page = filter_rollouts(ctx.store, world_id=worlds["retail"], text="refund turned down")
    assert page.total == 1 and filter_rollouts(ctx.store, world_id=worlds["retail"]).total == before + 1
    [step] = rollout_steps(ctx.store, page.items[0].id)
    assert json.loads(step.response)["status"] == "error" and step.made_by["anchors"][0]["value"] == "error"
    assert len(step_trace(ctx.store, step.id)) > 0
    assert rollouts["value"] == page.items[0].id  # the next Save goes into the same rollout


def test_several_samples_are_shown_side_by_side_with_diversity_figures(client, worlds):
    *_, report, samples = client.predict(*request(worlds["retail"], "get_order", '{"order_id": "ORD-23411"}',
                                                  samples=3, temperature=1.0), api_name="/simulate_run")
    assert report.count('class="wm-card"') == 3 and "Self-BLEU" in report and "Distinct-2" in report
    assert [label for label, _ in samples["choices"]] == ["Sample 1", "Sample 2", "Sample 3"]


@pytest.mark.parametrize(
    ("tool", "arguments", "pins", "free", "expected"),
    [
        ("get_order", '{"order_id": ', {}, "", "`arguments`"),
        ("teleport", "{}", {}, "", "no tool 'teleport'"),
        ("get_order", "{}", {}, "colour=1", "`anchor colour`"),
        ("get_order", "{}", {"total_cents": "lots"}, "", "`anchor total_cents`"),
    ],
    ids=["bad arguments JSON", "unknown tool", "anchor on a missing field", "anchor of the wrong type"],
)
def test_bad_inputs_over_http_give_a_message_and_no_traceback(client, worlds, tool, arguments, pins, free, expected):
    outputs = client.predict(*request(worlds["retail"], tool, arguments, pins, free), api_name="/simulate_run")
    assert expected in outputs[0] and "Cannot run" in outputs[0] and "Traceback" not in outputs[0]


def test_a_canvas_longer_than_the_context_is_refused_over_http(client, worlds):
    outputs = client.predict(*request(worlds["retail"], "get_order", free_mode=True, free_length=4080),
                             api_name="/simulate_run")
    assert "over the model's context" in outputs[0]


def test_choosing_a_tool_lays_out_its_forms_and_the_form_writes_the_json(client, worlds):
    tool_choices, rollouts, _ = client.predict(worlds["retail"], api_name="/simulate_world")
    assert tool_choices["value"] == "get_order" and rollouts["choices"][0] == ["New rollout", 0]
    arguments, *slots, note = client.predict(worlds["retail"], "refund_order", api_name="/simulate_tool")
    labels = [s.get("label") for s in slots if s.get("visible")]
    assert arguments == "{}" and labels[:3] == ["order_id · text · required", "amount_cents · whole number · required",
                                                "reason · text"]
    assert "status · one of ok | partial | error" in labels and "Refund part or all" in note
    arguments, note = client.predict(worlds["retail"], "refund_order", '{"reason": "late"}', "ORD-1", "250", "late",
                                     *[""] * 7, api_name="/simulate_form_to_json")
    assert json.loads(arguments) == {"reason": "late", "order_id": "ORD-1", "amount_cents": 250} and note == ""
    kept, note = client.predict(worlds["retail"], "refund_order", arguments, "ORD-1", "1e400", "late", *[""] * 7,
                                api_name="/simulate_form_to_json")
    assert "`amount_cents`: 1e400" in note and "Infinity" not in str(kept)  # refused at the form, the JSON kept
    texts = client.predict(worlds["retail"], "refund_order", '{"amount_cents": 9}',
                           api_name="/simulate_arguments_to_form")
    assert list(texts[:3]) == ["", "9", ""]
    # switching tools starts its form empty: no argument of the other tool is carried over
    arguments, *slots, _ = client.predict(worlds["retail"], "cancel_order", api_name="/simulate_tool")
    assert json.loads(arguments) == {} and slots[0]["value"] == "" and slots[0]["label"] == "order_id · text · required"


def test_save_before_any_run_explains_what_to_do(client):
    fresh_session = Client(client.src, verbose=False)
    message, _ = fresh_session.predict(0, 0, "", api_name="/simulate_save")
    assert "nothing to save yet" in message and "Traceback" not in message


def test_the_baseline_button_shows_the_ar_answer_with_its_checks(client, worlds):
    html = client.predict(*request(worlds["retail"], "get_order", '{"order_id": "ORD-1"}', free_length=16),
                          api_name="/simulate_baseline")
    assert "Autoregressive baseline" in html and 'class="wm-badge' in html


def test_refreshing_the_worlds_moves_to_the_newest_version_of_the_chosen_world(client, ctx, worlds):
    old = worlds["filesystem"]
    changed = load_world(DEMO_WORLDS_DIR / "filesystem.json")
    changed.task = "Tidy the notes folder without deleting anything."
    newer = save_world_version(ctx.store, changed)
    update = client.predict(old, api_name="/simulate_worlds")
    assert update["value"] == newer.id and ["filesystem (v2)", newer.id] in update["choices"]
    assert client.predict(worlds["retail"], api_name="/simulate_worlds")["value"] == worlds["retail"]


def test_a_context_can_route_the_denoising_through_its_own_stream(ctx, worlds):
    """What a Space on ZeroGPU does with its @spaces.GPU function: Simulate runs through ctx.generation_stream."""
    seen = []

    def on_device(backend, world, call, anchors, history, settings):
        seen.append(call.name)
        yield from generate_stream(backend, world, call, anchors, history, settings)

    call = {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}
    ctx.generation_stream = on_device
    try:
        routed = list(run_simulation(ctx, worlds["retail"], *parsed(call), SamplerSettings(steps=4)))[-1]
    finally:
        ctx.generation_stream = None
    plain = list(run_simulation(ctx, worlds["retail"], *parsed(call), SamplerSettings(steps=4)))[-1]
    assert seen == ["get_order"]
    assert routed.generation.samples[0].response == plain.generation.samples[0].response


def test_an_error_answers_neutral_fields_are_said_to_be_the_worlds_convention_not_made_up():
    from wmstudio.ui.check_view import neutral_note

    refused = json.dumps({"order_id": "ORD-23411", "refund_id": "", "order_total_cents": 0, "error": "ORDER_NOT_DELIVERED",
                          "message": "Order ORD-23411 is processing.", "status": "error"})
    note = neutral_note(refused)
    assert "refund_id, order_total_cents" in note and "order_id" not in note and "not values made up" in note
    assert neutral_note(json.dumps({"order_total_cents": 0, "status": "ok"})) == ""  # an ok answer's 0 is a value
    assert neutral_note("{broken") == ""
