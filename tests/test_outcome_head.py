"""The outcome head: the facts it reads, that it learns outcomes the simulators give, and that generation pins its
choice (and steps aside for the user's pins, for tools it never saw, or when switched off)."""

import json
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate, prepare_canvas
from wmstudio.model.heads.outcome_head import (
    CONFIG_FILE,
    HEAD_FILE,
    Outcome,
    OutcomeHead,
    load_outcome_head,
    outcome_of,
)
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.world_model.examples import read_corpus_split, request_from_meta
from wmstudio.train.world_model.outcome_fitting import fit_outcome_head
from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.heads.outcome_features import outcome_features
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.cel import Rule
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor

pytestmark = pytest.mark.usefixtures("one_thread")


def _retail(orders: list[dict], today: str = "2025-06-30"):
    world = get_simulator("retail").world()
    return replace(world, initial_state={**world.initial_state, "today": today, "orders": orders})


ORDER = {"id": "ORD-500", "status": "delivered", "placed_on": "2025-05-01", "delivered_on": "2025-05-10",
         "total_cents": 5000, "refunded_cents": 1000, "items": []}


def test_the_facts_name_the_lookup_the_record_the_dates_age_and_the_numbers_comparisons():
    world = _retail([ORDER])
    found = set(outcome_features(world, Call("refund_order", {"order_id": "ORD-500", "amount_cents": 4500})))
    assert "arg:order_id:found" in found and "arg:order_id:record.status=delivered" in found
    assert "arg:order_id:record.delivered_on:age<=30" not in found  # 51 days before "today"
    assert "arg:order_id:record.delivered_on:age<=60" in found
    assert "arg:order_id:record:amount_cents>total_cents-refunded_cents" in found  # 4500 > 5000 - 1000
    missing = set(outcome_features(world, Call("refund_order", {"order_id": "ORD-9", "amount_cents": 100})))
    assert "arg:order_id:missing" in missing and not any("record" in fact for fact in missing)
    assert "missing_arg:order_id" in set(outcome_features(world, Call("refund_order", {})))
    steered = replace(world, directives=["The store is rate limited today"])
    assert "directive:limited" in outcome_features(steered, Call("get_order", {"order_id": "ORD-500"}))



def test_a_date_a_page_token_and_a_name_are_not_ids_a_lookup_misses():
    """A date the call asks for, an earlier page's token and a record's name hold digits, but no record is keyed by
    them: read as ids, each looked like an unknown one and the head answered an outage to calls that succeed."""
    world = _retail([{**ORDER, "name": "Granite Bay 8"}])
    dated = set(outcome_features(world, Call("reschedule", {"order_id": "ORD-500", "deliver_on": "2025-07-10"})))
    assert "arg:deliver_on:missing" not in dated
    assert {"arg:deliver_on:date:future", "arg:deliver_on:date:in<=14"} <= dated and "arg:deliver_on:date:in<=7" \
        not in dated  # 10 days after the state's today
    paged = set(outcome_features(world, Call("list_orders", {"page_token": "Mzo0NDEzNmZhMw"})))
    assert "arg:page_token:cursor" in paged and "arg:page_token:missing" not in paged
    taken = set(outcome_features(world, Call("create_order", {"name": "Granite Bay 8"})))
    free = set(outcome_features(world, Call("create_order", {"name": "Granite Bay 9"})))
    assert "arg:name:held" in taken and "arg:name:unheld" in free  # a name taken, for a create's duplicate
    from wmstudio.model.heads.outcome_head import generic_facts

    assert {"arg:date:future", "arg:cursor", "create&arg:held"} <= \
        set(generic_facts([*dated, *paged, *taken], "create_order"))


def test_a_rule_that_refuses_an_ok_on_the_state_shown_is_a_fact_whatever_other_records_the_history_wrote():
    world = _retail([ORDER, {**ORDER, "id": "ORD-501", "status": "pending"}])
    cancel = Call("cancel_order", {"order_id": "ORD-500"})  # delivered: the rule allows only pending or processing
    assert "rule:refuses_ok" in outcome_features(world, cancel)
    assert "rule:refuses_ok" not in outcome_features(world, Call("cancel_order", {"order_id": "ORD-501"}))
    # a generated world's rule stops judging the state once any write succeeded; the fact reads the record's own only
    lenient = replace(world, rules=[Rule("Only pending orders can be cancelled", 'call.name != "cancel_order" ? true : '
                                         'response.status == "error" || history.exists(h, h.response.status == "ok") || '
                                         'state.orders.exists(o, o.id == response.order_id && o.status == "pending")')])
    other = HistoryStep(Call("cancel_order", {"order_id": "ORD-501"}), {"status": "ok", "cancelled": True})
    assert "rule:refuses_ok" in outcome_features(lenient, cancel, [other])  # a write to another order: still refused
    own = HistoryStep(Call("refund_order", {"order_id": "ORD-500"}), {"status": "ok"})
    assert "rule:refuses_ok" not in outcome_features(lenient, cancel, [own])  # the order itself may have changed
    pending = Call("cancel_order", {"order_id": "ORD-501"})
    shipped = HistoryStep(Call("get_order", {"order_id": "ORD-501"}),
                          {"order_id": "ORD-501", "order_status": "shipped", "status": "ok"})
    assert "rule:refuses_ok_as_answered" not in outcome_features(lenient, pending)
    assert "rule:refuses_ok_as_answered" in outcome_features(lenient, pending, [shipped])  # as the answer left it

def _rows(folder, split):
    for row in read_corpus_split(folder, split):
        request = request_from_meta(row.meta, row.where)
        yield request.world, request.call, request.history, json.loads(row.response_text), request.grounding


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    train, test = tmp_path_factory.mktemp("train"), tmp_path_factory.mktemp("test")
    write_corpus(train, rows=1500, seed=11)
    write_corpus(test, rows=1500, seed=12)
    return train, test


@pytest.fixture(scope="module")
def head(corpora):
    fitted, stats = OutcomeHead.fit(list(_rows(corpora[0], "train")))
    assert stats["rows"] > 1000 and stats["tools"] >= 20
    return fitted


def test_the_head_learns_the_simulators_outcomes_far_above_the_tools_majority(corpora, head):
    train, test = corpora
    majority = defaultdict(Counter)
    for _, call, _, response, _ in _rows(train, "train"):
        majority[call.name][outcome_of(response)] += 1
    right = status = baseline = total = 0
    for world, call, history, response, _ in _rows(test, "test"):  # grounding none: the facts the prompt shows
        truth = outcome_of(response)
        if truth is None:
            continue
        choice = head.predict(world, call, history)
        total += 1
        right += choice is not None and (choice.status, choice.error) == truth
        status += choice is not None and choice.status == truth[0]
        baseline += majority[call.name].most_common(1)[0][0][0] == truth[0]
    assert total > 100
    assert status / total >= baseline / total + 0.15, (status, baseline, total)
    assert right / total >= 0.75, (right, total)


def test_a_saved_head_loads_back_with_the_same_choices_and_abstains_on_tools_it_never_saw(head, tmp_path):
    head.save(tmp_path)
    loaded = load_outcome_head(tmp_path)
    world = _retail([ORDER])
    for call in (Call("refund_order", {"order_id": "ORD-500", "amount_cents": 100}),
                 Call("cancel_order", {"order_id": "ORD-404"})):
        assert loaded.predict(world, call) == head.predict(world, call)
    assert loaded.predict(world, Call("teleport", {})) is None
    refund = Call("refund_order", {"order_id": "ORD-500", "amount_cents": 100})
    assert loaded.predict(world, refund, schema=world.tool("refund_order").response) is not None
    elsewhere = {"type": "object", "properties": {"status": {"type": "string"}, "refund": {"type": "object"}}}
    generic = loaded.predict(world, refund, schema=elsewhere)  # another world's refund_order: not this one, so the
    assert generic.status in ("ok", "error") and generic.error is None  # generic scorer's status and no code
    assert generic.values(elsewhere) == {"status": generic.status}
    assert load_outcome_head(tmp_path / "nowhere") is None


def test_on_tools_it_never_saw_the_generic_scorer_reads_tool_free_facts(head):
    world = _retail([ORDER])
    renamed = world.tool("get_order")
    unseen = replace(world, tools=[*world.tools, replace(renamed, name="fetch_purchase")])
    missing = head.distribution(unseen, Call("fetch_purchase", {"order_id": "ORD-404"}))
    found = head.distribution(unseen, Call("fetch_purchase", {"order_id": "ORD-500"}))
    assert all(o.error is None for o in missing + found)
    assert missing[0].status == "error" and found[0].status == "ok"  # the lookup, whatever the tool is called


def test_an_outcome_holds_only_what_the_schema_admits():
    schema = {"type": "object", "properties": {"status": {"type": "string", "enum": ["ok", "error"]},
                                               "error": {"type": "string"}}}
    assert Outcome("error", "NOT_FOUND", 0.9).values(schema) == {"status": "error", "error": "NOT_FOUND"}
    assert Outcome("error", "NOT_FOUND", 0.9).anchors(schema) == [Anchor("status", "error"),
                                                                 Anchor("error", "NOT_FOUND")]
    closed = {**schema, "properties": {**schema["properties"], "error": {"type": "string", "enum": ["", "X"]}}}
    assert Outcome("error", "NOT_FOUND", 0.9).values(closed) == {"status": "error"}
    assert Outcome("error", "", 0.9).values({"type": "object", "properties": {"ok": {"type": "boolean"}}}) == {}


@pytest.fixture(scope="module")
def model_with_head(tiny_model, demo_tokenizer, corpora, tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    tiny_model(demo_tokenizer, folder)
    assert fit_outcome_head(read_corpus_split(corpora[0], "train"), folder) is not None
    return load_backend(str(folder))


def test_generation_pins_the_heads_choice_and_the_users_pins_win(model_with_head):
    world = _retail([ORDER])
    call = Call("cancel_order", {"order_id": "ORD-404"})  # not in the state
    generation = generate(model_with_head, world, call)
    choice = generation.outcome
    assert choice is not None and choice.status == "error" and choice.error
    response = json.loads(generation.samples[0].response)
    assert (response["status"], response["error"]) == (choice.status, choice.error)
    assert generation.anchors == [] and generation.to_json()["outcome"]["status"] == "error"
    pinned = generate(model_with_head, world, call, [Anchor("status", "ok")])  # a pin narrows the head's choice
    assert pinned.outcome is not None and pinned.outcome.status == "ok"
    assert json.loads(pinned.samples[0].response)["status"] == "ok"
    coded = generate(model_with_head, world, call, [Anchor("status", "error"), Anchor("error", "MY_CODE")])
    assert coded.outcome is None and json.loads(coded.samples[0].response)["error"] == "MY_CODE"  # the user's whole
    alone = generate(model_with_head, world, call, settings=SamplerSettings(outcome_head=False))
    assert alone.outcome is None and len(alone.canvas) == len(generation.canvas)  # written into its own slots
    assert generate(model_with_head, world, Call("cancel_order", {"order_id": "ORD-404"}),
                    settings=SamplerSettings(free=True, free_length=24)).outcome is None


def test_at_a_temperature_each_sample_draws_its_outcome_and_is_denoised_under_it(model_with_head, corpora):
    head = model_with_head.outcome_head
    rows = list(_rows(corpora[1], "test"))
    def unsure_and_fits(world, call, history) -> bool:  # each likely outcome fits the tiny tokenizer's slots whole
        ranked = head.distribution(world, call, history) or [Outcome("", "", 1.0)]
        if not 0.2 < ranked[0].probability < 0.7:
            return False
        schema = world.tool(call.name).response
        canvas = prepare_canvas(model_with_head, world, call, ())
        return all(len(canvas.with_values(o.values(schema)).spans) == len(canvas.spans) - len(o.values(schema))
                   for o in ranked if o.probability > 0.01)

    unsure = next((world, call, history) for world, call, history, _, _ in rows
                  if unsure_and_fits(world, call, history))
    world, call, history = unsure
    greedy = generate(model_with_head, world, call, (), history, SamplerSettings(samples=3, rule_outcomes=False))
    predicted = head.predict(world, call, history)
    assert {(s.outcome.status, s.outcome.error, s.outcome.probability) for s in greedy.samples} == \
        {(predicted.status, predicted.error, predicted.probability)}  # the message is written to it at generation
    for seed in range(20):
        drawn = generate(model_with_head, world, call, (), history,  # the head's own draws (rules: the test below)
                         SamplerSettings(samples=6, temperature=1.0, seed=seed, rule_outcomes=False))
        if len({s.outcome for s in drawn.samples}) > 1:
            break
    assert len({s.outcome for s in drawn.samples}) > 1, "20 seeds never drew two outcomes from an unsure head"
    assert drawn.outcome_summary().startswith("drew per sample")
    for k, sample in enumerate(drawn.samples):
        response = json.loads(sample.response)
        assert (response["status"], response["error"]) == (sample.outcome.status, sample.outcome.error)
        committed = sorted(p for frame in drawn.frames for p in frame.unmasked[k])
        assert len(committed) == len(set(committed))  # each slot committed once, in merged frames
        if sample.outcome == drawn.samples[0].outcome:  # the view's canvas is the first group's: all its slots
            assert committed == drawn.canvas.masked_positions
    assert drawn.frames[-1].done and sum(f.done for f in drawn.frames) == 1


def test_fit_outcome_saves_a_head_beside_a_model_and_refuses_a_corpus_without_worlds(
        tiny_model, demo_tokenizer, corpora, tmp_path):
    folder = tmp_path / "model"
    tiny_model(demo_tokenizer, folder)
    result = CliRunner().invoke(app, ["fit-outcome", "--corpus", str(corpora[0]), "--model", str(folder),
                                      "--rows", "200"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] > 100 and (folder / HEAD_FILE).exists() and (folder / CONFIG_FILE).exists()
    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "train.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                               {"role": "assistant", "content": "{}"}]}) + "\n")
    refused = CliRunner().invoke(app, ["fit-outcome", "--corpus", str(chat), "--model", str(folder)])
    assert refused.exit_code != 0 and "meta" in refused.output and "Traceback" not in refused.output


def test_tool_free_facts_know_a_lookup_from_a_create_and_a_token_an_earlier_response_gave():
    from wmstudio.model.heads.outcome_head import generic_facts, tool_family

    assert [tool_family(n) for n in ("getOrder", "fetch_purchase", "createInvoice", "cancel-booking", "teleport")] \
        == ["read", "read", "create", "delete", "action"]
    facts = ["bias", "arg:order_id:missing", "arg:session_token:missing", "answered:session_token:login:ok"]
    general = generic_facts(facts, "fetch_purchase")
    assert "arg:missing" in general and "read&arg:missing" in general  # the id no record holds, on a lookup
    assert "arg:missing_answered" in general  # the token is in no state record, but the login answered it
    assert "read&bias" not in general  # only argument facts are crossed with the tool's family


def test_an_error_the_head_chose_without_a_code_gets_the_code_whose_stated_cause_holds():
    """A tool the head never saw gets ok/error from the generic scorer and no code; the code is then the one the
    world's rules state a cause for here (a processing order cannot be refunded: ORDER_NOT_DELIVERED), else the
    world's outage code, never one the denoiser makes up. Ok outcomes and coded errors are left as they are."""
    from wmstudio.model.heads.outcome_head import with_stated_codes
    from wmstudio.world.checks.error_codes import outage_code

    world = get_simulator("retail").world()
    schema = world.tool("refund_order").response
    processing = next(o for o in world.initial_state["orders"] if o["status"] == "processing")
    ranked = [Outcome("error", None, 0.6), Outcome("ok", None, 0.3), Outcome("error", "TIMEOUT", 0.1)]
    refund = Call("refund_order", {"order_id": processing["id"], "amount_cents": 100})
    coded = with_stated_codes(ranked, world, refund, (), schema)
    assert [(o.status, o.error) for o in coded] == [("error", "ORDER_NOT_DELIVERED"), ("ok", None),
                                                     ("error", "TIMEOUT")]
    lookup = Call("get_order", {"order_id": processing["id"]})  # no stated cause holds for a lookup of it
    assert with_stated_codes(ranked, world, lookup, (), world.tool("get_order").response)[0].error == \
        outage_code(world) != ""


def test_an_outcome_a_rule_refuses_whatever_the_other_fields_hold_gives_way_to_the_next():
    """Before anything else is written, each ranked outcome is tried against the world's rules with only its status
    and code in the response: an ok cancel of a delivered order breaks the cancel rule whatever the order's fields
    will say, so the error ranked next is chosen; on a pending order the ok stands. A rule that reads a field not
    written yet decides nothing; nothing left keeps the head's order."""
    from wmstudio.model.heads.outcome_head import within_rules
    from wmstudio.world.checks.decided import refusing_rule

    world = get_simulator("retail").world()
    schema = world.tool("cancel_order").response
    orders = {o["status"]: o["id"] for o in world.initial_state["orders"]}
    ranked = [Outcome("ok", "", 0.7), Outcome("error", None, 0.3)]
    delivered = Call("cancel_order", {"order_id": orders["delivered"]})
    named = {"order_id": orders["delivered"]}  # the echoed identifier, written whatever the outcome
    assert refusing_rule(world, delivered, {**named, "status": "ok", "error": ""}) is not None
    assert refusing_rule(world, delivered, {"status": "ok", "error": ""}) is None  # it reads the order named
    assert refusing_rule(world, delivered, {**named, "status": "error"}) is None
    assert [(o.status, o.error) for o in within_rules(ranked, world, delivered, (), schema, named)] == \
        [("error", "ALREADY_DELIVERED")]  # the code whose stated cause holds
    pending = Call("cancel_order", {"order_id": orders["pending"]})
    assert within_rules(ranked, world, pending, (), schema, {"order_id": orders["pending"]}) == ranked
    assert within_rules(ranked[:1], world, delivered, (), schema, named) == ranked[:1]  # nothing left: as it was
