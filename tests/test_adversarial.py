"""The adversarial curriculum: tasks whose first try fails on purpose, and tasks the world itself refuses, each family
held out as it says, judged by the same steering in the simulator and the world model: an agent that does not recover
fails every steered task, one that retries every error fails every refused one, a recovering one that reads the error
succeeds, and the world model's off-policy estimate agrees with the truth."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from tempfile import mkdtemp

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.model.serving.backends import load_backend
from wmstudio.problems import InvalidInput
from wmstudio.store import open_store
from wmstudio.train.agent.adversarial import (
    ADVERSARIAL_CURRICULUM,
    CONTROL,
    FAMILIES,
    REFUSED,
    adversarial_scenarios,
    scenario_family,
)
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.curriculum_scenarios import curriculum_scenarios
from wmstudio.train.agent.environments import SIMULATOR, WORLD_MODEL, run_episode
from wmstudio.train.agent.grpo import train_grpo
from wmstudio.train.agent.off_policy import evaluate_policy, report
from wmstudio.train.agent.reachability import Reach
from wmstudio.train.agent.scenarios import HELDOUT, TRAIN, batch_problems, demo_scenarios, split_of, succeeded
from wmstudio.train.agent.scripted_policies import expert, recovering, scripted_policy
from wmstudio.ui.scenarios_panel import trainable_curricula

pytestmark = pytest.mark.usefixtures("one_thread")
SCENARIOS = adversarial_scenarios()


def test_every_family_has_training_and_held_out_scenarios_and_transient_errors_are_held_out_by_world():
    counts = Counter((scenario_family(s), s.split) for s in SCENARIOS)
    assert all(counts[(family, split)] >= 6 for family in FAMILIES for split in (TRAIN, HELDOUT))
    for family in ("transient", REFUSED):
        worlds = {split: {s.world.name for s in SCENARIOS if scenario_family(s) == family and s.split == split}
                  for split in (TRAIN, HELDOUT)}
        assert worlds[TRAIN] and worlds[HELDOUT] and not worlds[TRAIN] & worlds[HELDOUT]
    demo_states = {json.dumps(s.world.initial_state, sort_keys=True) for s in demo_scenarios()}
    assert not demo_states & {json.dumps(s.world.initial_state, sort_keys=True) for s in SCENARIOS}
    assert all(bool(s.steering) == (scenario_family(s) not in (CONTROL, REFUSED)) for s in SCENARIOS)
    assert all(s.feasible == (scenario_family(s) != REFUSED) for s in SCENARIOS)
    assert not batch_problems(SCENARIOS, 4)


def test_only_an_agent_that_recovers_succeeds_where_the_first_try_fails_and_only_one_that_stops_where_refused():
    for scenario in split_of(SCENARIOS, HELDOUT):
        family = scenario_family(scenario)
        tried, _ = run_episode(expert, scenario, SIMULATOR)
        recovered, _ = run_episode(recovering, scenario, SIMULATOR)
        retried, _ = run_episode(scripted_policy("retry-once"), scenario, SIMULATOR)
        first = json.loads(tried.steps[-1].response)
        steered = family not in (CONTROL, REFUSED)
        assert first["status"] == ("ok" if family == CONTROL else "partial" if family == "partial" else "error"), \
            scenario.id
        assert succeeded(scenario, tried) == (not steered), scenario.id
        assert succeeded(scenario, recovered), scenario.id
        assert succeeded(scenario, retried) == (family != REFUSED), scenario.id  # a refusal tried again fails
        if family != REFUSED:
            recovered.final_answer = f"Could not: {scenario.task}"  # recovered, then said it failed: not a success
            assert not succeeded(scenario, recovered), scenario.id


def test_the_reflex_yardsticks_play_by_name_and_a_blind_retry_fails_half_the_held_out_set():
    """`retry-once` (any non-ok answer: the same call again, a new sign-in after an expired session) and `tries-twice`
    are the yardsticks a trained agent must beat ([grpo-world-matters]); the `refused` family makes the retry wrong
    where the world itself refuses, so neither reflex passes half the held-out set, while reading the error does."""
    heldout = split_of(SCENARIOS, HELDOUT)
    judged = {name: evaluate_policy(scripted_policy(name), heldout, None, SIMULATOR)
              for name in ("expert", "tries-twice", "retry-once", "recovering")}
    shares = {name: sum(e.truths.values()) / len(heldout) for name, e in judged.items()}
    assert shares["retry-once"] <= 0.5 and shares["tries-twice"] <= 0.5 and shares["recovering"] == 1.0
    result = CliRunner().invoke(app, ["evaluate", "--policy", "retry-once", "--curriculum", "adversarial", "--split",
                                      "heldout", "--env", "simulator", "--db", str(Path(mkdtemp()) / "s.db"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ground_truth"] == round(shares["retry-once"], 4) and data["per_family"][REFUSED]["ground_truth"] == 0


def test_the_world_models_estimates_agree_with_the_simulator_family_by_family():
    chosen = [next(s for s in split_of(SCENARIOS, HELDOUT) if scenario_family(s) == family and s.world.name == world)
              for family, world in (("transient", "payments"), ("transient", "records"), ("expired", "payments"),
                                    ("partial", "records"), (CONTROL, "retail"), (REFUSED, "payments"),
                                    (REFUSED, "records"))]
    backend = load_backend()
    for policy, expected in ((expert, {"transient": 0.0, "expired": 0.0, "partial": 0.0, CONTROL: 1.0, REFUSED: 1.0}),
                             (recovering, dict.fromkeys(FAMILIES, 1.0)),
                             (scripted_policy("retry-once"), {**dict.fromkeys(FAMILIES, 1.0), REFUSED: 0.0})):
        data = report("policy", ADVERSARIAL_CURRICULUM, HELDOUT, evaluate_policy(policy, chosen, backend, WORLD_MODEL))
        assert {family: figures["estimate"] for family, figures in data["per_family"].items()} == expected
        assert {family: figures["ground_truth"] for family, figures in data["per_family"].items()} == expected


def test_the_curriculum_is_built_in_saved_once_with_its_steering_per_call_and_offered_in_the_train_tab(tmp_path,
                                                                                                      monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    store = open_store(tmp_path / "studio.db")
    assert (f"{ADVERSARIAL_CURRICULUM} · recover from a failed first try, beside controls",
            ADVERSARIAL_CURRICULUM) in trainable_curricula(store)
    saved = curriculum_scenarios(store, ADVERSARIAL_CURRICULUM)
    assert [(s.id, s.steering, s.success, s.target) for s in saved] == \
           [(s.id, s.steering, s.success, s.target) for s in SCENARIOS]
    transient = next(s for s in saved if scenario_family(s) == "transient")
    assert list(transient.steering) == [f"{transient.target.name}#1"]

    result = CliRunner().invoke(app, ["evaluate", "--policy", "recovering", "--curriculum", ADVERSARIAL_CURRICULUM,
                                      "--env", "simulator", "--db", str(tmp_path / "studio.db"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ground_truth"] == 1.0 and set(data["per_family"]) == set(FAMILIES)
    assert data["episodes"] == len(split_of(SCENARIOS, HELDOUT))


def test_a_run_the_policy_cannot_learn_from_is_refused_before_it_trains_naming_each_family(tmp_path):
    settings = GrpoSettings(env=SIMULATOR, curriculum=ADVERSARIAL_CURRICULUM, max_steps=1)  # the shipped SFT policy
    said: list[str] = []
    steered = [s for s in SCENARIOS if scenario_family(s) != REFUSED]  # the shipped policy already stops where refused
    with pytest.raises(InvalidInput) as err:
        train_grpo(settings, tmp_path / "run", None, log=said.append, curriculum=steered)
    assert [p.path for p in err.value.problems] == ["min_reachable"]
    message = str(err.value)
    assert all(f"{family} 0 of 6 groups" in message for family in ("expired", "partial", "transient"))
    assert "control" not in message and "--min-reachable 0" in message
    assert any(line.startswith("reach at temperature 1") and "control 6/6" in line for line in said)
    assert not (tmp_path / "run" / "policy").exists()  # nothing trained, nothing saved


def test_the_reach_of_a_family_counts_groups_with_a_success():
    reach = Reach(temperature=1.0, generations=4)
    for family, successes in (("transient", 0), ("transient", 1), ("control", 4), ("", 2)):
        reach.add(family, successes)
    assert reach.share("transient") == 0.5 and reach.mixed["transient"] == 1 and reach.mixed["control"] == 0
    assert reach.to_json()["families"]["all"] == {"groups": 1, "reached": 1, "differing": 1}
    assert not reach.problems(0.5) and not reach.problems(0.0) and not reach.warnings(0.5)
    assert not reach.problems(0.6) and "transient 1 of 2 groups" in reach.warnings(0.6)  # the rest still trains
    stuck = Reach(temperature=1.0, generations=4)
    for family, successes in (("transient", 0), ("partial", 0), ("control", 4)):
        stuck.add(family, successes)
    assert [p.path for p in stuck.problems(0.1)] == ["min_reachable"]  # only the controls: nothing to learn
    assert "transient 0 of 1 groups" in str(stuck.problems(0.1)[0]) and "control" not in str(stuck.problems(0.1)[0])
