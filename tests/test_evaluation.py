"""eval-wm: the report's exact shape, constant baselines beside every figure, flips picked right, field scores."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.backends import resolve_model_path
from wmstudio.train.chat_scoring import normalise, rouge_l, semantic_match
from wmstudio.train.evaluation import (
    EvalCase,
    Rates,
    evaluate_world_model,
    flip_anchor,
    load_cases,
    trivial_response,
    write_quality,
)
from wmstudio.world.checks import check_step
from wmstudio.world.corpus import write_corpus
from wmstudio.world.sims import get_simulator
from wmstudio.world.spec import Call

RATE_KEYS = {"json_valid", "schema_valid", "rule_consistent", "same_status", "rule_and_status", "nonempty_recall",
             "field_accuracy", "cases"}
KINDS = {"copy_call", "copy_state", "number_in_prompt", "derived_number", "status", "error_code", "bool", "enum",
         "neutral", "text"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus(folder, rows=30, seed=5)
    return folder


def _case(response: dict) -> EvalCase:
    world = get_simulator("retail").world()
    order = world.initial_state["orders"][0]["id"]
    return EvalCase(world, Call("refund_order", {"order_id": order, "amount_cents": 100}), [], json.dumps(response), "x")


def test_flip_anchor_pins_error_only_on_calls_that_succeeded():
    anchor = flip_anchor(_case({"refund_processed": True, "status": "ok"}))
    assert anchor is not None and (anchor.path, anchor.value) == ("status", "error")
    assert flip_anchor(_case({"refund_processed": False, "status": "error"})) is None


def test_the_constant_baselines_are_empty_responses_with_a_status():
    case = _case({"status": "ok"})
    assert json.loads(trivial_response(case, "error")) == {
        "order_id": "", "refund_id": "", "refund_processed": False, "amount_refunded_cents": 0,
        "total_refunded_cents": 0, "order_total_cents": 0, "error": "", "message": "", "status": "error"}


def test_rates_score_fields_by_kind_and_the_simulators_status():
    order = get_simulator("retail").world().initial_state["orders"][0]["id"]
    truth = {"order_id": order, "refund_id": "RF-1", "refund_processed": True, "amount_refunded_cents": 100,
             "total_refunded_cents": 100, "order_total_cents": 999, "error": "", "message": "", "status": "ok"}
    case = _case(truth)
    rates = Rates()
    right = json.dumps(truth)
    for response in (right, json.dumps({**truth, "order_id": "ORD-0", "status": "error"}), "not json"):
        rates.add(check_step(case.world, case.call, response), response, case)
    figures = rates.to_json()
    assert set(figures) == RATE_KEYS and set(figures["field_accuracy"]) == KINDS
    assert figures["cases"] == 3 and figures["same_status"] == pytest.approx(1 / 3, abs=1e-4)
    assert figures["field_accuracy"]["copy_call"] == pytest.approx(1 / 3, abs=1e-4)  # the order id: only the first has it
    assert figures["field_accuracy"]["number_in_prompt"] == pytest.approx(2 / 3, abs=1e-4)  # 100 is in the call
    assert figures["field_accuracy"]["enum"] is None  # no field of that kind in this response


@pytest.mark.slow
def test_evaluation_runs_end_to_end_and_prints_exactly_the_documented_report(corpus, tmp_path):
    report = evaluate_world_model(DEFAULT_MODEL, DEFAULT_AR_MODEL, corpus, rows=2, diversity_calls=1, samples=2)
    figures = report.to_json()
    assert set(figures) == {"rows", "model", "raw", "steered", "ar", "flip", "free", "trivial", "prompt_use",
                            "diversity"}
    for name in ("raw", "steered", "ar"):
        assert set(figures[name]) == RATE_KEYS and figures[name]["cases"] == 2
    assert set(figures["flip"]) == {"raw", "steered", "ar"} and set(figures["trivial"]) == {"neutral_error",
                                                                                            "neutral_ok"}
    assert set(figures["prompt_use"]) == {"own_nll", "swapped_nll"}
    assert figures["raw"]["json_valid"] == 1.0  # the skeleton canvas always yields parseable JSON
    assert set(figures["free"]) == {"cases", "json_valid", "schema_valid", "same_keys", "from_history",
                                    "from_training", "from_sketch", "canvas_json_valid", "canvas_same_keys"}
    assert figures["free"]["canvas_json_valid"] == 1.0  # the free canvas's JSON grammar
    assert set(figures["diversity"]) == {"mdlm", "ar"}
    assert 0.0 <= figures["diversity"]["mdlm"]["values_distinct_2"] <= 1.0
    assert not report.errors
    text = report.render()
    assert "field: copy_call" in text and "always error" in text
    folder = tmp_path / "model"  # --write: quality.json beside the weights, the card shows raw and steered
    shutil.copytree(resolve_model_path(DEFAULT_MODEL), folder)
    write_quality(report, folder)
    quality = json.loads((folder / "quality.json").read_text())
    assert quality["figures"] == figures
    assert quality["denoiser"]["cases"] == figures["raw"]["cases"]  # the shipped model has an outcome head
    card = (folder / "README.md").read_text()
    assert "| measure | raw | denoiser alone | steered | AR | always error | always ok |" in card
    assert "| field: copy_call |" in card and "outcome head" in card


def test_a_chat_corpus_without_meta_is_scored_by_the_papers_protocol(corpus, tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    rows = [json.loads(line) for line in (corpus / "test.jsonl").read_text().splitlines()[:3]]
    (public / "test.jsonl").write_text("".join(json.dumps({"messages": row["messages"]}) + "\n" for row in rows))
    result = CliRunner().invoke(app, ["eval-wm", "--corpus", str(public), "--rows", "3", "--ar", "",
                                      "--chat-length", "64", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["protocol"] == "chat" and report["rows"] == 3
    for name in ("mdlm", "constant_empty", "constant_majority"):
        assert set(report[name]) == {"rows", "exact_match", "semantic_match", "rouge_l_f1", "json_valid"}
        assert report[name]["rows"] == 3
    assert report["constant_empty"]["exact_match"] == 0.0  # no simulated response is `{}`
    assert report["constant_majority"]["rouge_l_f1"] > 0.0
    assert "ar" not in report  # --ar "": no AR baseline


def test_a_malformed_chat_row_is_named_with_its_line(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    (public / "test.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    result = CliRunner().invoke(app, ["eval-wm", "--corpus", str(public), "--rows", "1"])
    assert result.exit_code == 2
    assert "test.jsonl:1" in result.stderr and "ends with the assistant's response" in result.stderr


def test_the_papers_normalisation_and_matches():
    assert normalise('<think>plan</think><tool_response>\n{"b": 1, "a": 2}\n</tool_response>') == '{"a":2,"b":1}'
    assert semantic_match('{"amount":100}', '{"amount":100.0}')  # JSON numbers, as the paper's json.loads compares
    assert not semantic_match('{"amount":100}', '{"amount":101}')
    assert rouge_l("a b c d", "a b c d") == 1.0
    assert rouge_l("a x c", "a b c") == pytest.approx(2 / 3)  # LCS "a c": precision = recall = 2/3
    assert rouge_l("", "a") == 0.0


def test_cases_are_a_seeded_sample_of_the_split(corpus):
    first = [c.where for c in load_cases(corpus, "test", rows=2, seed=1)]
    assert first == [c.where for c in load_cases(corpus, "test", rows=2, seed=1)]
    assert resolve_model_path(DEFAULT_MODEL).endswith("wm-mdlm-small")
