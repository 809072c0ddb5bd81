"""The agent policy (train/agent/agent_text.py, agent_policy.py, agent_sft.py, grpo.py): episodes as words with value
slots, a policy trained by SFT that copies ids from its task and from a tool's answer, and GRPO through TRL that
records its metrics and checkpoints and resumes from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.train.agent.agent_config import AgentTrainConfig, GrpoSettings
from wmstudio.train.agent.agent_policy import load_policy
from wmstudio.train.agent.agent_sft import SFT_SEED_OFFSET, expert_episode, expert_episodes, train_agent
from wmstudio.train.agent.agent_text import (
    EOA,
    SlotTable,
    action_words,
    episode_words,
    parse_action,
    prompt_words,
    result_words,
)
from wmstudio.train.agent.environments import SIMULATOR, run_episode
from wmstudio.train.agent.off_policy import evaluate_policy
from wmstudio.train.agent.scenarios import COULD_NOT, HELDOUT, TRAIN, demo_scenarios, make_scenario, split_of, succeeded
from wmstudio.train.agent.scripted_policies import expert, signs_in_late, tries_twice
from wmstudio.world.spec import Call

SCENARIOS = demo_scenarios()


@pytest.mark.parametrize("scenario", SCENARIOS[::3], ids=lambda s: s.id)
def test_every_expert_action_is_written_with_slots_and_reads_back_to_the_same_call(scenario):
    trajectory, _ = run_episode(expert, scenario, SIMULATOR)
    words, slots = episode_words(scenario, trajectory)
    for step in trajectory.steps:
        written = action_words(step.call, slots)
        assert written is not None and written[-1] == EOA
        assert parse_action(written, slots, scenario.task) == step.call
    assert parse_action(action_words(trajectory.final_answer, slots), slots, scenario.task) == trajectory.final_answer
    assert expert_episode(scenario) is not None


def test_ids_in_the_task_and_in_a_tools_answer_become_slots_the_call_copies_whole():
    slots = SlotTable()
    payments = next(s for s in SCENARIOS if s.world.name == "payments")
    words = prompt_words(payments, slots)
    task = next(s for s in SCENARIOS if s.world.name == "retail" and s.target.name == "refund_order")
    task_slots = SlotTable()
    task_words = prompt_words(task, task_slots)
    order = task.target.arguments["order_id"]
    assert order not in " ".join(task_words) and task_slots.known(order) in task_words  # the id is one slot
    password = payments.world.initial_state["login"]["password"]
    assert password not in words and slots.known(password) in words  # payments shows its credentials, as slots
    answer = json.dumps({"session_token": "plsess_Abc123", "status": "ok", "error": ""})
    shown = result_words(answer, slots)
    assert shown[:4] == ["result", "status", "=", "ok"]  # the outcome comes first, as words
    token_slot = slots.known("plsess_Abc123")
    call = parse_action(["call", "create_api_key", "session_token", "=", token_slot, "label", "=", "ops", EOA],
                        slots, "task")
    assert call == Call("create_api_key", {"session_token": "plsess_Abc123", "label": "ops"})


@pytest.mark.parametrize("words", [
    ["call"], ["call", "refund_order", "order_id"], ["call", "refund_order", "order_id", "=", "<v40>"],
    ["call", "x", "a", "=", "[", "<v0>"], ["answer", "maybe"], ["result", "status", "=", "ok"],
    ["call", "x", "a", "=", "1", "a", "=", "2"],
])
def test_words_that_are_not_an_action_parse_to_none(words):
    slots = SlotTable()
    slots.slot("ORD-1")
    assert parse_action(words, slots, "task") is None


def test_the_shipped_policy_loads_by_its_repository_name_from_any_folder(tmp_path, monkeypatch):
    from wmstudio.train.agent.agent_config import DEFAULT_POLICY

    monkeypatch.chdir(tmp_path)  # the studio may start its jobs from anywhere
    assert load_policy(DEFAULT_POLICY).tokenizer.eos_token == EOA
    with pytest.raises(InvalidInput, match="policy.json"):
        load_policy(tmp_path)


def test_agent_settings_name_the_bad_field(tmp_path):
    with pytest.raises(InvalidInput, match="minutes"):
        AgentTrainConfig(out=Path("x"), minutes=0)
    with pytest.raises(InvalidInput, match="env"):
        GrpoSettings(env="real-world")
    with pytest.raises(InvalidInput, match="generations"):
        GrpoSettings(generations=1)
    result = CliRunner().invoke(app, ["train-grpo", "--curriculum", "mine", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "curriculum" in result.output and "Traceback" not in result.output
    assert "'mine'" in result.output


def test_the_sft_datas_late_sign_ins_and_second_tries_are_ordinary_play_that_never_shows_a_recovery():
    late_seen = twice_seen = 0
    for index in range(60):
        scenario = make_scenario(("payments", "records", "retail")[index % 3], "sft", index, SFT_SEED_OFFSET + index)
        assert not scenario.steering
        plain, _ = run_episode(expert, scenario, SIMULATOR)
        late, _ = run_episode(signs_in_late, scenario, SIMULATOR)
        twice, _ = run_episode(tries_twice, scenario, SIMULATOR)
        outcomes = [json.loads(step.response) for step in twice.steps]
        if scenario.needs_login:  # refused by the world's own rule (no session yet), then signed in and called again
            late_seen += 1
            first = json.loads(late.steps[0].response)
            assert [s.call.name for s in late.steps] == [scenario.target.name, "login", scenario.target.name]
            assert first["error"] == "UNAUTHENTICATED" and late.steps[-1].response == plain.steps[-1].response
        if outcomes[-1]["status"] == "error":  # refused, and refused again the same way: no retry ever pays here
            twice_seen += 1
            assert [s.call for s in twice.steps][-2:] == [plain.steps[-1].call] * 2
            assert outcomes[-2]["error"] == outcomes[-1]["error"] and twice.final_answer.startswith(COULD_NOT)
        else:
            assert [s.call for s in twice.steps] == [s.call for s in plain.steps]
    assert late_seen >= 5 and twice_seen >= 5
    words = [sum(len(e.words) for e in expert_episodes(30, late_sign_in=share, second_try=share)) for share in (0, 1)]
    assert words[1] > words[0]


@pytest.fixture(scope="module")
def sft_policy(tmp_path_factory, one_thread) -> Path:
    """A policy trained by SFT for 300 steps (about 25 s on one thread)."""
    out = tmp_path_factory.mktemp("agent") / "agent"
    train_agent(AgentTrainConfig(out=out, minutes=5, steps=300, episodes=300), log=lambda _: None)
    return out


@pytest.mark.slow
def test_an_sft_policy_copies_the_tasks_ids_and_the_session_token_on_held_out_scenarios(sft_policy):
    policy = load_policy(sft_policy)
    heldout = split_of(SCENARIOS, HELDOUT)
    estimate = evaluate_policy(policy.act, heldout, None, SIMULATOR)
    assert sum(estimate.truths.values()) >= 0.8 * len(heldout)  # the untrained format alone would score 0
    assert estimate.truths["payments"] >= 4  # login, then the token the login answered with, copied whole
    saved = json.loads((sft_policy / "policy.json").read_text())
    assert saved["kind"] == "agent-policy" and saved["steps"] == 300
    assert saved["heldout"]["successes"] == sum(estimate.truths.values())  # train-agent measured the same play
    card = (sft_policy / "README.md").read_text()  # its model card, written by train-agent
    assert f"**{saved['heldout']['successes']} of {len(heldout)} held-out scenarios" in card
    assert "## Intended use" in card and "## Limitations" in card and str(sft_policy.parent) not in card


@pytest.mark.slow
def test_an_sft_policy_reads_every_worlds_outcomes_as_words_of_its_own(sft_policy):
    vocab = load_policy(sft_policy).tokenizer.get_vocab()
    for word in ("RATE_LIMITED", "TOKEN_EXPIRED", "partial", "INVALID_TOKEN", "ENOENT", "REFUND_WINDOW_EXPIRED"):
        assert word in vocab, word  # outcomes its expert episodes never showed, read as themselves, not as unknown


@pytest.mark.slow
def test_train_grpo_records_metrics_checkpoints_a_policy_and_resumes(sft_policy, tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    db = tmp_path / "studio.db"
    common = ["train-grpo", "--env", "simulator", "--policy", str(sft_policy), "--db", str(db), "--generations", "4",
              "--scenarios-per-step", "2", "--save-every", "2", "--json"]
    first = CliRunner().invoke(app, [*common, "--max-steps", "2"])
    assert first.exit_code == 0, first.output
    result = json.loads(first.stdout)
    progress = [json.loads(line) for line in first.stderr.splitlines() if line.startswith('{"step"')]
    assert [line["step"] for line in progress] == [1, 2] and progress[-1]["max_steps"] == 2  # --json: on stderr
    run_folder = Path(result["run_folder"])
    assert (run_folder / "checkpoints" / "checkpoint-2").is_dir()
    assert load_policy(result["policy_folder"]).act(split_of(SCENARIOS, TRAIN)[0], run_episode(
        expert, split_of(SCENARIOS, TRAIN)[0], SIMULATOR)[0]) is not None
    from wmstudio.store import open_store, run_metrics
    store = open_store(db)
    steps = {m.step for m in run_metrics(store, result["run_id"], "reward")}
    assert steps == {1, 2}
    episodes = (run_folder / "episodes.jsonl").read_text().splitlines()
    assert episodes and "task" in json.loads(episodes[0])
    again = CliRunner().invoke(app, [*common, "--max-steps", "4", "--run-id", str(result["run_id"]), "--resume"])
    assert again.exit_code == 0, again.output
    assert {m.step for m in run_metrics(store, result["run_id"], "reward")} == {1, 2, 3, 4}  # resumed at 3
    assert json.loads(again.stdout)["steps"] == 4


def test_a_turns_world_model_calls_answered_together_equal_the_calls_answered_one_by_one(one_thread):
    from wmstudio.locations import DEFAULT_MODEL
    from wmstudio.model.serving.backends import load_backend
    from wmstudio.model.serving.batching import ForwardBatcher
    from wmstudio.train.agent.environments import WORLD_MODEL, EpisodeWorld
    from wmstudio.train.agent.grpo import Rollout, answer_calls

    backend = load_backend(DEFAULT_MODEL)
    chosen = [s for s in split_of(SCENARIOS, TRAIN) if not s.needs_login][:8]  # enough to overlap: the heads fill
    # most slots now, so each call needs few denoising forwards (4 calls shared at most 1-2 rows a forward)

    def pending() -> list[tuple[Rollout, Call]]:
        return [(Rollout(s, EpisodeWorld(s, WORLD_MODEL, backend), SlotTable(), [], []), s.target) for s in chosen]

    batcher = ForwardBatcher(backend, window_ms=30_000)  # each forward waits for every open call: timing-proof
    together = answer_calls(pending(), batcher)
    assert together == answer_calls(pending(), None)
    assert batcher.stats.largest > 1  # the generations really shared forwards
    assert all(json.loads(text)["status"] in ("ok", "error") for text in together)


@pytest.mark.slow
def test_grpo_raises_the_success_of_the_scenario_it_trains_on(tmp_path, one_thread):
    import dataclasses

    import torch

    from wmstudio.train.agent.grpo import play_group, train_grpo

    warm = tmp_path / "warm"  # 70 SFT steps: the format, and this task sometimes
    train_agent(AgentTrainConfig(out=warm, minutes=5, steps=70, episodes=300), log=lambda _: None)
    scenario = split_of(SCENARIOS, TRAIN)[4]  # a refund: the order id and the amount must be copied
    aside = dataclasses.replace(scenario, id=scenario.id + "-aside", split=HELDOUT)

    def sampled_success(folder: Path) -> float:
        torch.manual_seed(1)
        rollouts = play_group(load_policy(folder), [scenario] * 64, SIMULATOR, None)
        return sum(succeeded(r.scenario, r.trajectory) for r in rollouts) / 64

    before = sampled_success(warm)
    settings = GrpoSettings(env=SIMULATOR, policy=str(warm), max_steps=40, scenarios_per_step=1, generations=16,
                            learning_rate=3e-4, save_every=1000)
    result = train_grpo(settings, tmp_path / "run", None, log=lambda _: None, curriculum=[scenario, aside])
    assert result.steps == 40
    assert sampled_success(Path(result.policy_folder)) >= before + 0.1  # measured 0.28 -> 0.45


def test_a_malformed_action_never_reads_as_reporting_a_refused_task(one_thread):
    from wmstudio.train.agent.agent_policy import MALFORMED, AgentPolicy, new_policy_model, word_tokenizer
    from wmstudio.train.agent.scenarios import COULD_NOT, Trajectory

    tokenizer = word_tokenizer(["call", "answer", "done", "could_not", "="])
    untrained = AgentPolicy(new_policy_model(tokenizer, layers=1, hidden=16, heads=2, ffn=32), tokenizer)
    refused = next(s for s in SCENARIOS if not s.feasible)
    answer = untrained.act(refused, Trajectory())
    assert isinstance(answer, str) and answer.startswith(MALFORMED) and not answer.startswith(COULD_NOT)


@pytest.mark.slow
def test_label_smoothing_leaves_a_policy_whose_sampled_episodes_disagree(tmp_path, one_thread):
    """GRPO learns only from groups whose rollouts disagree: a policy trained to certainty on 20 demonstrations plays
    each training scenario the same way eight times out of eight; with smoothing some groups disagree."""
    import torch

    from wmstudio.train.agent.grpo import play_group

    def disagreeing_groups(folder: Path) -> int:
        torch.manual_seed(0)
        policy, count = load_policy(folder), 0
        for scenario in split_of(SCENARIOS, TRAIN)[:20]:
            outcomes = {succeeded(r.scenario, r.trajectory) for r in play_group(policy, [scenario] * 8, SIMULATOR, None)}
            count += len(outcomes) == 2
        return count

    for smoothing in (0.0, 0.1):
        train_agent(AgentTrainConfig(out=tmp_path / str(smoothing), episodes=20, steps=300, minutes=5,
                                     label_smoothing=smoothing), log=lambda _: None)
    sure, smoothed = disagreeing_groups(tmp_path / "0.0"), disagreeing_groups(tmp_path / "0.1")
    assert smoothed >= sure + 3, (sure, smoothed)  # measured on 60 scenarios: 0 and 20
    with pytest.raises(InvalidInput, match="label_smoothing"):
        AgentTrainConfig(out=tmp_path / "x", label_smoothing=1.0)


def test_the_valid_call_rate_counts_only_calls_to_the_worlds_tools_and_a_policy_naming_none_is_refused():
    """Issue 39: the valid-call rate reached 1.0 while the agent only called a tool the world lacked."""
    import dataclasses

    from wmstudio.train.agent.agent_config import DEFAULT_POLICY
    from wmstudio.train.agent.grpo import play_group
    from wmstudio.train.agent.scenarios import policy_words, tool_problems

    scenario = split_of(SCENARIOS, TRAIN)[4]  # a refund on the retail world
    tools = [dataclasses.replace(tool, name=f"shop_{tool.name}") for tool in scenario.world.tools]
    foreign = dataclasses.replace(scenario, world=dataclasses.replace(scenario.world, tools=tools))
    policy = load_policy(DEFAULT_POLICY)
    [home] = play_group(policy, [scenario], SIMULATOR, None, sample=False)
    [away] = play_group(policy, [foreign], SIMULATOR, None, sample=False)
    assert home.trajectory.steps and home.valid_actions == home.actions  # its calls go to the world's tools
    called = len(away.trajectory.steps)
    assert called and away.valid_actions == away.actions - called  # the same calls, to tools this world lacks
    words = policy_words(DEFAULT_POLICY)
    assert tool_problems([scenario], words) == []
    [problem] = tool_problems([foreign], words, "'shop'")
    assert problem.path == "policy" and "names none of the tools of the worlds of 'shop' (shop_cancel_order" in \
        problem.message and "wmstudio train-agent" in problem.message
    assert tool_problems([foreign], None) == []  # a chat model spells any name
    settings = GrpoSettings(env=SIMULATOR, max_steps=1, scenarios_per_step=1, generations=2)
    with pytest.raises(InvalidInput, match="policy: the policy's vocabulary names none of the tools"):
        from wmstudio.train.agent.grpo import train_grpo
        train_grpo(settings, Path("/nonexistent-never-written"), None, log=lambda _: None, curriculum=[foreign])
