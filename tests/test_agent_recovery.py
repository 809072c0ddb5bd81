"""The shipped recovery agents: `agent-ordinary` (SFT on ordinary episodes only) sometimes tries again when sampled,
so GRPO can reach every adversarial family from it, while greedy it recovers from few; `agent-recovery` (GRPO from
it in the MDLM world model) reproduces its card's held-out figure with `wmstudio evaluate`."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import MODELS_DIR
from wmstudio.train.agent.adversarial import adversarial_scenarios
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.agent_policy import load_policy
from wmstudio.train.agent.grpo import probe_reach
from wmstudio.train.agent.scenarios import TRAIN, split_of

pytestmark = pytest.mark.usefixtures("one_thread")
ORDINARY, RECOVERY = MODELS_DIR / "agent-ordinary", MODELS_DIR / "agent-recovery"


def _evaluate(policy, tmp_path) -> dict:
    result = CliRunner().invoke(app, ["evaluate", "--policy", str(policy), "--curriculum", "adversarial", "--split",
                                      "heldout", "--env", "simulator", "--db", str(tmp_path / "s.db"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_ordinary_start_reaches_every_family_when_sampled_but_recovers_little_greedily(tmp_path):
    settings = GrpoSettings(curriculum="adversarial", policy=str(ORDINARY))
    reach = probe_reach(load_policy(ORDINARY), split_of(adversarial_scenarios(), TRAIN), settings, None)
    assert all(reach.share(family) >= settings.min_reachable for family in reach.groups), reach.text()
    greedy = _evaluate(ORDINARY, tmp_path)
    assert greedy["ground_truth"] <= 0.6 and greedy["per_family"]["control"]["ground_truth"] == 1.0


def test_the_recovery_agent_reproduces_its_cards_figure_and_beats_its_start(tmp_path):
    card = (RECOVERY / "README.md").read_text()
    claimed = float(re.search(r"\*\*([0-9.]+)% of the 38 held-out adversarial scenarios", card).group(1))
    start = float(re.search(r"its start had ([0-9.]+)%", card).group(1))
    measured = _evaluate(RECOVERY, tmp_path)
    assert round(measured["ground_truth"] * 100, 1) == claimed
    assert claimed >= start + 20
