"""Training and evaluation behind the CLI's `model` group, `train-agent` and `evaluate`: the typed settings their
options are built from, and the functions each command calls.

The settings load at once (no torch); each function below `LAZY` loads its trainer or evaluator only when a command
first asks for it, so `wmstudio --help` stays fast."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.agent_config import AgentTrainConfig, GrpoSettings  # noqa: F401 - re-exported
from wmstudio.train.agent.environment_kinds import ENVIRONMENT_HELP, ENVIRONMENTS, environment_kind  # noqa: F401
from wmstudio.train.world_model.chat_scoring import DEFAULT_CHAT_LENGTH  # noqa: F401 - re-exported
from wmstudio.train.world_model.config import TrainConfig  # noqa: F401 - re-exported
from wmstudio.train.world_model.pair import PairConfig  # noqa: F401 - re-exported

LAZY = {  # name -> the module that does it (loaded on first use)
    "train_world_model": "wmstudio.train.world_model.training",  # `model train`
    "train_pair": "wmstudio.train.world_model.pair",  # `model train-pair`
    "train_agent": "wmstudio.train.agent.agent_sft",  # `train-agent`
    "read_corpus_split": "wmstudio.train.world_model.examples",
    "fit_outcome_head": "wmstudio.train.world_model.outcome_fitting",  # `model fit-outcome`
    "fit_messages": "wmstudio.train.world_model.outcome_fitting",  # `model fit-outcome --messages-only`
    "write_trained_schemas": "wmstudio.train.world_model.trained_schema_writing",  # `model keep-schemas`
    "evaluate_world_model": "wmstudio.train.world_model.evaluation",  # `model eval`
    "write_quality": "wmstudio.train.world_model.evaluation",
    "score_chat_corpus": "wmstudio.train.world_model.chat_scoring",  # `model eval` on another project's chat rows
    "evaluate_policy": "wmstudio.train.agent.off_policy",  # `evaluate`
    "report": "wmstudio.train.agent.off_policy",
    "curriculum_scenarios": "wmstudio.train.agent.curriculum_scenarios",
    "split_of": "wmstudio.train.agent.scenarios",
    "world_model_for": "wmstudio.train.agent.environments",
}


def __getattr__(name: str) -> Any:
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(LAZY[name]), name)


def trained_model_folder(model: str) -> Path:
    """The folder of `model` (a path or a shipped name); InvalidInput naming --model when train-wm did not write it."""
    from wmstudio.model.network.sources import resolve_model_path

    folder = Path(resolve_model_path(model))
    if not (folder / "config.json").exists():
        raise InvalidInput(Problem("--model", f"{folder} is not a model folder: give one that train-wm wrote"))
    return folder


def policy_for(policy: str, seed: int = 0):
    """The policy `evaluate` plays: a trained policy's folder (train-agent or train-grpo), played greedily, or a
    scripted one (expert, recovering, tries-twice, retry-once, noisy or random) by name."""
    if Path(policy).is_dir():
        from wmstudio.train.agent.agent_policy import load_policy

        return load_policy(policy).act
    from wmstudio.train.agent.scripted_policies import scripted_policy

    return scripted_policy(policy, seed)
