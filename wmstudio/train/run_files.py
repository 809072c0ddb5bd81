"""A training run's folder: its log, the episodes it played, its trainer checkpoints and its final policy.

The training process writes here and the Train tab reads it back; `run_folder(run_id)` is the one place it is."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wmstudio.locations import user_home
from wmstudio.store import TrainingRun

LOG_FILE, EPISODES_FILE, CHECKPOINTS_DIR, POLICY_DIR = "log.txt", "episodes.jsonl", "checkpoints", "policy"
CHECKPOINT_PREFIX = "checkpoint-"
CHECKPOINT_DONE = "trainer_state.json"  # what the trainer writes last into a checkpoint: without it, it is partial


def run_folder(run_id: int) -> Path:
    """Where run `run_id` keeps its log, episodes, checkpoints and final policy (created on first use)."""
    folder = user_home() / "runs" / str(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def append_episodes(run_id: int, step: int, episodes: Sequence[Mapping[str, Any]]) -> None:
    """Append each episode with its `step` as one JSON line of episodes.jsonl (one write per line, so a kill
    tears at most the last one)."""
    path = run_folder(run_id) / EPISODES_FILE
    with path.open("a", encoding="utf-8") as handle:
        for episode in episodes:
            handle.write(json.dumps({**dict(episode), "step": int(step)}, ensure_ascii=False, default=str) + "\n")
            handle.flush()


def checkpoints(run_id: int) -> list[Path]:
    """The run's complete trainer checkpoints (`checkpoints/checkpoint-<step>` holding trainer_state.json), oldest
    step first: one a kill cut short while it was being written is left out, since resuming from it would fail."""
    return complete_checkpoints(run_folder(run_id))


def run_files_folder(run: TrainingRun) -> Path:
    """Where the run's checkpoints and policy are: train-grpo's `--out` when it was given one, else its folder."""
    out = run.config.get("out")
    return Path(out) if isinstance(out, str) and out else run_folder(run.id)


def run_checkpoints(run: TrainingRun) -> list[Path]:
    """The run's complete checkpoints, oldest first (where `run_files_folder` says they are)."""
    return complete_checkpoints(run_files_folder(run))


def complete_checkpoints(folder: Path) -> list[Path]:
    """The complete checkpoints under a run folder's checkpoints/ (the run's own, or train-grpo's `--out`)."""
    folder = Path(folder) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX)
             and p.name[len(CHECKPOINT_PREFIX):].isdigit() and (p / CHECKPOINT_DONE).is_file()]
    return sorted(found, key=checkpoint_step)


def checkpoint_step(checkpoint: Path) -> int:
    """The training step a `checkpoint-<step>` folder was saved after."""
    return int(checkpoint.name[len(CHECKPOINT_PREFIX):])


def drop_episodes_after(run_id: int, step: int) -> int:
    """Remove the episodes logged after `step` (a resumed run plays those steps again) and any torn line; returns
    how many lines went. The file is rewritten beside itself and swapped in, so a kill leaves one or the other."""
    path = run_folder(run_id) / EPISODES_FILE
    if not path.is_file():
        return 0
    dropped = 0
    partial = path.with_name(f".{EPISODES_FILE}.tmp")
    with path.open("rb") as source, partial.open("wb") as kept:
        for line in source:
            try:
                episode_step = json.loads(line).get("step")
            except (ValueError, AttributeError, RecursionError):
                episode_step = None
            if isinstance(episode_step, int) and episode_step <= step:
                kept.write(line if line.endswith(b"\n") else line + b"\n")
            else:
                dropped += 1
    partial.replace(path)
    return dropped


def latest_episodes(run_id: int, n: int = 5) -> list[dict[str, Any]]:
    """The last `n` episodes the run logged, oldest first; a line torn by a kill mid-write is skipped."""
    path = run_folder(run_id) / EPISODES_FILE
    if n <= 0 or not path.is_file():
        return []
    found: list[dict[str, Any]] = []
    for line in reversed(_tail_lines(path, n + 1)):
        try:
            episode = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(episode, dict):
            found.append(episode)
        if len(found) == n:
            break
    return found[::-1]


def log_tail(run_id: int, lines: int = 30) -> str:
    """The last lines of the run's log.txt (what the training process printed), or "" when there is none."""
    path = run_folder(run_id) / LOG_FILE
    return "\n".join(_tail_lines(path, lines)) if path.is_file() else ""


def move_aside_leftovers(run_id: int) -> None:
    """A new run's folder that already holds files belongs to a run of another database: keep it, renamed."""
    folder = run_folder(run_id)
    if any(folder.iterdir()):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        folder.rename(folder.with_name(f"{run_id}.moved-{stamp}"))
        folder.mkdir()


def _tail_lines(path: Path, count: int, block: int = 65_536) -> list[str]:
    """The last `count` lines of a text file, read from its end (episode files grow long)."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        end = position = handle.tell()
        data = b""
        while position > 0 and data.count(b"\n") <= count:
            position = max(0, position - block)
            handle.seek(position)
            data = handle.read(end - position)
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [line for line in lines if line.strip()][-count:]
