"""The quality evaluation runs end to end on the shipped models, and picks its outcome-flipping anchors right."""

import json

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.backends import resolve_model_path
from wmstudio.train.evaluation import EvalCase, evaluate_world_model, flip_anchor, load_cases
from wmstudio.world.corpus import write_corpus
from wmstudio.world.sims import get_simulator
from wmstudio.world.spec import Call


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


@pytest.mark.slow
def test_evaluation_runs_end_to_end_on_the_shipped_models(corpus):
    report = evaluate_world_model(DEFAULT_MODEL, DEFAULT_AR_MODEL, corpus, rows=2, diversity_calls=1, samples=2)
    figures = report.figures
    assert figures["skeleton"]["cases"] == 2 and figures["free"]["cases"] == 2 and figures["ar"]["cases"] == 2
    assert figures["skeleton"]["json_valid"] == 1.0  # the skeleton canvas always yields parseable JSON
    assert set(figures["diversity"]) == {"mdlm", "ar"}
    assert 0.0 <= figures["diversity"]["mdlm"]["distinct_2"] <= 1.0
    assert not figures["errors"]
    text = report.render()
    assert "MDLM skeleton: rule-consistent" in text and "AR Self-BLEU" in text
    assert json.loads(json.dumps(report.to_json()))["summary"].startswith("Measured by")


def test_eval_cli_prints_json_and_names_bad_corpora(corpus, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["eval-wm", "--corpus", str(corpus), "--rows", "1", "--ar", "",
                                 "--diversity-calls", "0", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["figures"]["skeleton"]["cases"] == 1 and data["figures"]["ar"] is None

    public = tmp_path / "public"
    public.mkdir()
    row = json.loads((corpus / "test.jsonl").read_text().splitlines()[0])
    (public / "test.jsonl").write_text(json.dumps({"messages": row["messages"]}) + "\n")
    result = runner.invoke(app, ["eval-wm", "--corpus", str(public), "--rows", "1"])
    assert result.exit_code == 2
    assert "no rows with `meta`" in result.stderr


def test_cases_are_a_seeded_sample_of_the_split(corpus):
    first = [c.where for c in load_cases(corpus, "test", rows=2, seed=1)]
    assert first == [c.where for c in load_cases(corpus, "test", rows=2, seed=1)]
    assert resolve_model_path(DEFAULT_MODEL).endswith("wm-mdlm-small")


def test_rates_count_exact_matches_and_the_simulators_status():
    from wmstudio.train.evaluation import Rates
    from wmstudio.world.checks import check_step

    case = _case({"status": "ok"})
    truth = '{"refund_processed":true,"status":"ok"}'
    rates = Rates()
    for response in (truth, '{"refund_processed":false,"status":"ok"}', '{"status":"error"}', "not json"):
        rates.add(check_step(case.world, case.call, response), response, truth)
    figures = rates.to_json()
    assert figures["cases"] == 4 and figures["exact"] == 0.25 and figures["same_status"] == 0.5
    assert figures["json_valid"] == 0.75
