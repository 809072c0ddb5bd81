"""`wmstudio train-grpo`: GRPO (TRL's GRPOTrainer) of an agent policy on a curriculum, the world model as the
environment.

TRL's `rollout_func` plays the episodes: per turn, every active rollout's policy writes its next action, all of that
turn's calls are answered together (on an accelerator the world model's generations share their denoising
forwards), the answers are spliced into the completions as environment tokens (`env_mask` 0: never trained on),
and so on until each rollout answers or runs out of turns. The scenario's success condition over the trajectory is the reward, with small
format terms (actions that parse, a final answer). Metrics and sample episodes go to the caller's reporter."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from wmstudio.model.generation.answer_cache import AnswerCache
from wmstudio.model.serving.backends import Backend
from wmstudio.model.serving.batching import ForwardBatcher
from wmstudio.model.serving.remote_world_model import RemoteWorldModel
from wmstudio.problems import InvalidInput
from wmstudio.train.agent.adversarial import scenario_family
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.agent_policy import AgentPolicy, load_policy
from wmstudio.train.agent.chat_policy import ChatPolicy
from wmstudio.train.agent.environments import MAX_TURNS, SIMULATOR, EpisodeWorld
from wmstudio.train.agent.off_policy import evaluate_policy
from wmstudio.train.agent.reachability import Reach, probe_scenarios
from wmstudio.train.agent.run_files import complete_checkpoints
from wmstudio.train.agent.scenarios import (
    MALFORMED,
    TRAIN,
    Scenario,
    Step,
    Trajectory,
    batch_problems,
    demo_scenarios,
    heldout_scored,
    policy_words,
    split_of,
    succeeded,
    tool_problems,
)
from wmstudio.world.spec import Call

MAX_COMPLETION_TOKENS = 320  # actions plus the tools' answers (the longest demo episode takes about 110)
FORMAT_WEIGHT = 0.1
INVALID_ACTION = json.dumps({"error": "INVALID_ACTION", "message": "the action did not parse", "status": "error"})
METRIC_NAMES = {  # TRL's log keys -> the names the studio plots
    "reward": "reward", "rewards/success/mean": "success", "kl": "kl", "completions/mean_length": "completion_length",
    "rewards/valid_actions/mean": "valid_call_rate", "loss": "loss",
}

TrainablePolicy = AgentPolicy | ChatPolicy  # both play episodes turn by turn: begin, sample_turns, observe
MetricsSink = Callable[[int, dict[str, float]], None]
EpisodesSink = Callable[[int, list[dict[str, Any]]], None]


@dataclass
class Rollout:
    """One episode being played inside a GRPO step: the policy's reading of it and the token streams TRL needs."""

    scenario: Scenario
    world: EpisodeWorld
    episode: Any  # the policy's own record of the episode (words and slots, or chat messages)
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    trajectory: Trajectory = field(default_factory=Trajectory)
    actions: int = 0
    valid_actions: int = 0
    done: bool = False
    transcript: list[str] = field(default_factory=list)


def play_group(policy: TrainablePolicy, scenarios: list[Scenario], env: str,
               backend: Backend | RemoteWorldModel | None,
               batcher: ForwardBatcher | None = None, temperature: float = 1.0, sample: bool = True,
               cache: AnswerCache | None = None) -> list[Rollout]:
    """Play one episode per scenario (repeats allowed: a GRPO group), the policy sampling its actions turn by turn
    and each turn's calls answered together in `env` (greedy world-model answers from `cache` when it has them)."""
    rollouts = []
    for scenario in scenarios:
        episode, prompt_ids = policy.begin(scenario)
        rollouts.append(Rollout(scenario, EpisodeWorld(scenario, env, backend, cache=cache), episode, prompt_ids))
    for _ in range(MAX_TURNS):
        active = [r for r in rollouts if not r.done]
        if not active:
            break
        turns = policy.sample_turns([r.episode for r in active], sample=sample, temperature=temperature)
        calls: list[tuple[Rollout, Call]] = []
        for rollout, turn in zip(active, turns):
            _spliced(rollout, turn.ids, turn.logprobs, trained=True)
            rollout.actions += 1
            if turn.action is None:
                rollout.transcript.append(f"{MALFORMED} {turn.text}")
                rollout.done = True
            elif isinstance(turn.action, str):
                rollout.valid_actions += 1
                rollout.trajectory.final_answer = turn.action
                rollout.transcript.append(f"answer: {turn.action}")
                rollout.done = True
            else:  # a call counts as valid only to a tool the world has
                rollout.valid_actions += any(tool.name == turn.action.name for tool in rollout.scenario.world.tools)
                calls.append((rollout, turn.action))
        for (rollout, call), response in zip(calls, answer_calls(calls, batcher)):
            rollout.trajectory.steps.append(Step(call, response))
            rollout.transcript.append(f"call {call.name} {json.dumps(call.arguments, ensure_ascii=False)}")
            rollout.transcript.append(f"  -> {response}")
            shown = policy.observe(rollout.episode, response)
            _spliced(rollout, shown, [0.0] * len(shown), trained=False)
            if len(rollout.completion_ids) >= MAX_COMPLETION_TOKENS:
                rollout.done = True
    return rollouts


def answer_calls(calls: list[tuple[Rollout, Call]], batcher: ForwardBatcher | None) -> list[str]:
    """Each rollout's world answers its call; with a batcher the world model's generations run at once and share
    one forward per denoising step (a call the world cannot lay out gets an API-style error). Calls to a world model
    served over HTTP go out at once, for the server's batcher to share."""
    if len(calls) >= 2 and any(isinstance(rollout.world.backend, RemoteWorldModel) for rollout, _ in calls):
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            return list(pool.map(lambda item: item[0].world.answer(item[1]), calls))
    if batcher is None or len(calls) < 2:
        return [rollout.world.answer(call) for rollout, call in calls]

    def answer(item: tuple[Rollout, Call]) -> str:
        rollout, call = item
        with batcher.session() as shared:
            rollout.world.backend = shared
            try:
                return rollout.world.answer(call)
            finally:
                rollout.world.backend = batcher.backend

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(answer, calls))


def _spliced(rollout: Rollout, ids: list[int], logprobs: list[float], trained: bool) -> None:
    room = MAX_COMPLETION_TOKENS - len(rollout.completion_ids)
    ids, logprobs = ids[:room], logprobs[:room]
    rollout.completion_ids += ids
    rollout.logprobs += logprobs
    rollout.env_mask += [int(trained)] * len(ids)


def success(completions, succeeded_flags, **_) -> list[float]:
    """Reward: the scenario's success condition over the trajectory (1 or 0)."""
    return [float(flag) for flag in succeeded_flags]


def valid_actions(completions, valid_share, **_) -> list[float]:
    """Reward (format): the share of the rollout's actions that parse as calls or answers (0 for a rollout that
    made no call: answering at once must not pay)."""
    return list(valid_share)


def answered(completions, gave_answer, **_) -> list[float]:
    """Reward (format): the rollout ended with a final answer after making at least one call."""
    return [float(flag) for flag in gave_answer]


@dataclass
class GrpoResult:
    """What a run did: steps, time, and the held-out success in the simulator before and after."""

    run_folder: str
    policy_folder: str
    env: str
    steps: int
    seconds: float
    heldout_before: float | None  # None: no held-out scenario has a simulator to judge it
    heldout_after: float | None
    heldout_episodes: int
    heldout_by_family: dict[str, list[float | None]] = field(default_factory=dict)  # family -> [before, after]
    model_answered_share: float | None = None
    reach: dict[str, Any] | None = None  # the probe before the run (reachability.Reach), None when none ran

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def train_grpo(settings: GrpoSettings, folder: Path, backend: Backend | RemoteWorldModel | None, on_metrics: MetricsSink | None = None,
               on_episodes: EpisodesSink | None = None, log: Callable[[str], None] = print,
               curriculum: list[Scenario] | None = None) -> GrpoResult:
    """Run GRPO from `settings.policy` (or the run's newest checkpoint with `resume`) on the curriculum's training
    scenarios (the demo ones when none are given), checkpoints and the final policy under `folder`; the held-out
    success in the simulator is measured before and after."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(settings.threads)
    started = time.perf_counter()
    start = load_policy(settings.policy)
    scenarios = {s.id: s for s in (curriculum if curriculum is not None else demo_scenarios())}
    train_ids = [s.id for s in split_of(list(scenarios.values()), TRAIN)]
    heldout = heldout_scored(list(scenarios.values()))
    problems = batch_problems(list(scenarios.values()), settings.scenarios_per_step, repr(settings.curriculum))
    problems += tool_problems(list(scenarios.values()), policy_words(settings.policy), repr(settings.curriculum))
    if problems:
        raise InvalidInput(problems)
    batcher = world_model_batcher(backend, settings.env)
    cache = AnswerCache() if settings.env != SIMULATOR else None  # the world model answers greedily: once a call
    reach = None
    if settings.min_reachable and not settings.resume:
        reach = probe_reach(start, [scenarios[i] for i in train_ids], settings, backend, cache)
        log(reach.text())
        if problems := reach.problems(settings.min_reachable, repr(settings.curriculum)):
            raise InvalidInput(problems)
        if warning := reach.warnings(settings.min_reachable):
            log(warning)
    before, families_before = _heldout_success(start, heldout)
    log(f"policy {settings.policy}: held-out success in the simulator {_success_text(before)}")
    counts = {"model": 0, "calls": 0}

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, Any]:
        policy = start.with_model(trainer.model)
        was_training = trainer.model.training
        trainer.model.eval()
        try:
            rollouts = play_group(policy, [scenarios[p] for p in prompts], settings.env, backend, batcher,
                                  settings.temperature, cache=cache)
        finally:
            trainer.model.train(was_training)
        for rollout in rollouts:
            counts["model"] += rollout.world.answered_by["world-model"]
            counts["calls"] += sum(rollout.world.answered_by.values())
        flags = [succeeded(r.scenario, r.trajectory) for r in rollouts]
        if on_episodes is not None:
            on_episodes(trainer.state.global_step + 1, [
                {"scenario": r.scenario.id, "task": r.scenario.task, "transcript": r.transcript,
                 "reward": float(ok), "success": bool(ok)} for r, ok in list(zip(rollouts, flags))[:4]])
        return {"prompt_ids": [r.prompt_ids for r in rollouts],
                "completion_ids": [r.completion_ids or [start.tokenizer.eos_token_id] for r in rollouts],
                "logprobs": [r.logprobs or [0.0] for r in rollouts],
                "env_mask": [r.env_mask or [1] for r in rollouts],
                "succeeded_flags": flags,
                "valid_share": [r.valid_actions / r.actions if r.trajectory.steps else 0.0 for r in rollouts],
                "gave_answer": [bool(r.trajectory.final_answer and r.trajectory.steps) for r in rollouts]}

    class Report(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if on_metrics is not None and logs:
                values = {ours: float(logs[theirs]) for theirs, ours in METRIC_NAMES.items() if theirs in logs}
                if values:
                    on_metrics(state.global_step, values)

        def on_step_end(self, args, state, control, **kwargs):
            if time.perf_counter() - started > settings.minutes * 60:
                control.should_training_stop = True
                control.should_save = True

    batch = settings.scenarios_per_step * settings.generations
    on_gpu = torch.cuda.is_available() and isinstance(start, ChatPolicy)  # the small word policy trains on the CPU
    config = GRPOConfig(
        output_dir=str(folder / "checkpoints"), use_cpu=not on_gpu, bf16=on_gpu, fp16=False, report_to="none",
        per_device_train_batch_size=batch, gradient_accumulation_steps=1, num_generations=settings.generations,
        max_completion_length=MAX_COMPLETION_TOKENS, learning_rate=settings.learning_rate, beta=settings.beta,
        temperature=settings.temperature, max_steps=settings.max_steps, logging_steps=1, save_strategy="steps",
        save_steps=settings.save_every, seed=settings.seed, reward_weights=[1.0, FORMAT_WEIGHT, FORMAT_WEIGHT],
        lr_scheduler_type="constant", warmup_steps=0, disable_tqdm=True, dataloader_num_workers=0,
        shuffle_dataset=True, mask_truncated_completions=False, loss_type="grpo")
    trainer = GRPOTrainer(model=start.model, reward_funcs=[success, valid_actions, answered], args=config,
                          train_dataset=Dataset.from_dict({"prompt": train_ids}), processing_class=start.tokenizer,
                          rollout_func=rollout_func, callbacks=[Report()], peft_config=lora_config(settings.lora_rank))
    checkpoint = latest_checkpoint(folder) if settings.resume else None
    if settings.resume and checkpoint is None:
        log("no checkpoint to resume from: starting from the policy")
    with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its logs: stdout stays the result's
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if trainer.state.global_step == 0:
        raise RuntimeError(f"trained 0 steps: the trainer built no batch from {len(train_ids)} training scenarios "
                           f"at {settings.scenarios_per_step} a step; no policy was saved")
    final = trainer.model.merge_and_unload() if settings.lora_rank else trainer.model  # LoRA folded in
    trained = start.with_model(final)
    trained.name = "grpo"
    trained.model.eval()
    policy_folder = folder / "policy"
    after, families_after = _heldout_success(trained, heldout)
    by_family = {name: [_rounded(families_before.get(name)), _rounded(share)] for name, share in families_after.items()}
    if trainer.accelerator.is_main_process:
        trained.save(policy_folder, {"kind": "agent-policy", "trained_by": "wmstudio train-grpo", "env": settings.env,
                                     "start": settings.policy, "steps": trainer.state.global_step,
                                     "heldout_success_before": before, "heldout_success_after": after,
                                     "heldout_by_family": by_family})
    log(f"held-out success in the simulator: {_success_text(before)} -> {_success_text(after)}")
    if cache is not None:
        log(f"world model: {cache.summary()}")
    share = counts["model"] / counts["calls"] if counts["calls"] else None
    return GrpoResult(str(folder), str(policy_folder), settings.env, trainer.state.global_step,
                      round(time.perf_counter() - started, 1), _rounded(before), _rounded(after), len(heldout),
                      by_family, None if share is None else round(share, 4), None if reach is None else reach.to_json())


def probe_reach(policy: TrainablePolicy, train: list[Scenario], settings: GrpoSettings,
                backend: Backend | RemoteWorldModel | None, cache: AnswerCache | None = None) -> Reach:
    """Play one group (settings.generations episodes, sampled at the run's temperature) of each of up to
    PROBE_SCENARIOS training scenarios (the families taking turns), in the simulator where each of their worlds has
    one (else in the run's environment), and count each family's groups with a success."""
    chosen = probe_scenarios(train)
    env = SIMULATOR if all(s.world.simulator for s in chosen) else settings.env
    reach = Reach(settings.temperature, settings.generations)
    for scenario in chosen:
        group = play_group(policy, [scenario] * settings.generations, env, backend if env != SIMULATOR else None,
                           temperature=settings.temperature, cache=cache)
        reach.add(scenario_family(scenario), sum(succeeded(r.scenario, r.trajectory) for r in group))
    return reach


def distributed_rank() -> int:
    """This process's rank under torchrun (0 alone); each process is pinned to its own GPU, where its policy and
    its own copy of the world model live."""
    local = os.environ.get("LOCAL_RANK")
    if local is not None and torch.cuda.is_available():
        torch.cuda.set_device(int(local))
    return int(os.environ.get("RANK", "0"))


def lora_config(rank: int) -> Any:
    """LoRA adapters of `rank` on every linear layer (peft), or None to train all the weights."""
    if not rank:
        return None
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def world_model_batcher(backend: Backend | RemoteWorldModel | None, env: str) -> ForwardBatcher | None:
    """The batcher a turn's world-model calls share their forwards through: on an accelerator only. On this CPU a
    turn of 32 rollouts took 9.6 s batched against 7.9 s one call after another (the serve benchmark's finding)."""
    if backend is None or env == SIMULATOR or isinstance(backend, RemoteWorldModel) or backend.device.type == "cpu":
        return None
    return ForwardBatcher(backend)


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete `checkpoint-N` under the run folder's checkpoints (one a kill cut short has no
    trainer_state.json yet), or None."""
    found = complete_checkpoints(folder)
    return found[-1] if found else None


def _heldout_success(policy: TrainablePolicy, heldout: list[Scenario]) -> tuple[float | None, dict[str, float]]:
    """The policy's success on `heldout` judged by the simulators, overall and by family (a scenario of no family:
    by its world); (None, {}) when there is none to judge."""
    if not heldout:
        return None, {}
    estimate = evaluate_policy(policy.act, heldout, None, SIMULATOR)
    groups: dict[str, list[bool]] = {}
    for outcome in estimate.outcomes:
        groups.setdefault(outcome.family or outcome.world, []).append(outcome.truth)
    shares = {name: sum(truths) / len(truths) for name, truths in sorted(groups.items())}
    return sum(estimate.truths.values()) / max(1, sum(estimate.episodes.values())), shares


def _success_text(share: float | None) -> str:
    return "unmeasured (no simulator: no held-out scenario's world has one)" if share is None else f"{share:.1%}"


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 4)
