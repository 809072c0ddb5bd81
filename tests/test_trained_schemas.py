"""The response schemas a model was trained with: kept per world and tool, refused for another world's tool or one
whose arguments changed, and laid out by generation when a world leaves a tool's schema out."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.model.canvas.canvas import SKELETON
from wmstudio.model.generation.generation import FROM_TRAINING, generate, schema_of_answers
from wmstudio.model.network.trained_schemas import SCHEMAS_FILE, TrainedSchemas, load_trained_schemas
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

pytestmark = pytest.mark.usefixtures("one_thread")


def _schema_less(world):
    return replace(world, tools=[replace(t, response=None) for t in world.tools])


def test_a_tool_keeps_the_schema_it_trained_with_and_another_worlds_namesake_gets_none(tmp_path):
    world = get_simulator("retail").world()
    call = Call("refund_order", {"order_id": "ORD-1", "amount_cents": 100})
    kept = TrainedSchemas.fit([(world, call), (world, call), (_schema_less(world), Call("get_order", {}))])
    bare = _schema_less(world)
    schema = kept.schema_for(bare, call)
    assert schema == world.tool("refund_order").response and kept.schemas["retail/refund_order"]["rows"] == 2
    schema["properties"].clear()  # the caller may edit its copy: the kept schema stays whole
    assert kept.schema_for(bare, call) == world.tool("refund_order").response
    assert "retail/get_order" not in kept.schemas  # trained without a schema: nothing to keep
    assert kept.schema_for(replace(bare, name="my-shop"), call) is None  # another world's refund_order
    changed = replace(bare, tools=[replace(t, parameters={"type": "object", "properties": {"id": {}}})
                                   if t.name == "refund_order" else t for t in bare.tools])
    assert kept.schema_for(changed, call) is None  # same name, other arguments: not the tool it trained on
    names = kept.key_names()  # every property name, nested ones too: the keys the copy head trained on
    assert {"order_id", "refund_processed", "status"} <= names and "first_name" not in names
    kept.save(tmp_path, {"rows": 2})
    assert load_trained_schemas(tmp_path).schema_for(bare, call) == world.tool("refund_order").response
    (tmp_path / SCHEMAS_FILE).write_text("{not json")
    assert load_trained_schemas(tmp_path) is None  # an unreadable file is no schemas, not a crash
    assert load_trained_schemas(tmp_path / "missing") is None


def test_a_status_answered_as_ok_error_and_a_few_words_is_a_choice_and_free_text_stays_text():
    answers = [{"status": "ok"}, {"status": "error"}, {"status": "partial"}]
    assert schema_of_answers(answers)["properties"]["status"] == {"type": "string",
                                                                  "enum": ["ok", "error", "partial"]}
    sentences = [{"status": "ok"}, *({"status": f"waiting on reply {n}"} for n in range(4))]
    assert "enum" not in schema_of_answers(sentences)["properties"]["status"]
    assert "enum" not in schema_of_answers([{"status": "open"}, {"status": "closed"}])["properties"]["status"]


def test_the_shipped_model_lays_out_a_schema_less_demo_tool_as_trained_and_copies_the_call_into_it():
    simulator = get_simulator("retail")
    world = simulator.world()
    bare = _schema_less(world)
    order = world.initial_state["orders"][3]["id"]
    call = Call("get_order", {"order_id": order})
    generation = generate(load_backend(), bare, call)
    truth = simulator.step(world.initial_state, call)[1]
    response = json.loads(generation.samples[0].response)
    assert generation.mode == SKELETON and generation.schema_from == FROM_TRAINING
    assert set(response) == set(truth) and response["order_id"] == order  # the keys kept, the id copied
    from wmstudio.ui.check_view import generation_html

    report = generation_html(generation, bare, bare.tool("get_order"), [])
    assert "laid out from the one the model was trained with for this tool" in report


def test_keep_schemas_writes_them_beside_a_model_and_refuses_a_corpus_without_worlds(
        tiny_model, demo_tokenizer, tmp_path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, rows=300, seed=3)
    folder = tmp_path / "model"
    tiny_model(demo_tokenizer, folder)
    result = CliRunner().invoke(app, ["keep-schemas", "--corpus", str(corpus), "--model", str(folder),
                                      "--rows", "200"])
    assert result.exit_code == 0, result.output
    fitted = json.loads(result.stdout)
    assert fitted["tools"] > 3 and len(load_trained_schemas(folder)) == fitted["tools"]
    assert load_backend(folder).trained_schemas is not None
    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "train.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                               {"role": "assistant", "content": "{}"}]}) + "\n")
    refused = CliRunner().invoke(app, ["keep-schemas", "--corpus", str(chat), "--model", str(folder)])
    assert refused.exit_code != 0 and "meta" in refused.output and "Traceback" not in refused.output
