"""eval-wm: the report's exact shape, baselines that can win beside every figure, flips picked right, field scores."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.model.serving.backends import resolve_model_path
from wmstudio.train.world_model.baselines import TrainingAnswers, baseline_response, nearest_response, status_reason
from wmstudio.train.world_model.chat_scoring import normalise, rouge_l, semantic_match
from wmstudio.train.world_model.evaluation import (
    EvalCase,
    Rates,
    evaluate_world_model,
    flip_anchor,
    load_cases,
    write_quality,
)
from wmstudio.world.checks.report import check_step
from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

RATE_KEYS = {"json_valid", "schema_valid", "rule_consistent", "same_status", "rule_and_status", "nonempty_recall",
             "field_accuracy", "cases", "code_contradicted", "message_strays", "text_repeats"}
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
    answer = baseline_response("neutral_error", case.world, case.call, case.world.initial_state, TrainingAnswers())
    assert json.loads(answer) == {
        "order_id": "", "refund_id": "", "refund_processed": False, "amount_refunded_cents": 0,
        "total_refunded_cents": 0, "order_total_cents": 0, "error": "", "message": "", "status": "error"}


def _answers(world, rows):
    answers = TrainingAnswers()
    for call, response in rows:
        answers.add(world, call, world.initial_state, json.dumps(response))
    return answers


def test_echo_copies_the_call_and_the_named_record_under_the_tools_majority_outcome():
    case = _case({"status": "ok"})
    order = case.world.initial_state["orders"][0]
    answers = _answers(case.world, [(case.call, {"status": "ok", "error": ""})] * 2
                       + [(case.call, {"status": "error", "error": "X"})])
    echo = json.loads(baseline_response("echo", case.world, case.call, case.world.initial_state, answers))
    assert echo["status"] == "ok" and echo["order_id"] == order["id"]  # the call's argument, same-named field
    get = Call("get_order", {"order_id": order["id"]})
    record = json.loads(baseline_response("echo", case.world, get, case.world.initial_state, answers))
    assert record["total_cents"] == order["total_cents"]  # the state record the call's id names


def test_rule_status_answers_error_for_an_unknown_id_a_bad_argument_or_an_error_directive():
    world = get_simulator("retail").world()
    known = world.initial_state["orders"][0]["id"]
    unknown = Call("get_order", {"order_id": "ORD-00000"})
    assert status_reason(world, Call("get_order", {"order_id": known}), world.initial_state) == "none"
    assert status_reason(world, unknown, world.initial_state) == "unknown_id"
    assert status_reason(world, Call("get_order", {"order_id": 7}), world.initial_state) == "invalid_argument"
    steered = get_simulator("retail").world(world.initial_state, ["inject_error: TIMEOUT"])
    answers = _answers(world, [(unknown, {"status": "error", "error": "ORDER_NOT_FOUND"})])
    assert json.loads(baseline_response("rule_status", world, unknown, world.initial_state, answers))["error"] \
        == "ORDER_NOT_FOUND"  # the commonest error code of the tool for that reason in training
    injected = baseline_response("rule_status", steered, Call("get_order", {"order_id": known}),
                                 world.initial_state, answers)
    assert json.loads(injected)["status"] == "error" and json.loads(injected)["error"] == "TIMEOUT"


def test_the_status_rule_knows_an_id_the_history_made():
    world = get_simulator("retail").world()
    made = Call("get_order", {"order_id": "ORD-55555"})
    assert status_reason(world, made, world.initial_state) == "unknown_id"
    earlier = HistoryStep(call=Call("place_order", {}), response={"order_id": "ORD-55555", "status": "ok"})
    assert status_reason(world, made, world.initial_state, [earlier]) == "none"


def test_echo_plus_gives_what_the_prompt_holds_a_repeated_lookup_a_listing_and_the_newest_record():
    """echo+ can win where the prompt shows the answer: it must score what a lookup of the five parts scores."""
    sim = get_simulator("retail")
    world = sim.world()
    state, answers = world.initial_state, TrainingAnswers()
    order = state["orders"][0]
    get = Call("get_order", {"order_id": order["id"]})
    _, looked_up = sim.step(state, get)
    history = [HistoryStep(call=get, response=looked_up)]
    assert json.loads(baseline_response("echo_plus", world, get, state, answers, history)) == looked_up
    listing = Call("list_orders", {})
    _, truth = sim.step(state, listing)
    listed = json.loads(baseline_response("echo_plus", world, listing, state, answers))
    assert [o["order_id"] for o in listed["orders"]] == [o["order_id"] for o in truth["orders"]]
    assert listed["orders"][0] == truth["orders"][0]
    assert json.loads(baseline_response("echo", world, listing, state, answers))["orders"] == []
    # after a write, the record as the newest answer shows it (not the initial state) fills the lookup
    cancel = Call("cancel_order", {"order_id": order["id"]})
    changed = {"order_id": order["id"], "order_status": "cancelled", "status": "ok", "error": "", "message": ""}
    after = json.loads(baseline_response("echo_plus", world, get, state, answers,
                                         [*history, HistoryStep(call=cancel, response=changed)]))
    assert after["order_status"] == "cancelled" and after["total_cents"] == order["total_cents"]


def test_nearest_train_answers_with_the_training_response_sharing_the_most_arguments():
    case = _case({"status": "ok"})
    near = Call("refund_order", {**case.call.arguments, "amount_cents": 5})
    far = Call("refund_order", {"order_id": "ORD-1", "amount_cents": 5})
    answers = _answers(case.world, [(far, {"status": "far"}), (near, {"status": "near"})])
    assert json.loads(nearest_response(case.call, answers)) == {"status": "near"}


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
    assert set(figures) == {"rows", "model", "grounding", "raw", "no_outcome_head", "no_copy_head", "steered", "ar",
                            "flip", "free", "trivial", "prompt_use", "diversity"}
    assert figures["grounding"] == "none"
    for name in ("raw", "no_outcome_head", "no_copy_head", "steered", "ar"):
        assert set(figures[name]) == RATE_KEYS and figures[name]["cases"] == 2
    baselines = {"neutral_error", "neutral_ok", "echo", "rule_status", "echo_plus", "echo_plus_plus", "nearest_train"}
    assert set(figures["flip"]) == {"raw", "steered", "ar"} | baselines and set(figures["trivial"]) == baselines
    for name in baselines:
        assert set(figures["trivial"][name]) == RATE_KEYS and figures["trivial"][name]["cases"] == 2
    assert set(figures["prompt_use"]) == {"own_nll", "swapped_nll", "denoiser_own_nll", "denoiser_swapped_nll"}
    assert figures["raw"]["json_valid"] == 1.0  # the skeleton canvas always yields parseable JSON
    assert set(figures["free"]) == {"cases", "json_valid", "schema_valid", "same_keys", "from_history",
                                    "from_training", "from_sketch", "canvas_json_valid", "canvas_same_keys"}
    assert figures["free"]["canvas_json_valid"] == 1.0  # the free canvas's JSON grammar
    assert set(figures["diversity"]) == {"mdlm", "ar"}
    assert 0.0 <= figures["diversity"]["mdlm"]["values_distinct_2"] <= 1.0
    assert not report.errors
    text = report.render()
    assert "field: copy_call" in text and "always error" in text and "nearest training answer" in text
    folder = tmp_path / "model"  # --write: quality.json beside the weights, the card shows raw and steered
    shutil.copytree(resolve_model_path(DEFAULT_MODEL), folder)
    write_quality(report, folder)
    quality = json.loads((folder / "quality.json").read_text())
    assert quality["figures"] == figures and quality["settings"]["grounding"] == "none"
    card = (folder / "README.md").read_text()
    assert ("| measure | MDLM raw | no outcome head | no copy head | MDLM steered | AR | echo | status rule | "
            "echo+ | echo++ | nearest training answer | always error | always ok |") in card
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


def test_each_baseline_is_one_entry_whose_label_heads_its_column_everywhere():
    """A baseline's name keys its figures and its label heads its column in the report, the card and the README
    table (issue 38: the labels were kept in three places and a missing one was a KeyError at report time)."""
    import sys

    from wmstudio.locations import REPO_ROOT
    from wmstudio.train.world_model.baselines import BASELINES, BY_NAME
    from wmstudio.train.world_model.eval_report import COLUMN_NAMES, EvalReport

    sys.path.insert(0, str(REPO_ROOT / "docs"))
    try:
        import quality_table
    finally:
        sys.path.remove(str(REPO_ROOT / "docs"))
    assert len(BY_NAME) == len(BASELINES) and all(COLUMN_NAMES[b.name] == b.label for b in BASELINES)
    figures = {b.name: {"copy": 0.5} for b in BASELINES}
    assert [heading for heading, _ in quality_table.columns({"figures": {"raw": {"x": 1}, "trivial": figures}})] \
        == ["MDLM", *(b.label for b in BASELINES)]
    summary = EvalReport(settings={"rows": 1}).summary()
    assert all(f"`{b.label}` ({b.description})" in summary for b in BASELINES)


def test_echo_plus_plus_has_every_helper_the_model_has_the_episode_state_a_page_and_a_new_id():
    from wmstudio.locations import DEMO_WORLDS_DIR
    from wmstudio.world.spec import load_world

    world = load_world(DEMO_WORLDS_DIR / "retail.json")
    refund = HistoryStep(Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 3499}),
                         {"order_id": "ORD-22930", "refund_id": "RF-70001", "refund_processed": True,
                          "amount_refunded_cents": 3499, "total_refunded_cents": 3499, "order_total_cents": 37896,
                          "error": "", "message": "", "status": "ok"})

    def answer(name, call):
        return json.loads(baseline_response(name, world, call, world.initial_state, TrainingAnswers(), [refund]))

    read = Call("get_order", {"order_id": "ORD-22930"})
    assert answer("echo_plus", read)["refunded_cents"] == 0  # the initial record, the write not applied
    plus_plus = answer("echo_plus_plus", read)
    assert plus_plus["refunded_cents"] == 3499 and len(plus_plus["items"]) == 3
    assert answer("echo_plus_plus", Call("list_orders", {"status": "delivered"}))["total"] == 2
    again = answer("echo_plus_plus", Call("refund_order", {"order_id": "ORD-22930", "amount_cents": 100}))
    assert again["refund_id"] == "RF-70002"
