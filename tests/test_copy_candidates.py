"""Computed copy candidates: the values a response derives from what the prompt shows, offered beside the shown ones."""

from __future__ import annotations

from wmstudio.world.heads.copy_candidates import MAX_DERIVED, copy_candidates
from wmstudio.world.heads.copy_sources import MAX_CANDIDATES
from wmstudio.world.prompt.render import Shown, render
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call


def _candidates(world_name: str, call: Call, state_change=None):
    simulator = get_simulator(world_name)
    world = simulator.world()
    if state_change is not None:
        state_change(world.initial_state)
    return world, simulator, copy_candidates(render(world, call).shown)


def test_a_booking_is_offered_the_chosen_fare_times_the_seats_asked_and_the_answer_is_among_them():
    world = get_simulator("airline").world()
    flight = next(f for f in world.initial_state["flights"] if f["seats_left"] >= 3)
    call = Call("book_flight", {"flight": flight["flight"], "fare": "flex", "passengers": 3})
    _, simulator, candidates = _candidates("airline", call)
    _, truth = simulator.step(world.initial_state, call)
    fare = next(c for c in candidates if c.path[-2:] == ("fares", "flex") and c.value == flight["fares"]["flex"]
                and not c.derived)
    assert fare.call_key and fare.call_record  # the call selects this fare by its key, on the flight it names
    times = [c for c in candidates if c.derived == "times" and c.path == fare.path]
    assert [c.value for c in times] == [flight["fares"]["flex"] * 3]
    assert truth["charged_cents"] in {c.value for c in times}
    assert not any(c.derived == "times" and c.value == flight["fares"]["flex"] * 2 for c in candidates)


def test_cat_is_offered_the_byte_length_of_the_file_it_reads_and_relative_paths_joined_to_the_working_folder():
    world = get_simulator("filesystem").world()
    cwd = world.initial_state["cwd"]
    path, content = next((p, c) for p, c in world.initial_state["files"].items() if p.startswith(cwd + "/"))
    relative = path[len(cwd) + 1:]
    _, simulator, candidates = _candidates("filesystem", Call("cat", {"path": relative}))
    _, truth = simulator.step(world.initial_state, Call("cat", {"path": relative}))
    sizes = {c.value for c in candidates if c.derived == "length" and c.call_record}
    assert len(content.encode("utf-8")) in sizes and truth["size"] in sizes
    joined = [c for c in candidates if c.derived == "join"]
    assert [c.value for c in joined] == [path] == [truth["path"]]
    assert joined[0].path == ("arguments", "path") and joined[0].source == "call"


def test_an_absolute_path_email_or_sentence_is_never_joined():
    call = Call("mv", {"source": "/tmp/a.txt", "destination": "notes and plans"})
    _, _, candidates = _candidates("filesystem", call)
    assert not [c for c in candidates if c.derived == "join"]


def test_a_login_is_offered_the_shown_clock_an_hour_a_day_and_a_week_later():
    world = get_simulator("payments").world()
    login = world.initial_state["login"]
    now = world.initial_state["now"]
    _, simulator, candidates = _candidates("payments", Call("login", dict(login)))
    _, truth = simulator.step(world.initial_state, Call("login", dict(login)))
    later = {c.derived: c.value for c in candidates if c.path == ("now",) and c.derived}
    assert set(later) == {"hour later", "day later", "week later"}
    assert later["hour later"] == truth["expires_at"] and later["hour later"] > now
    assert later["day later"][:10] > now[:10]


def test_a_list_the_call_sends_is_offered_its_item_count():
    call = Call("tag_records", {"ids": ["ACC-1", "ACC-2", "ACC-3"], "tag": "renewal"})
    _, _, candidates = _candidates("records", call)
    assert [(c.value, c.path) for c in candidates if c.derived == "length" and c.source == "call"] == \
        [(3, ("arguments", "ids"))]


def test_computed_candidates_follow_the_calls_values_and_survive_the_cap_for_a_huge_state():
    state = {"cwd": "/home/maria", "files": {f"/home/many/f{i}.txt": f"file {i}\n" for i in range(MAX_CANDIDATES)}}
    candidates = copy_candidates(Shown(call=Call("rm", {"path": "docs"}), state=state))
    assert len(candidates) == MAX_CANDIDATES
    assert candidates[0].source == "call" and not candidates[0].derived
    assert candidates[1].derived == "join" and candidates[1].value == "/home/maria/docs"
    assert sum(bool(c.derived) for c in candidates) <= MAX_DERIVED


def test_a_plan_marks_the_computed_total_as_the_true_choice_and_tells_the_head_how_it_was_computed():
    from transformers import AutoTokenizer

    from wmstudio.locations import DEFAULT_MODEL
    from wmstudio.model.canvas.canvas import build_canvas
    from wmstudio.model.heads.copy_head import SHOWN_FEATURES, copy_plan
    from wmstudio.model.network.sources import resolve_model_path
    from wmstudio.world.heads.copy_candidates import DERIVED_OPS

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(DEFAULT_MODEL))
    simulator = get_simulator("airline")
    world = simulator.world()
    flight = next(f for f in world.initial_state["flights"] if f["seats_left"] >= 2)
    call = Call("book_flight", {"flight": flight["flight"], "fare": "standard", "passengers": 2})
    _, truth = simulator.step(world.initial_state, call)
    plan = copy_plan(build_canvas(tokenizer, world.tool("book_flight").response),
                     copy_candidates(render(world, call).shown))
    s = next(i for i, slot in enumerate(plan.slots) if slot.key == "charged_cents")
    hits = [plan.sources[plan.candidates[s][c]] for c in plan.targets(truth)[s]]
    assert hits and all(h.derived == "times" and h.value == 2 * flight["fares"]["standard"] for h in hits)
    c = plan.candidates[s].index(plan.sources.index(hits[0]))
    ops = plan.features[s, c, SHOWN_FEATURES + 1:].tolist()
    assert ops == [float(op == "times") for op in DERIVED_OPS] and plan.features[s, c, SHOWN_FEATURES] == 1.0
