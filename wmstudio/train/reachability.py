"""Whether GRPO can learn a curriculum from a policy: groups of sampled episodes counted per family before a run.

GRPO learns from a group only where its episodes' rewards differ: a group that all fails (or all succeeds) gives
every episode the same advantage, zero. So before training, a probe samples groups as a step would and counts, per
family of the curriculum (the adversarial curriculum's transient, expired, partial and control; one family where the
scenario ids name none), the groups with at least one success. A family too few of whose groups succeeded cannot be
learned from this policy at this temperature, and the run is refused saying so (a policy that never retries after
RATE_LIMITED gets no reward for retrying, however long it trains)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import Problem
from wmstudio.train.adversarial import scenario_family
from wmstudio.train.scenarios import Scenario

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

    def problems(self, minimum: float, curriculum: str = "the curriculum") -> list[Problem]:
        """Why GRPO could not learn some family of `curriculum` from this policy: fewer than `minimum` of its groups
        had any success. Empty when every family reaches it (or `minimum` is 0)."""
        short = [family for family in sorted(self.groups) if minimum and self.share(family) < minimum]
        if not short:
            return []
        shown = ", ".join(f"{family} {self.reached[family]} of {self.groups[family]} groups" for family in short)
        return [Problem("min_reachable", f"sampled before the run, the policy succeeded in too few groups of "
                                         f"{curriculum} to learn from ({shown}; at least {minimum:.0%} needed): "
                                         "GRPO learns only from a group whose episodes differ. Start from a policy "
                                         "that sometimes succeeds there, raise --temperature, or set "
                                         "--min-reachable 0 to train anyway")]

    def to_json(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "generations": self.generations,
                "families": {family: {"groups": self.groups[family], "reached": self.reached[family],
                                      "differing": self.mixed[family]} for family in sorted(self.groups)}}
