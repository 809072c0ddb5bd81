"""The model card of a trained agent policy (`README.md` beside its weights): what it is, how it was trained,
intended use, limitations and its measured success on the demo curriculum's held-out scenarios.

`train-agent` measures the policy against the simulators right after training (`heldout_success`), records it in
`policy.json` and writes the card from that file, so a shipped policy always says what it is and how good it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wmstudio.locations import REPO_ROOT
from wmstudio.train.agent_config import POLICY_MARKER
from wmstudio.train.environments import SIMULATOR, Policy
from wmstudio.train.off_policy import evaluate_policy
from wmstudio.train.scenarios import HELDOUT, demo_scenarios, split_of


def heldout_success(policy: Policy) -> dict[str, Any]:
    """The policy played greedily on the demo curriculum's held-out scenarios against the simulators: successes
    overall and per world (what `wmstudio evaluate --policy DIR --env simulator` reports)."""
    scenarios = split_of(demo_scenarios(), HELDOUT)
    estimate = evaluate_policy(policy, scenarios, None, SIMULATOR)
    per_world = {world: [estimate.truths.get(world, 0), count] for world, count in sorted(estimate.episodes.items())}
    return {"scenarios": len(scenarios), "successes": sum(estimate.truths.values()), "per_world": per_world}


def write_policy_card(folder: Path) -> Path:
    """(Re)write `README.md` in a policy folder from its `policy.json` (its training and, once measured, its
    held-out success); no absolute paths."""
    folder = Path(folder)
    info = json.loads((folder / POLICY_MARKER).read_text(encoding="utf-8"))
    config = info.get("config", {})
    heldout = info.get("heldout")
    shown = _shown_path(folder)
    lines = [
        "---", "library_name: transformers", "license: apache-2.0", "tags: [wmstudio, agent, tool-calling]", "---", "",
        f"# {folder.name}", "",
        "An agent policy of wmstudio: a small causal LM (Qwen3 architecture, built from a config) that plays the "
        "demo worlds' tasks by calling their tools. It reads an episode as words (`wmstudio/train/agent_text.py`): "
        "every value the episode shows (an id, an amount, a session token) is one slot token `<vN>`, so it copies "
        "ids whole, and its word-level tokenizer is saved beside it. It is the starting point of `wmstudio "
        "train-grpo` and the policy the Rollouts tab uses to propose a next call.", "",
        "## Training",
        f"- {info.get('trained_by', 'wmstudio train-agent')}: {_count(info.get('episodes'))} expert episodes of the "
        "five demo worlds (freshly seeded scenarios, never a curriculum's held-out states); the loss is on the "
        "policy's own words only (its actions), never on the task or the tools' answers",
        f"- {_count(info.get('steps'))} optimizer steps in {info.get('seconds', '?')} s on "
        f"{config.get('threads', '?')} CPU thread(s); final loss {info.get('final_loss', '?')}",
        f"- settings: batch {config.get('batch', '?')}, peak learning rate {config.get('learning_rate', '?')} "
        f"(AdamW, cosine decay), seed {config.get('seed', '?')}, label smoothing {config.get('label_smoothing', 0.0)}",
        f"- size: {_count(info.get('parameters'))} parameters; {config.get('layers', '?')} layers, width "
        f"{config.get('hidden', '?')}, {config.get('heads', '?')} heads",
        f"- reproduce: `wmstudio train-agent --out {shown}"
        f" --episodes {config.get('episodes', '?')} --minutes {config.get('minutes', '?')}"
        f" --seed {config.get('seed', '?')} --threads {config.get('threads', '?')}`", "",
        "## Intended use",
        "- the warm start of GRPO (`wmstudio train-grpo --policy FOLDER`) and a baseline policy for off-policy "
        "evaluation (`wmstudio evaluate --policy FOLDER`);",
        "- proposing the next call in the studio's Rollouts tab.", "",
        "## Limitations",
        "- it knows the five demo worlds' tools and task phrasings only: a world it never saw (another tool set, "
        "another wording) gets words it has no slot for, and it writes no useful calls there;",
        "- greedy, it plays the demonstrations it was trained on almost with certainty (a very low final loss), so "
        "GRPO groups of its rollouts rarely disagree and GRPO learns little from it (`--label-smoothing 0.1` "
        "keeps its samples varied);",
        f"- it is a model of {_count(info.get('parameters'))} parameters sized for a CPU; a chat model (`--policy "
        "Qwen/Qwen3-0.6B` on a GPU) is the way to agents that read real tasks.", "",
        "## Measured success",
    ]
    if heldout:
        rate = heldout["successes"] / heldout["scenarios"]
        worlds = ", ".join(f"{world} {hits}/{count}" for world, (hits, count) in heldout["per_world"].items())
        lines += [f"- **{heldout['successes']} of {heldout['scenarios']} held-out scenarios ({rate:.1%})** of the "
                  "demo curriculum, played greedily against the simulators (the ground truth); per world: "
                  f"{worlds}",
                  f"- reproduce: `wmstudio evaluate --policy {shown} --env simulator`"]
    else:
        lines.append("- not measured yet: `wmstudio evaluate --policy FOLDER --env simulator`")
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _shown_path(folder: Path) -> str:
    """The folder as the card names it: relative to the repository when inside it, else by its name alone."""
    try:
        return folder.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return folder.name


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"
