"""The CPU a GRPO step's rollouts cost in the world model, with and without the answer cache (model/generation/answer_cache.py).

Plays the steps a `train-grpo` run on the demo curriculum plays (the default settings: 4 training scenarios a step,
8 rollouts each, the shipped word-level policy sampling at temperature 1, the shipped world model answering
greedily with grounding `none`), the same scenarios and the same seeds in both arms, one cache kept across the
steps as a run keeps it. Prints, per arm, the CPU seconds a step (process time, all threads), the world-model calls
a step and how many the cache answered, and whether both arms' episodes came out the same. The rollouts are what a
step spends its CPU on (98.5% measured in issue 39); the policy's gradient step is not in these figures.

    python benchmarks/grpo_rollout_bench.py [--steps 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wmstudio.model.generation.answer_cache import AnswerCache  # noqa: E402
from wmstudio.model.serving.backends import load_backend  # noqa: E402
from wmstudio.train.agent.agent_config import DEFAULT_POLICY, GrpoSettings  # noqa: E402
from wmstudio.train.agent.agent_policy import load_policy  # noqa: E402
from wmstudio.train.agent.environments import WORLD_MODEL  # noqa: E402
from wmstudio.train.agent.grpo import play_group  # noqa: E402
from wmstudio.train.agent.scenarios import TRAIN, demo_scenarios, split_of  # noqa: E402


def play(steps: int, cached: bool, backend, policy, scenarios, settings: GrpoSettings) -> dict:
    """Play `steps` steps; CPU seconds and calls a step, cache hits, and each episode's responses."""
    cache = AnswerCache() if cached else None
    picker = random.Random(0)
    seconds, calls, episodes = [], [], []
    for step in range(steps):
        torch.manual_seed(step)
        group = [s for s in picker.sample(scenarios, settings.scenarios_per_step) for _ in range(settings.generations)]
        started = time.process_time()
        rollouts = play_group(policy, group, WORLD_MODEL, backend, temperature=settings.temperature, cache=cache)
        seconds.append(time.process_time() - started)
        calls.append(sum(len(r.trajectory.steps) for r in rollouts))
        episodes += [[s.response for s in r.trajectory.steps] for r in rollouts]
    return {"cpu_seconds_per_step": [round(s, 1) for s in seconds], "calls_per_step": calls,
            "cache_hits": cache.hits if cache else 0, "episodes": episodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = GrpoSettings()
    backend, policy = load_backend(), load_policy(DEFAULT_POLICY)
    scenarios = split_of(demo_scenarios(), TRAIN)
    arms = {"no cache": play(args.steps, False, backend, policy, scenarios, settings),
            "cache": play(args.steps, True, backend, policy, scenarios, settings)}
    same = arms["no cache"].pop("episodes") == arms["cache"].pop("episodes")
    report = {"steps": args.steps, "scenarios_per_step": settings.scenarios_per_step,
              "generations": settings.generations, "same_episodes": same, **arms}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.steps} steps of {settings.scenarios_per_step} scenarios x {settings.generations} rollouts in the "
          f"world model; the same episodes in both arms: {same}")
    for name, arm in arms.items():
        mean = sum(arm["cpu_seconds_per_step"]) / len(arm["cpu_seconds_per_step"])
        print(f"{name:>9}: {mean:.1f} CPU-s a step {arm['cpu_seconds_per_step']}, world-model calls a step "
              f"{arm['calls_per_step']}, from the cache {arm['cache_hits']}")


if __name__ == "__main__":
    main()
