"""Shape canvases: training teaches a model to sketch a tool's response schema from a prompt that does not show
it, and generation for a tool without a schema asks a model trained so for its sketch, laying the skeleton out
from it (or a free canvas when the sketch is not one). The shipped model's own sketches are checked too."""

from __future__ import annotations

import json

import pytest

from wmstudio.model.canvas.shape_canvas import SHAPE_LEAD, SHAPE_LENGTH, lead_ids, read_sketch, shape_canvas
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.network.tokenizer import encode_text
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.examples import build_examples, read_corpus_split
from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.heads.schema_sketch import sketch_text
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus(folder, rows=40, seed=11)
    return read_corpus_split(folder, "train")


def test_a_shape_row_trains_the_sketch_beside_the_tools_short_prompt_without_its_schema(rows, demo_tokenizer):
    tokenizer = demo_tokenizer
    plain = build_examples(rows, tokenizer, "mdlm", 3072, 768, shape_share=0.0)
    shaped = build_examples(rows, tokenizer, "mdlm", 3072, 768, shape_share=1.0)
    assert plain.shape_canvases == 0 and all(c.style != "shape" for e in plain.examples for c in e.canvases)
    assert 0.8 * shaped.skeleton_canvases <= shaped.shape_canvases <= shaped.skeleton_canvases  # sketches that fit
    assert len(shaped.examples) == len(plain.examples) + shaped.shape_canvases
    kept = [e for e in shaped.examples if "shape" not in {c.style for c in e.canvases}]
    assert [(e.prompt_ids, [c.tokens for c in e.canvases]) for e in kept] == \
        [(e.prompt_ids, [c.tokens for c in e.canvases]) for e in plain.examples]  # the rows' own examples unchanged
    lead = lead_ids(tokenizer)
    tools = {tool.name: tool for sim in SIMULATORS.values() for tool in sim.tools()}
    checked = 0
    for example in shaped.examples:
        styles = [c.style for c in example.canvases]
        if "shape" not in styles:
            continue
        assert styles == ["shape"] * 3
        prompt = tokenizer.decode(example.prompt_ids)
        call = json.loads(prompt.split("Active tool call: ", 1)[1].split("\n", 1)[0])
        tool = tools[call["name"]]
        assert f'"name":"{tool.name}"' in prompt and '"response":' not in prompt.split("## TOOL SCHEMAS", 1)[1]
        assert "State" not in prompt.split("## TASK CONTEXT")[0] and "Turn 1" not in prompt  # the tool, no state
        shape = example.canvases[0]
        assert shape.tokens[:len(lead)] == lead and not any(shape.maskable[:len(lead)])
        assert len(shape.tokens) == len(lead) + SHAPE_LENGTH and all(shape.maskable[len(lead):])
        written = [t for t in shape.tokens[len(lead):] if t != tokenizer.pad_token_id]
        assert tokenizer.decode(written) == sketch_text(tool.response)
        checked += 1
    assert checked == shaped.shape_canvases


def test_a_shape_canvas_reads_back_the_schema_its_sketch_describes(demo_tokenizer, tiny_model, tmp_path):
    backend = load_backend(tiny_model(demo_tokenizer, tmp_path / "m"))
    canvas = shape_canvas(backend)
    assert canvas.vocab.decode(canvas.tokens[:len(lead_ids(demo_tokenizer))]) == SHAPE_LEAD
    schema = SIMULATORS["filesystem"].world().tool("mkdir").response
    ids = encode_text(demo_tokenizer, sketch_text(schema))
    tokens = list(canvas.tokens)
    start = canvas.spans[0].start
    tokens[start:start + SHAPE_LENGTH] = ids + [canvas.pad_id] * (SHAPE_LENGTH - len(ids))
    written = read_sketch(canvas, tokens)
    assert written.text == sketch_text(schema)
    assert list(written.schema["properties"]) == list(schema["properties"])
    assert read_sketch(canvas, list(canvas.tokens)).schema is None  # nothing written: no schema


def test_a_model_not_trained_for_sketches_is_never_asked_and_a_bad_sketch_leaves_a_free_canvas(
        demo_tokenizer, tiny_model, tmp_path, one_thread):
    backend = load_backend(tiny_model(demo_tokenizer, tmp_path / "m"))
    world = SIMULATORS["filesystem"].world().without_response_schema("mkdir")
    call = Call("mkdir", {"path": "/tmp/new"})
    settings = SamplerSettings(free_length=32, steps=8)
    assert not backend.writes_shape
    untrained = generate(backend, world, call, settings=settings)
    assert untrained.sketch is None and untrained.mode == "free" and untrained.schema_from is None
    backend.writes_shape = True  # a random model asked for a sketch writes no schema: the free canvas stays
    asked = generate(backend, world, call, settings=settings)
    assert asked.sketch is not None and asked.sketch.schema is None
    assert asked.mode == "free" and asked.schema_from is None and asked.samples[0].checks.json_valid
    assert generate(backend, world, call, settings=SamplerSettings(free=True, free_length=32)).sketch is None
