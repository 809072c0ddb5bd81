"""Synthetic worlds (issue 33): the generator is deterministic, every world it writes loads and validates, and the
generic simulator's answers fit the world's own response schemas and rules on many random calls; preconditions answer
their named codes; paging never repeats or skips a record."""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import re

import pytest
from jsonschema import Draft202012Validator

from wmstudio.problems import InvalidInput
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import ORACLE_QUERY_LABEL, render
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, load_world
from wmstudio.world.synth import synthetic_ref
from wmstudio.world.synth.agent import create_args, live_token, login_call
from wmstudio.world.synth.naming import parse_stamp, stamp
from wmstudio.world.synth.records import each, find
from wmstudio.world.synth.worlds import write_worlds

DIRECTIVES = [(), (), (), ("inject_error: UPSTREAM_TIMEOUT",), ("empty_result",), ("page_size: 2",), ("rate_limit",),
              ("auth_failure",), ("partial_success",), ("verbose",), ("partial_success", "verbose")]
DEMO_WORDS = re.compile(r"\b(order|orders|booking|bookings|flight|flights|account|accounts|charge|charges|refund)\b",
                        re.I)


def sim_of(index: int, seed: int = 0):
    return get_simulator(synthetic_ref(seed, index))


def ready(sim, state):
    """The state after signing in (worlds with sessions) and the session arguments a call then carries."""
    bp = sim.blueprint
    if bp.login is None:
        return state, {}
    state, response = sim.step(state, login_call(bp, state))
    assert response["status"] == "ok", response
    return state, {bp.login["session"]: live_token(bp, state)}


def plans(family: str, count: int = 60):
    """(simulator, plan) for every tool of `family` among the first `count` worlds of seed 0."""
    return [(sim_of(i), plan) for i in range(count) for plan in sim_of(i).blueprint.tools if plan.family == family]


def test_same_seed_writes_the_same_files_and_another_seed_other_worlds(tmp_path):
    first = write_worlds(tmp_path / "a", count=4, seed=7)
    write_worlds(tmp_path / "b", count=4, seed=7)
    write_worlds(tmp_path / "c", count=4, seed=8)
    assert first["worlds"] == 4 and first["tools"] >= 16 and first["rules"] >= 16
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(first["files"]) and len(names) == 4
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    texts = {p.read_text() for p in (tmp_path / "a").iterdir()}
    assert texts.isdisjoint(p.read_text() for p in (tmp_path / "c").iterdir())


def test_every_generated_world_loads_validates_and_names_its_simulator(tmp_path):
    stats = write_worlds(tmp_path, count=30, seed=1)
    for index, name in enumerate(stats["files"]):
        world = load_world(tmp_path / name)
        sim = get_simulator(world.simulator)
        assert world.simulator == synthetic_ref(1, index) and world == sim.world()
        assert world.task and world.rules and 4 <= len(world.tools) <= 16
        for tool in world.tools:
            Draft202012Validator.check_schema(tool.parameters)
            Draft202012Validator.check_schema(tool.response)
            assert list(tool.response["properties"])[-3:] == ["error", "message", "status"], tool.name
        assert not DEMO_WORDS.search(world.dumps()), DEMO_WORDS.search(world.dumps())


def test_worlds_vary_in_style_ids_families_and_arithmetic():
    blueprints = [sim_of(i).blueprint for i in range(80)]
    families = {t.family for bp in blueprints for t in bp.tools}
    assert families == {"get", "search", "create", "update", "delete", "action", "transfer", "batch", "login"}
    ids = {(e.ids.kind, e.ids.length) for bp in blueprints for e in bp.entities.values()}
    assert ("digits", 13) in ids and any(length <= 5 for _, length in ids) and len(ids) >= 10
    assert {bp.style.case for bp in blueprints} == {"snake", "camel"}
    formulas = {(t.formula.family, t.formula.k) for bp in blueprints for t in bp.tools if t.formula}
    assert len({family for family, _ in formulas}) == 5 and len(formulas) >= 12
    assert len({t.errors.get("not_found") for bp in blueprints for t in bp.tools} - {None}) >= 30
    assert {e.storage for bp in blueprints for e in bp.entities.values()} == {"list", "map"}


def test_random_episodes_fit_the_schemas_and_rules_and_never_mutate_state():
    outcomes = set()
    for index in range(16):
        sim = sim_of(index, seed=2)
        validators = {t.name: Draft202012Validator(t.response) for t in sim.tools()}
        rng = random.Random(index)
        for _ in range(2):
            initial = sim.initial_state(rng)
            world, state, history = sim.world(initial), initial, []
            for _ in range(rng.randrange(3, 7)):
                call = sim.agent_call(state, rng, invalid=rng.random() < 0.3)
                directives = rng.choice(DIRECTIVES)
                before = copy.deepcopy(state)
                new_state, response = sim.step(state, call, directives)
                assert state == before, call
                assert not [e.message for e in validators[call.name].iter_errors(response)], (call, response)
                steered = sim.world(initial, directives)  # the world carries its steering, as a corpus row's does
                report = check_step(steered, call, json.dumps(response), history=history)
                assert report.ok, (world.name, call, directives, response, report.rule_violations, report.invented)
                outcomes.add(response["status"])
                history.append(HistoryStep(call=call, response=response))
                state = new_state
    assert outcomes == {"ok", "error", "partial"}


def test_unknown_tools_and_bad_arguments_get_the_worlds_own_codes():
    sim = sim_of(3)
    bp = sim.blueprint
    state, auth = ready(sim, sim.initial_state(random.Random(1)))
    _, response = sim.step(state, Call("teleport_everything", {}))
    assert response["error"] == bp.codes["unknown_tool"] and "teleport_everything" in response["message"]
    plan = next(t for t in bp.tools if t.family == "get")
    _, response = sim.step(state, Call(plan.name, auth))
    assert response["error"] == bp.codes["missing"] and plan.params["id"] in response["message"]
    _, response = sim.step(state, Call(plan.name, {**auth, plan.params["id"]: 12}))
    assert response["error"] == bp.codes["invalid"]
    rule = sim.world().rules[0].text
    assert bp.codes["missing"] in rule and bp.codes["invalid"] in rule and bp.codes["unknown_tool"] in rule


def _action_call(sim, plan, state, auth, record_id, record, now):
    """A call of action `plan` on `record` that meets every precondition (amount 1, a time inside the window)."""
    args = {**auth, plan.params["id"]: record_id}
    entity = sim.blueprint.entities[plan.entity]
    for pre in plan.preconditions:
        if pre.kind == "owner":
            args[plan.params["owner"]] = record[entity.owner]
        elif pre.kind == "window":
            args[plan.params["when"]] = stamp(now + dt.timedelta(seconds=pre.seconds // 2))
        elif pre.kind == "quantity":
            args[plan.params["amount"]] = 1
    return args


@pytest.mark.parametrize("kind", ["status", "quantity", "window", "owner"])
def test_each_action_precondition_answers_its_named_code_and_holding_it_succeeds(kind):
    checked = 0
    for sim, plan in plans("action"):
        pre = next((p for p in plan.preconditions if p.kind == kind), None)
        if pre is None:
            continue
        bp, entity = sim.blueprint, sim.blueprint.entities[plan.entity]
        state, auth = ready(sim, sim.initial_state(random.Random(checked)))
        now = parse_stamp(state[bp.now_key])

        def meets(r):
            return (plan.transition is None or r[entity.status] in plan.transition[0]) and \
                (not entity.quantity or "amount" not in plan.params or r[entity.quantity] >= plan.usage)

        fit = [(i, r) for i, r in each(state, entity) if meets(r)]
        if not fit:
            continue
        record_id, record = fit[0]
        good = _action_call(sim, plan, state, auth, record_id, record, now)
        bad = dict(good)
        if kind == "status":
            other = [(i, r) for i, r in each(state, entity) if r[entity.status] not in pre.statuses
                     and ("amount" not in plan.params or r[entity.quantity] >= plan.usage)]
            if not other:
                continue
            bad = _action_call(sim, plan, state, auth, *other[0], now)
        elif kind == "quantity":
            bad[plan.params["amount"]] = record[entity.quantity] // plan.usage + 1
        elif kind == "window":
            bad[plan.params["when"]] = stamp(now + dt.timedelta(seconds=pre.seconds + 3600))
        else:
            bad[plan.params["owner"]] = bp.entities[bp.actor].ids.make(random.Random(5))
        _, refused = sim.step(state, Call(plan.name, bad))
        after, accepted = sim.step(state, Call(plan.name, good))
        assert refused["status"] == "error" and refused["error"] == pre.code, (plan.name, refused)
        assert accepted["status"] == "ok", (plan.name, accepted)
        assert after != state and pre.code in plan.description
        checked += 1
    assert checked >= 3, f"too few worlds with a {kind} precondition"


def test_create_update_delete_batch_and_login_refusals_have_their_codes():
    seen = set()
    for sim, plan in plans("create") + plans("update") + plans("delete") + plans("batch") + plans("login"):
        bp, entity = sim.blueprint, sim.blueprint.entities.get(plan.entity)
        state, auth = ready(sim, sim.initial_state(random.Random(3)))
        if plan.family == "create":
            _, existing = next(iter(each(state, entity)))
            args = {**auth, **create_args(bp, plan, state, random.Random(1), True),
                    plan.params["label"]: existing[entity.label]}
            _, response = sim.step(state, Call(plan.name, args))
            assert response["error"] == plan.errors["duplicate"] and response[plan.out["id"]] == ""
            after, response = sim.step(state, Call(plan.name, {**args, plan.params["label"]: "Brand New Name 7"}))
            assert response["status"] == "ok" and find(after, entity, response[plan.out["id"]]) is not None
            seen.add("duplicate")
        elif plan.family == "update":
            record_id, _ = next(iter(each(state, entity)))
            _, response = sim.step(state, Call(plan.name, {**auth, plan.params["id"]: record_id}))
            assert response["error"] == plan.errors["empty"]
            seen.add("empty")
        elif plan.family == "batch":
            call = Call(plan.name, {**auth, plan.params["ids"]: ["nope-1", "nope-2"],
                                    plan.params["value"]: entity.field(plan.batch_field).values[0]})
            _, response = sim.step(state, call)
            assert response["error"] == plan.errors["none"] and response[plan.out["count"]] == 0
            seen.add("batch")
        elif plan.family == "delete":
            owner = {plan.params["owner"]: "x"} if "owner" in plan.params else {}
            _, response = sim.step(state, Call(plan.name, {**auth, plan.params["id"]: "x" * 9, **owner}))
            assert response["error"] == plan.errors["not_found"]
            seen.add("delete")
        else:
            _, response = sim.step(state, login_call(bp, state, "not-the-password"))
            assert response["error"] == bp.codes["credentials"] and response[bp.login["token_key"]] == ""
            other = next(t for t in bp.tools if t.family != "login")
            stale = state[bp.login["sessions_key"]][0][bp.login["token_key"]]
            _, response = sim.step(state, Call(other.name, {bp.login["session"]: stale}))
            assert response["error"] == bp.codes["expired"]
            seen.add("login")
    assert seen == {"duplicate", "empty", "batch", "delete", "login"}


def test_paging_never_repeats_or_skips_a_record_and_tokens_belong_to_their_search():
    searched = 0
    for sim, plan in plans("search", 40):
        bp = sim.blueprint
        entity = bp.entities[plan.entity]
        rng = random.Random(searched)
        state, auth = ready(sim, sim.initial_state(rng, records=rng.randrange(20, 60)))
        for directives in ((), (f"page_size: {rng.randrange(1, 7)}",)):
            args = {**auth, plan.params["limit"]: rng.randrange(1, 9)}
            if plan.filters and rng.random() < 0.5:
                param, key = plan.filters[0]
                args[param] = next(iter(each(state, entity)))[1][key]
            expected = [i for i, r in each(state, entity)
                        if all(param not in args or r[key] == args[param] for param, key in plan.filters)]
            seen, call = [], Call(plan.name, args)
            for _ in range(100):
                _, response = sim.step(state, call, directives)
                assert response["status"] == "ok", response
                seen += [item[entity.id_key] for item in response[plan.out["items"]]]
                if not response[plan.out["more"]]:
                    assert response[plan.out["next"]] == ""
                    break
                call = Call(plan.name, {**args, plan.params["token"]: response[plan.out["next"]]})
            assert seen == expected, (plan.name, directives)
            if "total" in plan.out:
                assert response[plan.out["total"]] == len(expected)
        if plan.filters and len(expected) > 1:  # a token of this search is refused by another
            param, key = plan.filters[0]
            other = next((r[key] for _, r in each(state, entity) if r[key] != args.get(param)), None)
            first = sim.step(state, Call(plan.name, {**args, plan.params["limit"]: 1}))[1][plan.out["next"]]
            if other is not None and first:
                _, refused = sim.step(state, Call(plan.name, {**args, param: other, plan.params["token"]: first}))
                assert refused["error"] == plan.errors["token"]
        searched += 1
    assert searched >= 30


def test_oracle_grounding_shows_a_synthetic_worlds_retrieval_and_the_registry_lists_demo_worlds_only():
    sim = next(s for s, plan in plans("search", 20) if s.blueprint.login is None)
    plan = next(t for t in sim.blueprint.tools if t.family == "search")
    world = sim.world()
    prompt = render(world, Call(plan.name, {}), grounding="oracle").text
    assert ORACLE_QUERY_LABEL in prompt and '"matching":' in prompt
    assert sorted(SIMULATORS) == ["airline", "filesystem", "payments", "records", "retail"]
    assert SIMULATORS.get(world.simulator) is sim and SIMULATORS.get("synthetic:x") is None
    with pytest.raises(KeyError, match="synthetic:<seed>:<index>"):
        get_simulator("synthetic:1")


def test_write_worlds_names_bad_requests(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInput) as caught:
        write_worlds(tmp_path / "file", count=0, seed=-1)
    assert {p.path for p in caught.value.problems} == {"count", "seed", "out"}


def test_a_synthetic_world_opens_and_saves_in_the_world_tabs_fields_unchanged():
    from wmstudio.ui.world_tab import fields_to_world, world_to_fields

    world = sim_of(5).world()
    assert fields_to_world(*world_to_fields(world)) == world
