"""An unfinished training run's checkpoint, so a run longer than one sitting goes on where it stopped.

`<out>/checkpoint/` holds the weights and tokenizer (a folder the Auto classes load), the copy head, the
optimizer's moments, the batch stream's position and noise generator, and the run's progress: steps, tokens,
training seconds over all sittings, the loss curve and one line per sitting. A checkpoint is written whole into
a temporary folder and then renamed over the old one, so a run killed while saving keeps the previous checkpoint.
The finished run removes it."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.world_model.config import TrainConfig

CHECKPOINT_DIR = "checkpoint"
PROGRESS_FILE = "progress.json"
TENSORS_FILE = "trainer.pt"
# settings a later sitting may change: they do not change what the run computes
SITTING_SETTINGS = frozenset({"resume", "sitting_minutes", "sitting_steps", "checkpoint_minutes", "threads",
                              "loader_workers", "eval_every_s", "device", "note"})


@dataclass
class RunProgress:
    """How far a run has come: the optimizer steps and tokens, training-loop seconds over all sittings, the
    stream's next batch (epoch, index within it), the smoothed losses, the loss curve and the sittings so far."""

    step: int = 0
    tokens_seen: int = 0
    seconds: float = 0.0
    epoch: int = 0
    batch_index: int = 0
    smooth: float | None = None
    copy_smooth: float | None = None
    curve: list[dict] = field(default_factory=list)
    sittings: list[dict] = field(default_factory=list)  # {"started", "steps", "seconds", "cpu_seconds"}

    def advance(self, epoch: int, tokens: int) -> None:
        """One optimizer step on the next batch of `epoch`."""
        self.batch_index = self.batch_index + 1 if epoch == self.epoch else 1
        self.epoch = epoch
        self.step += 1
        self.tokens_seen += tokens


def checkpoint_folder(out: Path) -> Path:
    return Path(out) / CHECKPOINT_DIR


def check_start(config: TrainConfig) -> None:
    """InvalidInput when `--resume` finds no checkpoint, or a new run would overwrite an unfinished one."""
    folder = checkpoint_folder(config.out)
    there = (folder / PROGRESS_FILE).is_file()
    if config.resume and not there:
        raise InvalidInput(Problem("resume", f"{folder} holds no checkpoint to go on from: run without --resume "
                                             "to start this run"))
    if not config.resume and there:
        raise InvalidInput(Problem("out", f"{config.out} holds an unfinished run's checkpoint ({folder}): add "
                                          "--resume to go on with it, or delete that folder to start anew"))


def save_checkpoint(config: TrainConfig, model, tokenizer, head, optimizer, noise: torch.Generator | None,
                    progress: RunProgress) -> Path:
    """Write the run's checkpoint whole, then put it in place of the previous one."""
    folder = checkpoint_folder(config.out)
    staging = folder.with_name(CHECKPOINT_DIR + ".saving")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    if head is not None:
        head.save(staging)
    torch.save({"optimizer": optimizer.state_dict(), "noise": None if noise is None else noise.get_state()},
               staging / TENSORS_FILE)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()}
    (staging / PROGRESS_FILE).write_text(json.dumps({"config": settings, **asdict(progress)}, indent=1) + "\n",
                                         encoding="utf-8")
    old = folder.with_name(CHECKPOINT_DIR + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


@dataclass
class Resumed:
    """What a checkpoint gives back: the model and tokenizer, the head's folder, the optimizer and noise states."""

    model: object
    tokenizer: object
    folder: Path
    optimizer_state: dict
    noise_state: torch.Tensor | None
    progress: RunProgress


def load_checkpoint(config: TrainConfig, device: str) -> Resumed:
    """The checkpoint in `config.out`, after checking that it was made with the same settings."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = checkpoint_folder(config.out)
    saved = json.loads((folder / PROGRESS_FILE).read_text(encoding="utf-8"))
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()}
    changed = [name for name, value in settings.items()
               if name not in SITTING_SETTINGS and saved["config"].get(name) != value]
    if changed:
        raise InvalidInput([Problem(name, f"the checkpoint's run has {saved['config'].get(name)!r}, this sitting "
                                          f"{settings[name]!r}: resume with the run's own settings")
                            for name in changed])
    tensors = torch.load(folder / TENSORS_FILE, map_location="cpu", weights_only=False)
    progress = RunProgress(**{k: v for k, v in saved.items() if k != "config"})
    model = AutoModelForCausalLM.from_pretrained(folder).to(device)
    return Resumed(model, AutoTokenizer.from_pretrained(folder), folder, tensors["optimizer"], tensors["noise"],
                   progress)


def start_sitting(progress: RunProgress) -> dict:
    """A new sitting's line in the progress (its steps and seconds are filled in as it goes)."""
    sitting = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": 0, "seconds": 0.0,
               "cpu_seconds": 0.0}
    progress.sittings.append(sitting)
    return sitting


def remove_checkpoint(out: Path) -> None:
    shutil.rmtree(checkpoint_folder(out), ignore_errors=True)


def sitting_over(config: TrainConfig, seconds: float, steps: int) -> bool:
    """Whether this sitting has had its minutes or steps (the run's own budget is checked apart)."""
    return bool((config.sitting_minutes and seconds >= config.sitting_minutes * 60)
                or (config.sitting_steps and steps >= config.sitting_steps))


@contextmanager
def stop_requests() -> Iterator[Callable[[], bool]]:
    """A function that says whether SIGTERM or Ctrl-C asked the run to stop, so it can end the sitting with a
    checkpoint; outside the main thread (the studio's jobs) signals are left alone and it always says no."""
    asked = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield asked.is_set
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    for number in previous:
        signal.signal(number, lambda *_: asked.set())
    try:
        yield asked.is_set
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
