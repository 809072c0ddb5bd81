"""A curriculum's scenarios in the store: the demo's saved once, read back as the trainer uses them, edited (task,
success condition, steering) with bad input refused naming the field, carried by exports, and a database of the
previous schema upgraded to hold them."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlmodel import select

from wmstudio.problems import InvalidInput
from wmstudio.store import (
    MadeBy,
    Rollout,
    append_step,
    create_curriculum_version,
    create_rollout,
    curriculum_rollouts,
    ensure_curriculum,
    get_curriculum,
    get_scenario,
    list_curricula,
    list_runs,
    list_scenarios,
    open_store,
    save_scenarios,
    save_world_version,
    set_status,
    update_scenario,
)
from wmstudio.store.database import current_revision, head_revision, upgrade_database
from wmstudio.store.scenarios import SUCCESS_EXAMPLE
from wmstudio.studio.curricula import add_to_curriculum, export_curriculum, import_dataset_file, zip_folder
from wmstudio.studio.scenario_authoring import (
    NO_CALLS,
    PLAYED,
    add_scenario,
    curriculum_worlds,
    saved_episodes,
    try_success,
)
from wmstudio.studio.scenario_file import SCENARIOS_FILE
from wmstudio.train.agent.curriculum_scenarios import curriculum_scenarios, scenario_rows, seed_demo_scenarios
from wmstudio.train.agent.jobs import demo_curriculum, job_settings, training_command
from wmstudio.train.agent.scenarios import Step, Trajectory, demo_scenarios, succeeded
from wmstudio.ui.scenarios_panel import (
    missing_scenarios,
    read_steering,
    save_scenario,
    scenario_form,
    scenario_table,
    steering_text,
    trainable_curricula,
)
from wmstudio.ui.train_tab import start_run
from wmstudio.world.steering.anchors import Anchor

PREVIOUS_HEAD = "0005"
DONE = 'trajectory.final_answer.startsWith("Done")'


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "studio.db"
    open_store(path).close()
    return path


@pytest.fixture
def store(migrated, tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    path = tmp_path / "studio.db"
    shutil.copy(migrated, path)
    opened = open_store(path)
    yield opened
    opened.close()


def fresh_store(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    return open_store(folder / "studio.db")


def retail(scenarios, feasible=True):
    return next(s for s in scenarios if s.world.name == "retail" and s.feasible == feasible
                and s.target.name == "refund_order")


def accepted_rollout(store, scenario) -> int:
    """A one-step accepted rollout in the scenario's world: the target call answered ok."""
    world = save_world_version(store, scenario.world)
    rollout = create_rollout(store, world.id, title="refund")
    append_step(store, rollout.id, scenario.target, '{"status": "ok"}', MadeBy.by_model("wmstudio-tiny", seed=0))
    set_status(store, rollout.id, "accepted")
    return rollout.id


def ok_episode(scenario, final_answer="") -> Trajectory:
    return Trajectory([Step(scenario.target, json.dumps({"status": "ok"}))], final_answer)


# --- the demo curriculum ---------------------------------------------------------------------------------------


def test_the_demo_scenarios_are_stored_once_and_come_back_as_demo_scenarios(store):
    assert curriculum_scenarios(store) == demo_scenarios()  # no rows yet: from code
    first = demo_curriculum(store)
    assert seed_demo_scenarios(store).id == first.id and demo_curriculum(store).id == first.id
    rows = list_scenarios(store, first.id)
    assert len(rows) == len(demo_scenarios()) == 90
    assert [s.curriculum.name for s in list_curricula(store)] == ["demo"]
    assert list_curricula(store)[0].scenario_count == 90
    back, expected = curriculum_scenarios(store), demo_scenarios()
    assert [s.id for s in back] == [s.id for s in expected]
    assert [(s.task, s.success, s.target, s.feasible, s.split) for s in back] == \
           [(s.task, s.success, s.target, s.feasible, s.split) for s in expected]
    assert [s.world.initial_state for s in back] == [s.world.initial_state for s in expected]
    assert back == expected
    assert {row.split for row in list_scenarios(store, first.id, split="heldout")} == {"heldout"}
    assert len(list_scenarios(store, first.id, split="heldout")) == 30


def test_a_database_with_the_demo_row_but_no_scenarios_gets_them_on_the_next_call(store):
    old = ensure_curriculum(store, "demo", "made before scenarios were stored")
    assert list_scenarios(store, old.id) == []
    assert demo_curriculum(store).id == old.id
    assert len(list_scenarios(store, old.id)) == 90


# --- editing ---------------------------------------------------------------------------------------------------


def test_an_edited_success_condition_and_steering_are_what_training_gets_and_judges_by(store):
    curriculum = seed_demo_scenarios(store)
    scenario = retail(curriculum_scenarios(store))
    row = next(r for r in list_scenarios(store, curriculum.id) if r.key == scenario.id)
    assert succeeded(scenario, ok_episode(scenario))

    edited = update_scenario(store, row.id, success=f"{scenario.success} && {DONE}", task="  Refund it, please.  ",
                             steering={"refund_order": ['status = "error"', "refund_processed=false"]})
    assert edited.updated_at > row.updated_at
    assert edited.steering == {"refund_order": ['status="error"', "refund_processed=false"]}  # canonical text
    now = next(s for s in curriculum_scenarios(store) if s.id == scenario.id)
    assert now.success == f"{scenario.success} && {DONE}" and now.task == "Refund it, please."
    assert now.steering == {"refund_order": [Anchor("status", "error"), Anchor("refund_processed", False)]}
    assert not succeeded(now, ok_episode(now))
    assert succeeded(now, ok_episode(now, "Done: refunded."))
    assert seed_demo_scenarios(store) and get_scenario(store, row.id).success == now.success  # seeding keeps edits


@pytest.mark.parametrize("change, field, words", [
    ({"success": "trajectory.calls.size() >"}, "success", "CEL syntax error"),
    ({"success": "   "}, "success", "write a CEL condition"),
    ({"success": "trajectroy.calls.size() > 0"}, "success", "`trajectroy` is not known"),
    ({"success": "trajectory.calls.size()"}, "success", "not true/false"),
    ({"task": ""}, "task", "write what the user asks"),
    ({"steering": {"launch_rocket": ['status="ok"']}}, "steering.launch_rocket", "no tool 'launch_rocket'"),
    ({"steering": {"refund_order": ["status=err"]}}, "steering.refund_order[0]", "is not JSON"),
    ({"steering": {"refund_order": ["no equals sign"]}}, "steering.refund_order[0]", "PATH=VALUE"),
    ({"steering": {"refund_order": ["refund_colour=1"]}}, "steering.refund_order[0]", "has no field"),
    ({"steering": {"refund_order": ['status="done"']}}, "steering.refund_order[0]", "expected one of"),
    ({"steering": {"refund_order": ['status="ok"', 'status="error"']}}, "steering.refund_order[1]", "again"),
    ({"steering": ['refund_order: status="ok"']}, "steering", "must map tool names"),
    ({"steering": {"refund_order#0": ['status="error"']}}, "steering.refund_order#0", "whole number 1-99"),
    ({"steering": {"refund_order#first": ['status="error"']}}, "steering.refund_order#first", "refund_order#1"),
    ({"steering": {"launch_rocket#1": ['status="ok"']}}, "steering.launch_rocket#1", "no tool 'launch_rocket'"),
], ids=["syntax", "empty", "unknown name", "not boolean", "empty task", "unknown tool", "value not JSON",
        "not an anchor", "field not in schema", "value not allowed", "pinned twice", "not a mapping",
        "call number 0", "call number not a number", "unknown tool's call"])
def test_a_bad_edit_is_refused_naming_the_field_and_nothing_changes(store, change, field, words):
    curriculum = seed_demo_scenarios(store)
    scenario = retail(curriculum_scenarios(store))
    row = next(r for r in list_scenarios(store, curriculum.id) if r.key == scenario.id)
    with pytest.raises(InvalidInput) as err:
        update_scenario(store, row.id, **{"task": "A new task that would be fine.", **change})
    assert [p.path for p in err.value.problems] == [field]
    assert words in str(err.value)
    assert get_scenario(store, row.id) == row  # task, success, steering and updated_at as they were


def test_saving_scenarios_is_all_or_nothing_and_never_overwrites_by_accident(store):
    curriculum = ensure_curriculum(store, "retail", "")
    good, other = scenario_rows([s for s in demo_scenarios() if s.world.name == "retail"][:2])
    broken = scenario_rows([retail(demo_scenarios())])[0]
    broken.key, broken.success = "broken", "trajectory.calls.exists(c, "
    with pytest.raises(InvalidInput) as err:
        save_scenarios(store, curriculum.id, [good, broken])
    assert [p.path for p in err.value.problems] == ["scenarios[1].success"]
    assert list_scenarios(store, curriculum.id) == []
    with pytest.raises(InvalidInput, match=r"scenarios\[1\].key: 'retail-train-0' is also scenarios\[0\]"):
        save_scenarios(store, curriculum.id, [good, good])
    save_scenarios(store, curriculum.id, [good])
    with pytest.raises(InvalidInput, match="already has 1 scenarios"):
        save_scenarios(store, curriculum.id, [other])
    assert [r.key for r in save_scenarios(store, curriculum.id, [other, good], replace=True)] == \
           [other.key, good.key]

    ensure_curriculum(store, "empty", "")
    with pytest.raises(InvalidInput, match="empty v1 has no scenarios"):
        curriculum_scenarios(store, "empty")


# --- exports and versions ----------------------------------------------------------------------------------------


def count_rollouts(store) -> int:
    with store.read() as session:
        return len(session.exec(select(Rollout.id)).all())


def retail_curriculum(store):
    """Curriculum `retail` v1: one accepted rollout and three retail scenarios, one with an edited success."""
    picked = [s for s in demo_scenarios() if s.world.name == "retail"][:3]
    curriculum = create_curriculum_version(store, "retail", [accepted_rollout(store, retail(demo_scenarios()))],
                                           scenarios=scenario_rows(picked))
    first = list_scenarios(store, curriculum.id)[0]
    update_scenario(store, first.id, success=f"{first.success} || {DONE}",
                    steering={first.target["name"]: ['status="error"']})
    return curriculum


def test_export_then_import_keeps_the_scenarios_as_edited(store, tmp_path):
    curriculum = retail_curriculum(store)
    expected = curriculum_scenarios(store, "retail")
    assert expected[0].success.endswith(DONE) and expected[0].steering

    folder, label = export_curriculum(store, curriculum.id, tmp_path / "out" / "retail-v1")
    assert label == "retail v1" and (folder / SCENARIOS_FILE).is_file()
    assert len((folder / SCENARIOS_FILE).read_text().splitlines()) == 3
    assert SCENARIOS_FILE in (folder / "README.md").read_text()

    other = fresh_store(tmp_path / "other")
    result = import_dataset_file(other, folder)
    assert (result.curriculum, result.scenarios, len(result.rollout_ids)) == ("retail v1", 3, 1)
    assert curriculum_scenarios(other, "retail") == expected
    again = import_dataset_file(other, zip_folder(folder))  # the same rows again: the same version, no copy
    assert again.repeated and again.curriculum == "retail v1"
    assert [(s.curriculum.name, s.curriculum.version, s.scenario_count) for s in list_curricula(other)] == \
           [("retail", 1, 3)]

    rollouts_before = count_rollouts(store)
    here = import_dataset_file(store, folder)  # into the database it came from: its own rollouts, the same version
    assert here.curriculum == "retail v1" and here.rollout_ids == [r.id for r in curriculum_rollouts(store,
                                                                                                     curriculum.id)]
    assert count_rollouts(store) == rollouts_before


def test_an_export_imported_back_with_edited_scenarios_is_the_next_version_of_the_same_rollouts(store, tmp_path):
    """Issue 39: each round trip copied every rollout (and the copies entered the Annotate queue), and an import of
    the folder after editing its scenarios was refused as imported before, dropping the new scenarios."""
    curriculum = retail_curriculum(store)
    folder, _ = export_curriculum(store, curriculum.id, tmp_path / "out" / "retail-v1")
    lines = [json.loads(line) for line in (folder / SCENARIOS_FILE).read_text().splitlines()]
    lines[1]["task"] = "Refund the order, then say so."
    extra = dict(lines[2], key="retail-extra-1")
    (folder / SCENARIOS_FILE).write_text("".join(json.dumps(line) + "\n" for line in [*lines, extra]))
    rollouts_before = count_rollouts(store)

    result = import_dataset_file(store, folder)
    assert result.curriculum == "retail v2" and result.scenarios == 4
    assert count_rollouts(store) == rollouts_before  # no copy of any rollout
    assert [r.id for r in curriculum_rollouts(store, get_curriculum(store, "retail").id)] == \
           [r.id for r in curriculum_rollouts(store, curriculum.id)]
    newest = curriculum_scenarios(store, "retail")
    assert [s.task for s in newest][1] == "Refund the order, then say so." and newest[3].id == "retail-extra-1"
    assert curriculum_scenarios(store, "retail", 1)[1].task != newest[1].task  # v1 kept as it was

    again = import_dataset_file(store, folder)  # the same edited export again: nothing new
    assert again.curriculum == "retail v2" and count_rollouts(store) == rollouts_before


def test_a_new_version_keeps_the_scenarios_and_exports_without_them_drop_the_file(store, tmp_path):
    curriculum = retail_curriculum(store)
    newer, added = add_to_curriculum(store, "retail", "", [accepted_rollout(store, retail(demo_scenarios()))])
    assert (newer.version, added) == (2, 1)
    assert curriculum_scenarios(store, "retail", 2) == curriculum_scenarios(store, "retail", 1)
    assert len(list_scenarios(store, curriculum.id)) == 3  # the first version keeps its own

    plain = create_curriculum_version(store, "plain", [accepted_rollout(store, retail(demo_scenarios()))])
    folder = tmp_path / "out"
    export_curriculum(store, curriculum.id, folder)
    export_curriculum(store, plain.id, folder)  # over the same folder: no stale scenarios.jsonl is left
    assert not (folder / SCENARIOS_FILE).exists()
    assert import_dataset_file(fresh_store(tmp_path / "other"), folder).curriculum is None


def test_a_bad_scenarios_line_is_refused_with_its_number_and_nothing_is_imported(store, tmp_path):
    folder, _ = export_curriculum(store, retail_curriculum(store).id, tmp_path / "retail-v1")
    lines = (folder / SCENARIOS_FILE).read_text().splitlines()
    second = json.loads(lines[1])
    second["success"] = "trajectory.calls.exists(c, "
    second["steering"] = {"launch_rocket": ['status="ok"']}
    lines[1] = json.dumps(second)
    lines[2] = lines[2][:40]
    (folder / SCENARIOS_FILE).write_text("\n".join(lines) + "\n")
    other = fresh_store(tmp_path / "other")
    with pytest.raises(InvalidInput) as err:
        import_dataset_file(other, folder)
    assert [p.path for p in err.value.problems] == ["line 2: success", "line 2: steering.launch_rocket", "line 3"]
    assert "invalid JSON" in str(err.value) and SCENARIOS_FILE in str(err.value)
    assert list_curricula(other) == []
    with closing(sqlite3.connect(other.path)) as connection:
        assert connection.execute("SELECT count(*) FROM rollout").fetchone() == (0,)


# --- the migration -----------------------------------------------------------------------------------------------


def test_a_database_of_the_previous_revision_is_upgraded_and_its_demo_row_gets_the_scenarios(tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    path = tmp_path / "studio.db"
    upgrade_database(path, PREVIOUS_HEAD)
    with closing(sqlite3.connect(path)) as connection, connection:  # what the studio before this revision wrote
        connection.execute("INSERT INTO curriculum VALUES (1, 'demo', 1, 'Built in', '2026-01-01 10:00:00.000000')")
        connection.execute("INSERT INTO training_run (id, curriculum_id, config, status, error, created_at) VALUES "
                           "(1, 1, '{\"curriculum\": \"demo\"}', 'finished', '', '2026-01-01 10:00:01.000000')")

    store = open_store(path)

    assert current_revision(path) == head_revision()
    backups = [p.name for p in tmp_path.iterdir() if p.name.startswith("studio.db.before-")]
    assert backups == [f"studio.db.before-{head_revision()}.bak"]
    assert list_scenarios(store, 1) == [] and curriculum_scenarios(store) == demo_scenarios()
    assert demo_curriculum(store).id == 1 and len(list_scenarios(store, 1)) == 90
    scenario = retail(curriculum_scenarios(store))
    assert succeeded(scenario, ok_episode(scenario))


# --- the Train tab's Scenarios panel ----------------------------------------------------------------------------


def test_the_scenarios_panel_lists_edits_and_names_the_bad_field(store, tmp_path):
    summary, rows, choices = scenario_table(store, "demo")
    assert summary.startswith("**demo v1** · 90 scenarios (60 train, 30 held out)")
    assert rows[0][:3] == ["airline-train-0", "train", "airline"] and len(choices) == len(rows) == 90
    retail_id = next(scenario_id for (label, scenario_id) in choices if label.startswith("retail-train-0"))
    task, success, steering, about = scenario_form(store, retail_id)
    assert steering == "" and "World `retail`" in about

    with pytest.raises(InvalidInput, match=r"Steering: line 2 `status=\"error\"` is not `tool: path=value`"):
        save_scenario(store, retail_id, task, success, 'refund_order: refund_processed=false\nstatus="error"')
    with pytest.raises(InvalidInput) as err:
        save_scenario(store, retail_id, task, "trajectory.calls.exists(c, ", 'refund_order: status="error"')
    assert [p.path for p in err.value.problems] == ["success"]
    assert scenario_form(store, retail_id) == (task, success, steering, about)  # nothing changed

    note = save_scenario(store, retail_id, task, f"{success} || {DONE}",
                         'refund_order: status = "error"\n\nrefund_order: error="ORDER_NOT_FOUND"')
    assert "Saved `retail-train-0`" in note and "2 anchor(s)" in note
    assert scenario_form(store, retail_id)[2] == \
           'refund_order: status="error"\nrefund_order: error="ORDER_NOT_FOUND"'
    assert read_steering(steering_text({"a": ["x=1", "y=2"], "b": ["z=3"]})) == {"a": ["x=1", "y=2"], "b": ["z=3"]}

    assert [name for _, name in trainable_curricula(store)] == ["demo", "adversarial"]  # the built-in ones
    retail_curriculum(store)
    assert trainable_curricula(store)[2:] == [("retail v1 · 3 scenarios", "retail")]


def test_a_curriculum_saved_from_rollouts_is_offered_and_says_what_it_needs_to_train(store):
    rollout = accepted_rollout(store, retail(demo_scenarios()))
    add_to_curriculum(store, "refunds", "", [rollout])  # what "Save curriculum version" in Rollouts does
    assert ("refunds v1 · 1 rollouts, no scenarios yet", "refunds") in trainable_curricula(store)
    note = missing_scenarios(store, "refunds")
    assert note.startswith("**refunds v1** holds 1 rollout(s) and no scenarios") and SUCCESS_EXAMPLE in note
    assert "scenarios.jsonl" in note and "`demo`" in note
    assert missing_scenarios(store, "demo") == "" and missing_scenarios(store, None) == ""
    with pytest.raises(InvalidInput) as err:  # Start says the same, before any run is made
        start_run(store, "refunds", "simulator", "5")
    assert [p.path for p in err.value.problems] == ["Curriculum"] and list_runs(store) == []
    retail_curriculum(store)
    assert missing_scenarios(store, "retail") == ""
    _, table, _ = scenario_table(store, "refunds")
    assert table == []


def test_a_run_that_could_not_build_one_step_is_refused_with_the_fix_before_it_starts(store):
    """Issue 39: 3 training scenarios and a step of 4 ended "finished" after 0 steps; now Start names the fix."""
    retail_curriculum(store)  # 3 training scenarios
    with pytest.raises(InvalidInput) as err:
        start_run(store, "retail", "simulator", "5")
    [problem] = err.value.problems
    assert problem.path == "scenarios_per_step" and "has 3 training scenario(s) and a step plays 4" in problem.message
    assert "set Scenarios per step to 3 or fewer, or add training scenarios" in problem.message
    with pytest.raises(InvalidInput, match="generations: must be a whole number from 2 to 64, got 1"):
        start_run(store, "retail", "simulator", "5", "", 3, 1)
    assert list_runs(store) == []  # nothing was recorded
    settings = job_settings("retail", "simulator", 5, 0, None, None, 3, 4)  # what the tab's batch fields pass on
    command = training_command(1, settings, store.path)
    assert command[command.index("--scenarios-per-step") + 1] == "3" and command[command.index("--generations") + 1] == "4"


def test_a_curriculum_whose_tools_the_policy_cannot_name_is_refused_at_start(store):
    import dataclasses

    picked = [s for s in demo_scenarios() if s.world.name == "retail" and s.split == "train"][:4]
    renamed = [dataclasses.replace(s, world=dataclasses.replace(
        s.world, tools=[dataclasses.replace(t, name=f"shop_{t.name}") for t in s.world.tools])) for s in picked]
    create_curriculum_version(store, "shop", [accepted_rollout(store, retail(demo_scenarios()))],
                              scenarios=scenario_rows(renamed))
    with pytest.raises(InvalidInput) as err:
        start_run(store, "shop", "simulator", "5")
    assert [p.path for p in err.value.problems] == ["policy"] and list_runs(store) == []
    assert "names none of the tools of the worlds of 'shop'" in str(err.value)


# --- authoring ---------------------------------------------------------------------------------------------------


def test_a_scenario_added_to_a_saved_curriculum_is_its_next_version_with_its_rollouts_and_scenarios(store):
    curriculum = retail_curriculum(store)
    world = curriculum_worlds(store, "retail")["retail"]
    condition = 'trajectory.calls.exists(c, c.name == "refund_order" && c.status == "ok")'
    rollout = curriculum_rollouts(store, curriculum.id)[0].id
    assert try_success(store, condition, world, rollout).holds  # the saved refund answered ok
    assert not try_success(store, condition.replace('"ok"', '"error"'), world, rollout).holds
    with pytest.raises(InvalidInput, match="success: CEL syntax error"):
        try_success(store, "trajectory.calls.exists(c, ", world, rollout)
    # with no saved episode to hand, a condition is tried before any call: one that holds there rewards doing nothing
    assert saved_episodes(store, "retail")[-1][1] == NO_CALLS
    assert not try_success(store, condition, world, NO_CALLS).holds
    idle = try_success(store, "size(trajectory.calls) == 0 || true", world, NO_CALLS)
    assert idle.holds and "an agent that does nothing" in idle.text
    # or on an episode the simulator plays: the expert on a built-in task of the world, one done and one refused
    played = [value for _, value in saved_episodes(store, "retail") if str(value).startswith(PLAYED)]
    assert len(played) >= 2
    cancelled = 'trajectory.calls.exists(c, c.name == "cancel_order" && c.status == "ok")'
    tried = [try_success(store, cancelled, world, value) for value in played]
    assert any(t.holds for t in tried) and not all(t.holds for t in tried)
    assert all("the simulator's episode" in t.text for t in tried)
    with pytest.raises(InvalidInput, match="episode: retail has no built-in task"):
        try_success(store, cancelled, world, PLAYED + "nowhere-0")

    added = add_scenario(store, "retail", world, "Refund it twice.", condition, {"refund_order#2": ['status="ok"']},
                         split="heldout")
    assert (added.name, added.version) == ("retail", 2)
    assert [r.id for r in curriculum_rollouts(store, added.id)] == [rollout]
    scenarios = curriculum_scenarios(store, "retail")
    assert len(scenarios) == 4 and scenarios[-1].id == "retail-heldout-0" and scenarios[-1].split == "heldout"
    assert len(curriculum_scenarios(store, "retail", 1)) == 3  # the version before keeps its own

    with pytest.raises(InvalidInput) as err:
        add_scenario(store, "retail", world, "", condition, {}, key="retail-heldout-0")
    assert [p.path for p in err.value.problems] == ["task", "key"]
    assert get_curriculum(store, "retail").version == 2  # nothing saved
