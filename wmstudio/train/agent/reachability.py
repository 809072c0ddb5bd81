"""Whether GRPO can learn a curriculum from a policy: groups of sampled episodes counted per family before a run.

GRPO learns from a group only where its episodes' rewards differ: a group that all fails (or all succeeds) gives
every episode the same advantage, zero. So before training, a probe samples groups as a step would and counts, per
family of the curriculum (the adversarial curriculum's transient, expired, partial and control; one family where the
scenario ids name none), the groups with at least one success. A family too few of whose groups succeeded cannot be
learned from this policy at this temperature (a policy that never retries after RATE_LIMITED gets no reward for
retrying, however long it trains): the run says so, and is refused when that holds for every family but the controls
(nothing left to learn)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import Problem
from wmstudio.train.agent.adversarial import CONTROL, scenario_family
from wmstudio.train.agent.scenarios import Scenario

PROBE_SCENARIOS = 24  # training scenarios the probe plays, the curriculum's families taking turns
ALL = "all"  # the family of scenarios whose ids name none


def probe_scenarios(train: list[Scenario], count: int = PROBE_SCENARIOS) -> list[Scenario]:
    """Up to `count` of the training scenarios, the families taking turns (each family's in the order given)."""
    families: dict[str, list[Scenario]] = {}
    for scenario in train:
        families.setdefault(scenario_family(scenario), []).append(scenario)
    queues = list(families.values())
    chosen: list[Scenario] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop(0))
    return chosen


@dataclass
class Reach:
    """Per family: the groups probed, those with at least one success, and those whose episodes differ."""

    temperature: float
    generations: int
    groups: Counter = field(default_factory=Counter)
    reached: Counter = field(default_factory=Counter)
    mixed: Counter = field(default_factory=Counter)

    def add(self, family: str, successes: int) -> None:
        """Count one group of `generations` episodes of `family`, `successes` of which succeeded."""
        family = family or ALL
        self.groups[family] += 1
        self.reached[family] += successes > 0
        self.mixed[family] += 0 < successes < self.generations

    def share(self, family: str) -> float:
        """The share of the family's groups with at least one success."""
        return self.reached[family] / self.groups[family] if self.groups[family] else 0.0

    def text(self) -> str:
        """One line: each family's groups with a success and with differing episodes."""
        parts = [f"{family} {self.reached[family]}/{self.groups[family]} (differing {self.mixed[family]})"
                 for family in sorted(self.groups)]
        return (f"reach at temperature {self.temperature:g}, {self.generations} episodes a group, groups with a "
                f"success: {', '.join(parts)}")

    def short(self, minimum: float) -> list[str]:
        """The families fewer than `minimum` of whose groups had any success (none when `minimum` is 0)."""
        return [family for family in sorted(self.groups) if minimum and self.share(family) < minimum]

    def problems(self, minimum: float, curriculum: str = "the curriculum") -> list[Problem]:
        """Why GRPO could not learn `curriculum` from this policy: every family that needs more than the policy
        does (all but the controls) had fewer than `minimum` of its groups with a success. Empty when some such
        family is reachable (the others are named by `warnings`), or `minimum` is 0."""
        short = self.short(minimum)
        learnable = [family for family in sorted(self.groups) if family != CONTROL]
        if not short or any(family not in short for family in learnable):
            return []
        return [Problem("min_reachable", f"sampled before the run, the policy succeeded in too few groups of "
                                         f"{curriculum} to learn from ({self._shown(short)}; at least {minimum:.0%} "
                                         "needed): GRPO learns only from a group whose episodes differ. Start from "
                                         "a policy that sometimes succeeds there, raise --temperature, or set "
                                         "--min-reachable 0 to train anyway")]

    def warnings(self, minimum: float) -> str:
        """A line naming the families GRPO will not learn in a run that goes ahead (empty when none)."""
        short = self.short(minimum)
        return (f"GRPO will not learn {', '.join(short)} from this policy ({self._shown(short)} reached; at least "
                f"{minimum:.0%} needed): the rest of the curriculum trains") if short else ""

    def _shown(self, families: list[str]) -> str:
        return ", ".join(f"{family} {self.reached[family]} of {self.groups[family]} groups" for family in families)

    def to_json(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "generations": self.generations,
                "families": {family: {"groups": self.groups[family], "reached": self.reached[family],
                                      "differing": self.mixed[family]} for family in sorted(self.groups)}}
