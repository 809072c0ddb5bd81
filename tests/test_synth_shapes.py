"""Generated worlds of the shapes a user's own world has ([wm-any-world]): `synthetic:<seed>:<index>:shapes` is the
base world with a lookup by a non-id field, a record with the records it owns, a union answer, a text answer and a
listing filtered by a nested field. The simulator answers each as a real API would and its answers pass the world's
own checks; the helpers find records by any field and choose a union's branch; the shipped model, which never saw
these shapes, answers them as the simulator does."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.checks.report import check_step
from wmstudio.world.checks.unfound import unfound_code
from wmstudio.world.corpus.rows import with_issuing_page, write_corpus
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import found_by_field, named_record_at
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world, parse_world
from wmstudio.world.synth.agent import MAKERS, login_call, with_session
from wmstudio.world.synth.handlers import field_at
from wmstudio.world.synth.records import each, find
from wmstudio.world.synth.registry import has_shapes, parse_ref, synthetic_ref
from wmstudio.world.tools.unions import answer_branch

SHAPES = ("find", "owned", "union", "text")


def shaped(index: int, seed: int = 7):
    return get_simulator(synthetic_ref(seed, index, shapes=True))


def initial_state(index: int):
    return shaped(index).initial_state(random.Random(index))


def signed_in(sim, state):
    """The state after the world's sign-in (where it has one) and the history that did it."""
    if sim.blueprint.login is None:
        return state, []
    call = login_call(sim.blueprint, state)
    state, said = sim.step(state, call)
    assert said["status"] == "ok"
    return state, [HistoryStep(call, json.dumps(said))]


def calls(family: str, worlds: range = range(6), fair: bool = True):
    """(simulator, plan, state, history, call) for one drawn call of each tool of `family` in each world: the
    state after the sign-in (where the world has one), which `history` holds."""
    found = []
    for index in worlds:
        sim = shaped(index)
        state, history = signed_in(sim, initial_state(index))
        rng = random.Random(f"{family}:{index}")
        for plan in sim.blueprint.tools:
            nested = plan.family == "search" and any("." in key for _, key in plan.filters)
            if plan.family == family or (family == "nested" and nested):
                arguments = MAKERS[plan.family](sim.blueprint, plan, state, rng, fair)
                call = Call(plan.name, with_session(sim.blueprint, plan, state, arguments))
                found.append((sim, plan, state, with_issuing_page(sim, state, call, history), call))
    return found


def test_a_shapes_world_is_its_base_world_with_a_tool_of_each_shape():
    for index in range(6):
        base, sim = get_simulator(synthetic_ref(7, index)), shaped(index)
        assert sim.name == f"synthetic:7:{index}:shapes" and has_shapes(sim.name) and not has_shapes(base.name)
        assert parse_ref(sim.name) == parse_ref(base.name) == (7, index)
        added = [plan for plan in sim.blueprint.tools if plan.name not in {p.name for p in base.blueprint.tools}]
        families = {plan.family for plan in added} | {"nested" for plan in added if plan.family == "search"}
        assert {"find", "union", "text", "nested"} <= families, families
        assert [p.name for p in base.blueprint.tools] == [p.name for p in sim.blueprint.tools][:len(base.blueprint.tools)]
    assert get_simulator("synthetic:7:0").world().name == shaped(0).world().name.removesuffix("-shapes")


def test_the_cli_writes_shapes_worlds_that_validate_and_name_their_simulator(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["worlds", "synth", "--count", "2", "--seed", "7", "--shapes", "--out",
                                 str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["shapes"] is True and len(stats["files"]) == 2
    path = tmp_path / "w" / stats["files"][1]
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0
    world = load_world(path)
    assert world.simulator == "synthetic:7:1:shapes" and world.name.endswith("-shapes")
    assert any(tool.response.get("type") == "string" for tool in world.tools)  # its text tool
    assert any("anyOf" in tool.response for tool in world.tools)  # its union


def test_every_answer_of_a_shapes_tool_passes_its_worlds_checks_and_fits_its_schema():
    seen = 0
    for family in (*SHAPES, "nested"):
        for fair in (True, False):
            for sim, plan, state, history, call in calls(family, fair=fair):
                _, answer = sim.step(state, call)
                world = sim.world(initial_state(sim.blueprint.index))
                report = check_step(world, call, json.dumps(answer), history=history)
                assert report.ok, (call, answer, report)
                seen += 1
    assert seen >= 40


def test_a_lookup_by_a_field_matches_it_in_any_case_and_a_phone_by_its_digits():
    for sim, plan, state, _, call in calls("find"):
        key = plan.params["by"]
        entity = sim.blueprint.entities[plan.entity]
        value = next(record[key] for _, record in each(state, entity) if isinstance(record.get(key), str))
        for typed in (value, value.upper(), value.lower()):
            _, answer = sim.step(state, Call(call.name, {**call.arguments, key: typed}))
            shown = answer.get(plan.nested, answer) if plan.nested else answer
            assert answer["status"] == "ok" and shown[key] == value  # the record as held
        _, answer = sim.step(state, Call(call.name, {**call.arguments, key: "Nobody At All"}))
        assert answer["status"] == "error" and answer["error"] == plan.errors["not_found"]


def test_the_owned_union_text_and_nested_tools_answer_from_the_state():
    for sim, plan, state, _, call in calls("owned"):
        _, answer = sim.step(state, call)
        if answer["status"] == "ok":
            child = sim.blueprint.entities[plan.params["child"]]
            owner_id = call.arguments[plan.params["id"]]
            assert [item[child.id_key] for item in answer[plan.out["items"]]] == \
                [cid for cid, record in each(state, child) if record[plan.params["ref"]] == owner_id]
    for sim, plan, state, _, call in calls("union"):
        _, answer = sim.step(state, call)
        key = plan.params["id"]
        kinds = [sim.blueprint.entities[name] for name in plan.out["kinds"].split(",")]
        holder = next((e for e in kinds if find(state, e, call.arguments[key]) is not None), None)
        if holder is None:
            assert set(answer) == {"error", "message", "status"} and answer["error"] == plan.errors["not_found"]
        else:
            assert answer[holder.id_key] == call.arguments[key] and answer["status"] == "ok"
    for sim, plan, state, _, call in calls("text"):
        _, answer = sim.step(state, call)
        entity = sim.blueprint.entities[plan.entity]
        record = find(state, entity, call.arguments[entity.id_key])
        assert answer == (str(record[plan.view[0]]) if record is not None else answer)
        assert record is not None or answer.startswith("Error: ")
    for sim, plan, state, _, call in calls("nested"):
        _, answer = sim.step(state, call)
        param, key = next((p, k) for p, k in plan.filters if "." in k)
        if param in call.arguments and answer["status"] == "ok":
            assert all(field_at(item, key) == call.arguments[param] for item in answer[plan.out["items"]])


def test_a_record_is_found_by_a_field_of_the_arguments_own_key_never_an_id_by_its_case():
    state = {"customers": [{"customer_id": "C1", "full_name": "Ana Ruiz", "phone": "555-123-2002"},
                           {"customer_id": "C2", "full_name": "Ben Ode", "phone": "555-987-1111"}],
             "pets": [{"pet_id": "P1", "full_name": "Ana Ruiz"}]}
    assert found_by_field(state, {"phone": "(555) 987 1111"})[1]["customer_id"] == "C2"
    assert found_by_field(state, {"fullName": "BEN ODE"})[1]["customer_id"] == "C2"
    assert found_by_field(state, {"full_name": "ana ruiz"}) is None  # a customer and a pet: it names neither
    assert found_by_field(state, {"customer_id": "c1"}) is None  # ids are exact
    session = Call("get", {"session_token": "tok_12345", "full_name": "ben ode"})
    with_sessions = {**state, "sessions": [{"token": "tok_12345"}]}
    assert named_record_at(with_sessions, session)[1]["customer_id"] == "C2"  # the name, not the session


def test_a_union_answer_takes_the_branch_of_the_record_and_a_lookup_of_nothing_the_error_branch():
    record = {"type": "object", "properties": {"bill_id": {"type": "string"}, "amount": {"type": "number"},
                                               "status": {"type": "string"}}}
    line = {"type": "object", "properties": {"line_id": {"type": "string"}, "phone": {"type": "string"},
                                             "status": {"type": "string"}}}
    error = {"type": "object", "properties": {"error": {"type": "string"}, "status": {"type": "string"}}}
    union = {"anyOf": [record, line, error]}
    assert answer_branch(union, {"line_id": "L1", "phone": "555", "status": "active"}) == line
    assert answer_branch(union, None) == error
    assert answer_branch(union, {"token": "tok_1"}) == error  # a session is no answer of this union
    assert answer_branch(record, None) is record


def test_a_lookup_of_nothing_the_world_holds_answers_the_code_its_tool_states():
    for index in range(6):
        for sim, plan, state, history, call in calls("find", range(index, index + 1)):
            world = sim.world(initial_state(index))
            key = plan.params["by"]
            lost = Call(call.name, {**call.arguments, key: "Nobody At All"})
            assert unfound_code(world, lost, history, state) == plan.errors["not_found"]
            assert unfound_code(world, call, history, state) is None  # a value the state holds


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def test_the_shipped_model_answers_the_shapes_it_never_saw_as_the_simulator_does(backend):
    right = total = 0
    for family in ("find", "owned", "union", "nested"):
        for fair in (True, False):
            for index in range(4):
                for sim, plan, state, history, call in calls(family, range(index, index + 1), fair):
                    _, truth = sim.step(state, call)
                    world = sim.world(initial_state(index))  # before the sign-in, which the history holds
                    answer = json.loads(generate(backend, world, call, history=history).samples[0].response)
                    skip = {"message", plan.out.get("next", "message")}  # the next-page token is the simulator's own
                    right += all(answer.get(key) == value for key, value in truth.items() if key not in skip)
                    total += 1
    assert total >= 20 and right >= 0.9 * total, (right, total)


def test_a_corpus_over_shapes_worlds_holds_their_calls_text_answers_included(tmp_path):
    stats = write_corpus(tmp_path / "c", rows=300, seed=3, synthetic=6, synthetic_seed=7, shapes=True)
    assert stats["synthetic_shapes"] is True
    rows = [json.loads(line) for split in ("train", "eval", "test")
            for line in (tmp_path / "c" / f"{split}.jsonl").read_text().splitlines()]
    synthetic = [row for row in rows if row["meta"]["world"].startswith("synthetic:")]
    assert synthetic and all(row["meta"]["world"].endswith(":shapes") for row in synthetic)
    texts = [row for row in synthetic if get_simulator(row["meta"]["world"]).blueprint.tool(
        row["meta"]["call"]["name"]).family == "text"]
    assert texts and all(not row["messages"][-1]["content"].startswith("{") for row in texts)


def test_a_record_with_more_records_than_the_context_holds_answers_its_first_ones():
    bills = {f"B{i:03d}": {"bill_id": f"B{i:03d}", "customer_id": "C1", "amount_due": 10 + i, "memo": f"Bill {i}"}
             for i in range(160)}
    bill = {"type": "object", "properties": {"bill_id": {"type": "string"}, "customer_id": {"type": "string"},
                                             "amount_due": {"type": "number"}, "memo": {"type": "string"}}}
    world = parse_world({"name": "billing", "initial_state": {
        "customers": [{"customer_id": "C1", "full_name": "Ana Ruiz"}], "bills": bills}, "tools": [{
            "name": "get_customer_with_bills", "description": "A customer with all of their bills.",
            "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
            "response": {"type": "object", "properties": {
                "customer_id": {"type": "string"}, "full_name": {"type": "string"},
                "bills": {"type": "array", "items": bill}}}}]})
    answer = json.loads(generate(load_backend(), world, Call("get_customer_with_bills", {"customer_id": "C1"}))
                        .samples[0].response)
    assert answer["full_name"] == "Ana Ruiz" and 10 <= len(answer["bills"]) < 160
    assert answer["bills"] == list(bills.values())[:len(answer["bills"])]  # the first ones, whole, in order
