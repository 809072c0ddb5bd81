"""GRPO on the adversarial curriculum, the paper's comparison: one SFT start, four environments (the MDLM world
model, the AR world model, the simulator, the echo world with no model), three seeds each, every policy judged on the held-out adversarial
scenarios by the simulators (the truth), per family; and the off-policy estimates of the SFT and the GRPO policies
in the MDLM world model (grounding `none`) beside that truth.

Each run is `wmstudio train-grpo --curriculum adversarial --env ENV [--model AR] --policy START --max-steps STEPS
--learning-rate LR --seed SEED` (one CPU thread), written to OUT/ENV-SEED; a run whose folder already holds a
policy is kept, so an interrupted bench continues. Prints a Markdown table and writes OUT/results.json.

    python benchmarks/grpo_recovery_bench.py --start assets/models/agent-ordinary --out /tmp/grpo-recovery

`--mdlm` / `--ar` name the world models of the two world-model environments (the shipped MDLM and AR baseline by
default; [wm-pair]'s comparison: `--mdlm assets/models/wm-mdlm-pair --ar assets/models/wm-ar-pair`).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wmstudio.locations import DEFAULT_AR_MODEL  # noqa: E402
from wmstudio.model.serving.backends import load_backend  # noqa: E402
from wmstudio.train.agent.adversarial import ADVERSARIAL_CURRICULUM, adversarial_scenarios  # noqa: E402
from wmstudio.train.agent.agent_policy import load_policy  # noqa: E402
from wmstudio.train.agent.environments import SIMULATOR, WORLD_MODEL  # noqa: E402
from wmstudio.train.agent.off_policy import evaluate_policy, report  # noqa: E402
from wmstudio.train.agent.policy_card import recovery_table, write_recovery_card  # noqa: E402
from wmstudio.train.agent.scenarios import HELDOUT, split_of  # noqa: E402

ENVIRONMENTS = {"mdlm": (WORLD_MODEL, None), "ar": (WORLD_MODEL, DEFAULT_AR_MODEL), "simulator": (SIMULATOR, None),
                "echo": ("echo", None)}  # no model (pins answered, every other call ok): the floor a world must beat


def choose_models(mdlm: str | None, ar: str | None) -> None:
    """Name the world model of the `mdlm` and `ar` environments (None: the shipped default)."""
    if mdlm:
        ENVIRONMENTS["mdlm"] = (WORLD_MODEL, mdlm)
    if ar:
        ENVIRONMENTS["ar"] = (WORLD_MODEL, ar)


def train(start: str, out: Path, name: str, seed: int, steps: int, learning_rate: float) -> dict:
    """One GRPO run (skipped when its policy exists); its result JSON and the CPU seconds it took."""
    folder = out / f"{name}-{seed}"
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    env, model = ENVIRONMENTS[name]
    command = [sys.executable, "-m", "wmstudio.cli", "train-grpo", "--curriculum", ADVERSARIAL_CURRICULUM,
               "--env", env, "--policy", start, "--max-steps", str(steps), "--minutes", "30",
               "--learning-rate", str(learning_rate), "--seed", str(seed), "--threads", "1",
               "--out", str(folder), "--db", str(out / "runs.db"), "--json"]
    if model:
        command += ["--model", model]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{name} seed {seed} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    result["cpu_seconds"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)
    result_file.write_text(json.dumps(result, indent=2))
    return result


def per_family(policy_folder: str, scenarios: list, env: str = SIMULATOR, backend=None) -> dict:
    """The policy's held-out success overall and per family: the truth, and the estimate in `env`."""
    data = report(policy_folder, ADVERSARIAL_CURRICULUM, HELDOUT,
                  evaluate_policy(load_policy(policy_folder).act, scenarios, backend, env))
    return {"truth": data["ground_truth"], "estimate": data["estimate"],
            "families": {family: figures["ground_truth"] for family, figures in data["per_family"].items()},
            "estimates": {family: figures["estimate"] for family, figures in data["per_family"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", default="assets/models/agent-ordinary")
    parser.add_argument("--out", type=Path, default=Path("/tmp/grpo-recovery"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--envs", nargs="+", default=list(ENVIRONMENTS), choices=list(ENVIRONMENTS))
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--mdlm", default=None, help="the MDLM world model (default: the shipped one)")
    parser.add_argument("--ar", default=None, help=f"the AR world model (default: {DEFAULT_AR_MODEL})")
    parser.add_argument("--ship", type=Path, default=None,
                        help="copy the first MDLM seed's policy here with its card (assets/models/agent-recovery)")
    args = parser.parse_args()
    choose_models(args.mdlm, args.ar)
    args.out.mkdir(parents=True, exist_ok=True)
    heldout = split_of(adversarial_scenarios(), HELDOUT)
    started = time.perf_counter()
    results: dict = {"start": args.start, "steps": args.steps, "learning_rate": args.learning_rate,
                     "heldout_scenarios": len(heldout), "sft": per_family(args.start, heldout), "runs": {}}
    for name in args.envs:
        for seed in args.seeds:
            run = train(args.start, args.out, name, seed, args.steps, args.learning_rate)
            figures = per_family(run["policy_folder"], heldout)
            results["runs"][f"{name}-{seed}"] = {**figures, "steps": run["steps"], "seconds": run["seconds"],
                                                 "cpu_seconds": run.get("cpu_seconds")}
            print(f"{name} seed {seed}: {figures['truth']:.1%} {figures['families']} "
                  f"({run['seconds']} s, {run.get('cpu_seconds')} CPU-s)", flush=True)
    results["world_models"] = {name: ENVIRONMENTS[name][1] for name in ("mdlm", "ar")}
    backend = load_backend(ENVIRONMENTS["mdlm"][1])
    results["off_policy"] = {"sft": per_family(args.start, heldout, WORLD_MODEL, backend)}
    if "mdlm" in args.envs:
        first = results["runs"][f"mdlm-{args.seeds[0]}"]
        policy = str(args.out / f"mdlm-{args.seeds[0]}" / "policy")
        results["off_policy"][f"mdlm-{args.seeds[0]}"] = per_family(policy, heldout, WORLD_MODEL, backend)
        first["policy"] = policy
    results["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(table(results))
    if args.ship is not None and "mdlm" in args.envs:
        shutil.rmtree(args.ship, ignore_errors=True)
        shutil.copytree(args.out / f"mdlm-{args.seeds[0]}" / "policy", args.ship)
        print(write_recovery_card(args.ship, results, f"mdlm-{args.seeds[0]}"))


def table(results: dict) -> str:
    """Markdown: the card's table with each run's CPU seconds, then the off-policy estimates beside the truth."""
    lines = recovery_table(results, cpu=True)
    columns = len(results["sft"]["families"]) + 1
    lines += [f"| off-policy {key}: MDLM estimate / truth | {figures['estimate']:.1%} / {figures['truth']:.1%} |"
              + " |" * columns for key, figures in results.get("off_policy", {}).items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
