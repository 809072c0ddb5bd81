"""The MDLM / AR pair ([wm-pair]): two world models trained from scratch side by side on the same corpus, the same
tokenizer (BPE fitted on that corpus, deterministically, by each), the same shape, the same number of optimizer
steps of the same batch size and the same wall-clock cap, one torch thread each, so neither gets more CPU than the
other. Each run is `wmstudio model train` in its own process, resumable with `--resume` in a later sitting; the
pair's summary (`pair.json`) says what each got: parameters, steps, tokens, wall and CPU seconds."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import setting, whole_in

ARCHS = {"mdlm": "wm-mdlm-pair", "ar": "wm-ar-pair"}  # arch -> its folder under --out
PAIR_FILE = "pair.json"  # what each of the two got; shipped beside each model, whose card renders it


@dataclass
class PairConfig:
    """Train the MDLM and the AR world model from scratch on the same rows, tokenizer, shape and budget, side by
    side, one CPU thread each; `--resume` goes on with both in a later sitting."""

    REQUIRED = ("corpus", "out")

    corpus: Path = setting(None, "Folder with train.jsonl and eval.jsonl, e.g. `wmstudio corpus --oracle-share 0`.")
    out: Path = setting(None, "Folder for the pair: wm-mdlm-pair/ and wm-ar-pair/ are written under it.")
    steps: int = setting(2000, "Optimizer steps of each model (the same token budget: --batch-tokens per step).")
    minutes: float = setting(70.0, "Wall-clock cap of each training loop in minutes (its schedule ends with "
                                   "--steps or this, whichever comes first).")
    seed: int = setting(0, "Seed of both runs (initialisation, batching, noise).")
    batch_tokens: int = setting(6144, "About this many tokens per optimizer step, for both.")
    learning_rate: float = setting(2e-3, "Peak learning rate of both (AdamW, cosine decay after warm-up).")
    resume: bool = setting(False, "Go on with both unfinished runs from their checkpoints under --out.")
    sitting_minutes: float | None = setting(None, "End this sitting after this many minutes, both checkpointed.")
    checkpoint_minutes: float = setting(10.0, "Minutes between checkpoints while training.")

    def __post_init__(self) -> None:
        missing = [name for name in self.REQUIRED if getattr(self, name) is None]
        if missing:
            raise InvalidInput([Problem(name, "required: give a folder") for name in missing])
        self.corpus, self.out = Path(self.corpus), Path(self.out)
        if not whole_in(self.steps, 1):
            raise InvalidInput(Problem("steps", f"must be a whole number from 1, got {self.steps!r}"))


def pair_commands(config: PairConfig) -> dict[str, list[str]]:
    """The `wmstudio model train` command of each model of the pair, by arch: every setting the same but the arch
    (and the heads only an MDLM's canvas has: its copy head; the outcome head is fitted for both afterwards)."""
    commands = {}
    for arch, folder in ARCHS.items():
        argv = [sys.executable, "-m", "wmstudio.cli", "model", "train", "--corpus", str(config.corpus),
                "--out", str(config.out / folder), "--arch", arch, "--steps", str(config.steps),
                "--minutes", str(config.minutes), "--seed", str(config.seed), "--batch-tokens",
                str(config.batch_tokens), "--learning-rate", str(config.learning_rate), "--threads", "1",
                "--checkpoint-minutes", str(config.checkpoint_minutes), "--no-outcome-head",
                "--note", "the pair: from scratch beside its twin, one thread each"]
        if config.resume:
            argv.append("--resume")
        if config.sitting_minutes is not None:
            argv += ["--sitting-minutes", str(config.sitting_minutes)]
        commands[arch] = argv
    return commands


def train_pair(config: PairConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run both trainings at once, each logging to `<out>/<folder>.log`; wait for both; write and return the pair's
    summary. InvalidInput when either run fails (its log's last lines quoted)."""
    config.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    running = {}
    for arch, argv in pair_commands(config).items():
        log_path = config.out / f"{ARCHS[arch]}.log"
        with log_path.open("a", encoding="utf-8") as out:
            out.write(f"\n$ {' '.join(argv[1:])}\n")
            out.flush()
            running[arch] = (subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env), log_path,
                             time.monotonic())
        log(f"{arch}: started (pid {running[arch][0].pid}), log {log_path}")
    finished: dict[str, dict[str, Any]] = {}
    failed = []
    for arch, (process, log_path, started) in running.items():
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        finished[arch] = {"exit": process.returncode, "wall_seconds": round(time.monotonic() - started, 1),
                          "cpu_seconds": round(cpu, 1)}
        log(f"{arch}: exit {process.returncode}, {finished[arch]['cpu_seconds']} CPU seconds")
        if process.returncode != 0:
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
            failed.append(Problem(arch, f"training failed (exit {process.returncode}): " + " | ".join(tail)))
    if failed:
        raise InvalidInput(failed)
    summary = pair_summary(config, finished)
    (config.out / PAIR_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def pair_summary(config: PairConfig, processes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What each model of the pair got so far (from its training.json once finished, else from its checkpoint) and
    whether the pair is on equal terms: the same tokenizer, parameters within 5%, the same steps."""
    models = {arch: {"folder": folder, **model_progress(config.out / folder), **processes.get(arch, {})}
              for arch, folder in ARCHS.items()}
    mdlm, ar = models["mdlm"], models["ar"]
    return {"corpus": str(config.corpus), "seed": config.seed, "steps": config.steps, "models": models,
            "finished": mdlm["finished"] and ar["finished"],
            "same_tokenizer": mdlm["tokenizer_sha256"] == ar["tokenizer_sha256"],
            "parameter_gap": round(abs(mdlm["parameters"] - ar["parameters"]) / max(ar["parameters"], 1), 4),
            "same_steps": mdlm["steps"] == ar["steps"],
            "token_ratio": round(mdlm["tokens_seen"] / max(ar["tokens_seen"], 1), 4)}


def model_progress(folder: Path) -> dict[str, Any]:
    """How far one model of the pair has come: finished (its training.json) or not (its checkpoint's progress)."""
    from wmstudio.train.world_model.checkpoint import CHECKPOINT_DIR, PROGRESS_FILE  # torch: not at the CLI's start

    finished = (folder / "training.json").is_file() and not (folder / CHECKPOINT_DIR).exists()
    where = folder if finished else folder / CHECKPOINT_DIR
    if finished:
        record = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    else:
        record = json.loads((where / PROGRESS_FILE).read_text(encoding="utf-8"))
    sittings = record.get("sittings") or []
    return {"finished": finished, "parameters": parameter_count(where), "steps": record["steps" if finished else
                                                                                       "step"],
            "tokens_seen": record["tokens_seen"], "train_seconds": record["seconds"],
            "train_cpu_seconds": round(sum(s.get("cpu_seconds", 0) for s in sittings), 1),
            "sittings": len(sittings),
            "tokenizer_sha256": hashlib.sha256((where / "tokenizer.json").read_bytes()).hexdigest()[:16]}


def parameter_count(folder: Path) -> int:
    """The parameters in a model folder's safetensors files (the network and, for an MDLM, its copy head), read
    from their headers."""
    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with path.open("rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        for name, tensor in header.items():
            if name != "__metadata__":
                total += math.prod(tensor["shape"])
    return total
