"""The shipped recovery agents: `agent-ordinary` (SFT on ordinary episodes only) sometimes tries again when sampled,
so GRPO can reach every adversarial family from it, while greedy it recovers from few and stops where the world
refuses; `agent-recovery` (GRPO from it in the MDLM world model, on the curriculum before the `refused` family)
reproduces its card's held-out figure on the families it was trained for, and tries every refusal again."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import MODELS_DIR
from wmstudio.train.agent.adversarial import REFUSED, adversarial_scenarios, scenario_family
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.agent_policy import load_policy
from wmstudio.train.agent.environments import SIMULATOR
from wmstudio.train.agent.grpo import probe_reach
from wmstudio.train.agent.off_policy import evaluate_policy, report
from wmstudio.train.agent.scenarios import HELDOUT, TRAIN, split_of

pytestmark = pytest.mark.usefixtures("one_thread")
ORDINARY, RECOVERY = MODELS_DIR / "agent-ordinary", MODELS_DIR / "agent-recovery"


def _evaluate(policy, tmp_path) -> dict:
    result = CliRunner().invoke(app, ["evaluate", "--policy", str(policy), "--curriculum", "adversarial", "--split",
                                      "heldout", "--env", "simulator", "--db", str(tmp_path / "s.db"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _recovery_families(policy) -> dict:
    """The policy judged by the simulators on the held-out scenarios of the families before `refused` (38)."""
    heldout = [s for s in split_of(adversarial_scenarios(), HELDOUT) if scenario_family(s) != REFUSED]
    return report(str(policy), "adversarial", HELDOUT,
                  evaluate_policy(load_policy(policy).act, heldout, None, SIMULATOR))


def test_the_ordinary_start_reaches_every_family_when_sampled_but_recovers_little_greedily(tmp_path):
    settings = GrpoSettings(curriculum="adversarial", policy=str(ORDINARY))
    reach = probe_reach(load_policy(ORDINARY), split_of(adversarial_scenarios(), TRAIN), settings, None)
    assert all(reach.share(family) >= settings.min_reachable for family in reach.groups), reach.text()
    greedy = _evaluate(ORDINARY, tmp_path)
    assert greedy["per_family"]["control"]["ground_truth"] == 1.0
    assert greedy["per_family"][REFUSED]["ground_truth"] >= 0.8  # it stops where the world refuses
    assert _recovery_families(ORDINARY)["ground_truth"] <= 0.4  # and recovers from few failed first tries


def test_the_recovery_agent_reproduces_its_cards_figure_and_learned_the_retry_reflex(tmp_path):
    card = (RECOVERY / "README.md").read_text()
    claimed = float(re.search(r"\*\*([0-9.]+)% of the 38 held-out adversarial scenarios", card).group(1))
    start = float(re.search(r"its start had ([0-9.]+)%", card).group(1))
    assert round(_recovery_families(RECOVERY)["ground_truth"] * 100, 1) == claimed
    assert claimed >= start + 20
    refused = _evaluate(RECOVERY, tmp_path)["per_family"][REFUSED]["ground_truth"]
    assert refused <= 0.1  # trained where every retry paid, it tries the world's refusals again
