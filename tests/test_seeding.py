"""First-run seeding: an empty database gets the demo worlds and simulator-made example rollouts, once.

Runs on real SQLite files; the race test starts two real processes that seed the same new file at once."""

from __future__ import annotations

import json
import multiprocessing
import shutil

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import (
    MadeBy,
    filter_rollouts,
    list_worlds,
    open_store,
    rollout_steps,
    save_world_version,
)
from wmstudio.store.seeding import (
    EXAMPLE_ROLLOUTS,
    EXAMPLE_TAG,
    demo_worlds,
    seed_first_run,
    simulated_rollout,
)
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import load_world


def test_an_empty_database_gets_every_demo_world_as_v1_with_example_rollouts(tmp_path):
    store = open_store(tmp_path / "studio.db")
    assert seed_first_run(store) is True

    files = sorted(DEMO_WORLDS_DIR.glob("*.json"))
    worlds = list_worlds(store)
    assert [w.name for w in worlds] == sorted(load_world(f).name for f in files)
    for summary in worlds:
        assert summary.latest.version == 1 and summary.versions == 1
        assert summary.latest.spec().dumps() == load_world(DEMO_WORLDS_DIR / f"{summary.name}.json").dumps()

    page = filter_rollouts(store, page_size=100)
    assert page.total == len(files) * len(EXAMPLE_ROLLOUTS)
    assert {r.world_name for r in page.items} == {w.name for w in worlds}
    assert all(r.tags == [EXAMPLE_TAG] and r.status == "pending" for r in page.items)
    assert {r.step_count for r in page.items} == {steps for _, steps, _ in EXAMPLE_ROLLOUTS}


def test_example_steps_are_the_simulators_ground_truth_with_their_check_reports(tmp_path):
    store = open_store(tmp_path / "studio.db")
    seed_first_run(store)
    errors = 0
    for summary in filter_rollouts(store, page_size=100).items:
        world = load_world(DEMO_WORLDS_DIR / f"{summary.world_name}.json")
        simulator = get_simulator(world.simulator)
        state, history = world.initial_state, []
        for step in rollout_steps(store, summary.id):
            made_by = step.provenance()
            assert made_by.kind == "model" and made_by.model == f"simulator:{simulator.name}"
            state, expected = simulator.step(state, step.tool_call())
            assert json.loads(step.response) == expected  # replaying the calls gives the same responses
            report = check_step(world, step.tool_call(), step.response, history=history)
            assert step.check_report == report.to_json() and step.check_ok is report.ok is True
            errors += expected["status"] == "error"
            history.append(HistoryStep(call=step.tool_call(), response=step.response))
    assert errors >= len(list_worlds(store))  # each world shows at least one error response (the agent's mistake)


def test_seeding_twice_does_nothing_the_second_time(tmp_path):
    store = open_store(tmp_path / "studio.db")
    assert seed_first_run(store) is True
    before = filter_rollouts(store, page_size=100).total
    assert seed_first_run(store) is False
    assert filter_rollouts(store, page_size=100).total == before
    assert all(w.versions == 1 for w in list_worlds(store))


def test_a_database_that_already_has_a_world_is_never_touched(tmp_path):
    store = open_store(tmp_path / "studio.db")
    mine = demo_worlds()[0]
    save_world_version(store, mine)
    assert seed_first_run(store) is False
    assert [w.name for w in list_worlds(store)] == [mine.name]
    assert filter_rollouts(store).total == 0


def test_without_demo_worlds_nothing_is_written(tmp_path):
    store = open_store(tmp_path / "studio.db")
    assert seed_first_run(store, folder=tmp_path / "no-such-folder") is False
    assert list_worlds(store) == []


def test_a_world_without_a_simulator_is_saved_without_examples(tmp_path):
    folder = tmp_path / "worlds"
    folder.mkdir()
    data = json.loads((DEMO_WORLDS_DIR / "retail.json").read_text())
    data.pop("simulator")
    data["name"] = "my shop"
    (folder / "shop.json").write_text(json.dumps(data))
    shutil.copy(DEMO_WORLDS_DIR / "payments.json", folder / "payments.json")
    store = open_store(tmp_path / "studio.db")
    assert seed_first_run(store, folder=folder) is True
    assert [w.name for w in list_worlds(store)] == ["my shop", "payments"]
    assert {r.world_name for r in filter_rollouts(store, page_size=100).items} == {"payments"}
    assert simulated_rollout(load_world(folder / "shop.json"), seed=1, steps=3) == []


def test_example_rollouts_are_the_same_on_every_machine():
    world = demo_worlds()[0]
    first = simulated_rollout(world, seed=5, steps=4, mistakes=(2,))
    again = simulated_rollout(world, seed=5, steps=4, mistakes=(2,))
    assert [(s.call, s.response) for s in first] == [(s.call, s.response) for s in again]
    assert all(isinstance(s.made_by, MadeBy) and s.made_by.seed == 5 for s in first)


def _seed_in_another_process(path: str, start, results) -> None:
    store = open_store(path)
    start.wait()
    results.put(seed_first_run(store))


@pytest.mark.slow
def test_two_processes_seeding_the_same_new_file_seed_it_once(tmp_path):
    path = str(tmp_path / "studio.db")
    open_store(path)  # migrated before the race, as the studio does on start
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_seed_in_another_process, args=(path, start, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = sorted(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == [False, True]
    store = open_store(path)
    assert all(w.versions == 1 for w in list_worlds(store))
    assert filter_rollouts(store, page_size=100).total == len(list_worlds(store)) * len(EXAMPLE_ROLLOUTS)
