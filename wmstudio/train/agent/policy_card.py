"""The model card of a trained agent policy (`README.md` beside its weights): what it is, how it was trained,
intended use, limitations and its measured success on the demo curriculum's held-out scenarios.

`train-agent` measures the policy against the simulators right after training (`heldout_success`), records it in
`policy.json` and writes the card from that file, so a shipped policy always says what it is and how good it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wmstudio.locations import REPO_ROOT
from wmstudio.train.agent.agent_config import POLICY_MARKER
from wmstudio.train.agent.environments import SIMULATOR, Policy
from wmstudio.train.agent.off_policy import evaluate_policy
from wmstudio.train.agent.scenarios import HELDOUT, demo_scenarios, split_of


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
        "demo worlds' tasks by calling their tools. It reads an episode as words (`wmstudio/train/agent/agent_text.py`): "
        "every value the episode shows (an id, an amount, a session token) is one slot token `<vN>`, so it copies "
        "ids whole, and its word-level tokenizer is saved beside it. It is the starting point of `wmstudio "
        "train-grpo` and the policy the Rollouts tab uses to propose a next call.", "",
        "## Training",
        f"- {info.get('trained_by', 'wmstudio train-agent')}: {_count(info.get('episodes'))} expert episodes of the "
        "five demo worlds (freshly seeded scenarios, never a curriculum's held-out states); the loss is on the "
        "policy's own words only (its actions), never on the task or the tools' answers",
        *_ordinary_retries(config),
        f"- {_count(info.get('steps'))} optimizer steps in {info.get('seconds', '?')} s on "
        f"{config.get('threads', '?')} CPU thread(s); final loss {info.get('final_loss', '?')}",
        f"- settings: batch {config.get('batch', '?')}, peak learning rate {config.get('learning_rate', '?')} "
        f"(AdamW, cosine decay), seed {config.get('seed', '?')}, label smoothing {config.get('label_smoothing', 0.0)}",
        f"- size: {_count(info.get('parameters'))} parameters; {config.get('layers', '?')} layers, width "
        f"{config.get('hidden', '?')}, {config.get('heads', '?')} heads",
        f"- reproduce: `wmstudio train-agent --out {shown}"
        f" --episodes {config.get('episodes', '?')} --minutes {config.get('minutes', '?')}"
        f" --seed {config.get('seed', '?')} --threads {config.get('threads', '?')}{_retry_flags(config)}`", "",
        "## Intended use",
        "- the warm start of GRPO (`wmstudio train-grpo --policy FOLDER`) and a baseline policy for off-policy "
        "evaluation (`wmstudio evaluate --policy FOLDER`);",
        "- proposing the next call in the studio's Rollouts tab.", "",
        "## Limitations",
        "- it knows the five demo worlds' tools and task phrasings only: a world it never saw (another tool set, "
        "another wording) gets words it has no slot for, and it writes no useful calls there;",
        _sampling_limit(config),
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


def _ordinary_retries(config: dict[str, Any]) -> list[str]:
    """The card's line on the SFT data's late sign-ins and second tries, when it had any."""
    late, twice = config.get("late_sign_in") or 0.0, config.get("second_try") or 0.0
    if not late and not twice:
        return []
    return [f"- ordinary episodes that meet the worlds' own refusals: on {late:.0%} of the episodes that need a "
            "session the expert calls before signing in, is refused (UNAUTHENTICATED), signs in and calls again; "
            f"on {twice:.0%} of the others a refused call (an error, or `partial` where a bulk tag names an account "
            "that does not exist) is tried once more and refused again. No episode is steered and no second try "
            "ever succeeds: recovery is never shown, but a sampled episode sometimes tries again, so GRPO can "
            "find where that pays (`wmstudio train-grpo --curriculum adversarial`)"]


def _retry_flags(config: dict[str, Any]) -> str:
    late, twice = config.get("late_sign_in") or 0.0, config.get("second_try") or 0.0
    return (f" --late-sign-in {late:g}" if late else "") + (f" --second-try {twice:g}" if twice else "")


def _sampling_limit(config: dict[str, Any]) -> str:
    """The card's limitation on sampling: a plain SFT policy samples its demonstrations almost always."""
    if config.get("late_sign_in") or config.get("second_try"):
        return ("- greedy, it mostly answers a refusal at once; sampled, it tries again about as often as it saw, "
                "whether or not a retry can help: it knows no recovery, GRPO teaches it where one pays;")
    return ("- greedy, it plays the demonstrations it was trained on almost with certainty (a very low final loss), "
            "so GRPO groups of its rollouts rarely disagree and GRPO learns little from it: on the adversarial "
            "curriculum no sampled group retries (see `--late-sign-in` and `--second-try`);")


def _shown_path(folder: Path) -> str:
    """The folder as the card names it: relative to the repository when inside it, else by its name alone."""
    try:
        return folder.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return folder.name


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def write_recovery_card(folder: Path, results: dict[str, Any], shipped: str) -> Path:
    """`README.md` of a policy GRPO trained on the adversarial curriculum, from the comparison bench's results
    (benchmarks/grpo_recovery_bench.py): how it was trained, and every environment's seeds per family beside its
    SFT start, all judged on the held-out adversarial scenarios by the simulators."""
    folder = Path(folder)
    info = json.loads((folder / POLICY_MARKER).read_text(encoding="utf-8"))
    run = results["runs"][shipped]
    shown, start = _shown_path(folder), results["start"]
    seed = shipped.rsplit("-", 1)[1]
    table = recovery_table(results)
    estimates = [f"- {key}: MDLM world model estimate {figures['estimate']:.1%}, truth {figures['truth']:.1%}"
                 for key, figures in results.get("off_policy", {}).items()]
    lines = [
        "---", "library_name: transformers", "license: apache-2.0",
        "tags: [wmstudio, agent, tool-calling, grpo]", "---", "",
        f"# {folder.name}", "",
        "An agent policy of wmstudio trained by GRPO (TRL) in the MDLM world model on the built-in `adversarial` "
        "curriculum: tasks whose first try the world fails on purpose (RATE_LIMITED, an expired session, a partial "
        "bulk tag), beside ordinary tasks. It starts from an SFT policy that never saw a recovery and learns, from "
        "the world model's answers alone, when trying again pays. Same architecture and word-level tokenizer as "
        "`agent-small` (`wmstudio/train/agent/agent_text.py`).", "",
        "## Training",
        f"- start: `{start}` (SFT on ordinary expert episodes only, see its card)",
        "- environment `world-model`: the shipped MDLM answers every call, grounding `none` (no simulator in the "
        "prompt); steering per call occurrence fails each steered task's first try there as in the simulator",
        "- curriculum `adversarial`, training split (60 scenarios; transient errors trained in retail, airline "
        "and filesystem); 4 scenarios x 8 rollouts a step at temperature 1",
        f"- {info.get('steps', '?')} steps, learning rate {results['learning_rate']:g} (AdamW, constant), KL beta "
        f"0.02, seed {seed}; {run['seconds']} s wall, {run.get('cpu_seconds') or '?'} CPU-s on 1 thread",
        f"- reproduce: `wmstudio train-grpo --curriculum adversarial --env world-model --policy {start} "
        f"--max-steps {results['steps']} --learning-rate {results['learning_rate']:g} --seed {seed} --threads 1`", "",
        "## Intended use",
        "- an agent that recovers from transient errors, expired sessions and partial results in the demo worlds;",
        "- the worked example of GRPO in a world model: compare it with its start, and with the same run in the "
        "simulator (`--env simulator`).", "",
        "## Limitations",
        "- it knows the five demo worlds' tools and task phrasings only;",
        "- it learned to retry where retrying paid in training; a refusal no retry can fix is still answered at "
        "once only as far as the controls and its start taught it.", "",
        "## Measured success",
        f"- **{run['truth']:.1%} of the {results['heldout_scenarios']} held-out adversarial scenarios** (transient "
        "errors in payments and records, worlds it never trained them in; expired sessions and partial tags from "
        "unseen states; controls), played greedily against the simulators: its start had "
        f"{results['sft']['truth']:.1%}",
        f"- reproduce: `wmstudio evaluate --policy {shown} --curriculum adversarial --split heldout --env simulator`",
        "", "Every environment, three seeds each, judged by the simulators (`benchmarks/grpo_recovery_bench.py`):",
        "", *table, "", "Off-policy estimates on the held-out set (greedy policy, MDLM world model, grounding `none`):",
        *estimates,
    ]
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recovery_table(results: dict[str, Any], cpu: bool = False) -> list[str]:
    """Markdown rows of the comparison bench's results: the SFT start, each environment's seeds (overall and per
    family, with each run's CPU seconds when `cpu`), then each environment's mean."""
    families = sorted(results["sft"]["families"])
    extra = " CPU-s |" if cpu else ""
    lines = [f"| policy | held-out | {' | '.join(families)} |{extra}", "|---" * (len(families) + 2 + cpu) + "|"]

    def row(label: str, figures: dict[str, Any], seconds: Any = None) -> str:
        cells = " | ".join(f"{figures['families'].get(family, 0):.0%}" for family in families)
        return f"| {label} | {figures['truth']:.1%} | {cells} |" + (f" {seconds or ''} |" if cpu else "")

    lines.append(row(f"SFT start `{results['start']}` (greedy)", results["sft"]))
    names = {"mdlm": "MDLM world model", "ar": "AR world model", "simulator": "simulator"}
    means: dict[str, list[float]] = {}
    for key, figures in results["runs"].items():
        env, seed = key.rsplit("-", 1)
        lines.append(row(f"GRPO in the {names.get(env, env)}, seed {seed}", figures, figures.get("cpu_seconds")))
        means.setdefault(env, []).append(figures["truth"])
    lines += [f"| **GRPO in the {names.get(env, env)}, mean of {len(truths)}** | **{sum(truths) / len(truths):.1%}** |"
              + " |" * (len(families) + cpu) for env, truths in means.items()]
    return lines
