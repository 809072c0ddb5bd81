"""Off-policy evaluation: a policy's success rate estimated from world-model rollouts alone, beside the truth.

The ADWM point: if a world model answers like the real environment, a policy can be scored without it. Each
scenario is played in the chosen environment (the estimate, with a Wilson 95% interval) and, where the world has a
simulator, again against the simulator (the ground truth on the same scenarios)."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.serving.backends import Backend
from wmstudio.model.serving.remote_world_model import RemoteWorldModel
from wmstudio.train.agent.adversarial import scenario_family
from wmstudio.train.agent.environments import HYBRID, SIMULATOR, WORLD_MODEL, Policy, run_episode
from wmstudio.train.agent.scenarios import Scenario, succeeded
from wmstudio.world.grounding import NONE, Grounding, parse_grounding

Z95 = 1.959964


def wilson_interval(successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate (sound at 0 and 1, unlike the normal approximation)."""
    if total == 0:
        return 0.0, 1.0
    rate = successes / total
    centre = (rate + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Outcome:
    """One scenario played: its world and family, and whether it succeeded in the evaluated environment and in the
    simulator."""

    world: str
    family: str
    success: bool
    truth: bool


@dataclass
class Estimate:
    """The scenarios played in the evaluated environment and in the simulator, and who answered the calls."""

    env: str
    grounding: Grounding = NONE
    outcomes: list[Outcome] = field(default_factory=list)
    answered_by_model: int = 0
    calls: int = 0
    seconds: float = 0.0

    @property
    def episodes(self) -> dict[str, int]:
        """Scenarios played per world."""
        return dict(Counter(o.world for o in self.outcomes))

    @property
    def successes(self) -> dict[str, int]:
        """Successes in the evaluated environment per world."""
        return dict(Counter(o.world for o in self.outcomes if o.success))

    @property
    def truths(self) -> dict[str, int]:
        """Successes in the simulator per world."""
        return dict(Counter(o.world for o in self.outcomes if o.truth))

    def summary(self, worlds: list[str] | None = None, family: str | None = None) -> dict[str, Any]:
        """Episodes, the estimate and the ground truth with their 95% intervals, over the given worlds (all by
        default) and family (any by default)."""
        chosen = [o for o in self.outcomes
                  if (worlds is None or o.world in worlds) and (family is None or o.family == family)]
        n, hits, truth = len(chosen), sum(o.success for o in chosen), sum(o.truth for o in chosen)
        low, high = wilson_interval(hits, n)
        true_low, true_high = wilson_interval(truth, n)
        return {"episodes": n, "estimate": round(hits / n, 4) if n else None, "ci95": [round(low, 4), round(high, 4)],
                "ground_truth": round(truth / n, 4) if n else None,
                "ground_truth_ci95": [round(true_low, 4), round(true_high, 4)]}


def evaluate_policy(policy: Policy, scenarios: list[Scenario], backend: Backend | RemoteWorldModel | None,
                    env: str = WORLD_MODEL, progress: Callable[[int, int], None] | None = None,
                    grounding: Grounding = NONE) -> Estimate:
    """Play every scenario in `env` (the world model's prompts under `grounding`: `none` reads no simulator) and in
    the simulator; record each one's world, family and successes."""
    started = time.perf_counter()
    estimate = Estimate(env, parse_grounding(grounding))
    settings = SamplerSettings(grounding=estimate.grounding)
    for i, scenario in enumerate(scenarios):
        trajectory, played = run_episode(policy, scenario, env, backend, settings=settings)
        truth, _ = run_episode(policy, scenario, SIMULATOR) if env != SIMULATOR else (trajectory, played)
        estimate.outcomes.append(Outcome(scenario.world.name, scenario_family(scenario),
                                         succeeded(scenario, trajectory), succeeded(scenario, truth)))
        estimate.answered_by_model += played.answered_by[WORLD_MODEL]
        estimate.calls += sum(played.answered_by.values())
        if progress is not None:
            progress(i + 1, len(scenarios))
    estimate.seconds = time.perf_counter() - started
    return estimate


def report(policy_name: str, curriculum: str, split: str, estimate: Estimate) -> dict[str, Any]:
    """The `wmstudio evaluate` JSON: overall figures, then per world, per family (a curriculum whose scenarios name
    theirs, as `adversarial`'s do), and the share of calls the model answered."""
    data = {"policy": policy_name, "curriculum": curriculum, "split": split, "env": estimate.env,
            "grounding": estimate.grounding, **estimate.summary()}
    data["per_world"] = {world: estimate.summary([world]) for world in sorted(estimate.episodes)}
    families = sorted({o.family for o in estimate.outcomes if o.family})
    if families:
        data["per_family"] = {family: estimate.summary(family=family) for family in families}
    if estimate.env == HYBRID and estimate.calls:
        data["model_answered_share"] = round(estimate.answered_by_model / estimate.calls, 4)
    data["seconds"] = round(estimate.seconds, 1)
    return data
