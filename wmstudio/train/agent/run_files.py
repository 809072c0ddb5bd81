"""A training run's folder: its log, the episodes it played, its trainer checkpoints and its final policy.

The training process writes here and the Train tab reads it back; `run_folder(run_id, database)` is the one place it
is: under `runs/` in the user's folder, in a folder of the run's database (named by its file and a hash of its
path), so two databases sharing one WMSTUDIO_HOME never share a run folder (run 1 of a second database once
renamed the first one's live run folder)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wmstudio.locations import user_home
from wmstudio.store import TrainingRun
from wmstudio.train.agent.agent_config import POLICY_MARKER

LOG_FILE, EPISODES_FILE, CHECKPOINTS_DIR, POLICY_DIR = "log.txt", "episodes.jsonl", "checkpoints", "policy"
RECORD_FILE = "trainer.json"  # who trains the run (train/agent/run_owner.py writes it)
CHECKPOINT_PREFIX = "checkpoint-"
CHECKPOINT_DONE = "trainer_state.json"  # what the trainer writes last into a checkpoint: without it, it is partial


def run_folder(run_id: int, database: str | Path) -> Path:
    """Where run `run_id` of `database` (its SQLite file) keeps its log, episodes, checkpoints and final policy
    (created on first use). A run made before folders were kept per database is found where it was (`runs/<id>`),
    when its trainer record names this database."""
    folder = user_home() / "runs" / database_folder_name(database) / str(run_id)
    if not folder.is_dir():
        legacy = user_home() / "runs" / str(run_id)
        if _recorded_database(legacy) == resolved_database(database):
            return legacy
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def resolved_database(database: str | Path) -> str:
    """A database file's path as run records keep it: absolute, links resolved."""
    return str(Path(database).expanduser().resolve())


def database_folder_name(database: str | Path) -> str:
    """The folder of a database's runs: its file's name (readable) and a hash of its whole path (unique)."""
    path = resolved_database(database)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(path).stem)[:32].strip("-.") or "db"
    return f"{stem}-{hashlib.sha256(path.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _recorded_database(folder: Path) -> str | None:
    """The database a run folder's trainer record names (None without one)."""
    try:
        return json.loads((folder / RECORD_FILE).read_text(encoding="utf-8")).get("database")
    except (OSError, ValueError, AttributeError):
        return None


def append_episodes(run_id: int, database: str | Path, step: int, episodes: Sequence[Mapping[str, Any]]) -> None:
    """Append each episode with its `step` as one JSON line of episodes.jsonl (one write per line, so a kill
    tears at most the last one)."""
    path = run_folder(run_id, database) / EPISODES_FILE
    with path.open("a", encoding="utf-8") as handle:
        for episode in episodes:
            handle.write(json.dumps({**dict(episode), "step": int(step)}, ensure_ascii=False, default=str) + "\n")
            handle.flush()


def checkpoints(run_id: int, database: str | Path) -> list[Path]:
    """The run's complete trainer checkpoints (`checkpoints/checkpoint-<step>` holding trainer_state.json), oldest
    step first: one a kill cut short while it was being written is left out, since resuming from it would fail."""
    return complete_checkpoints(run_folder(run_id, database))


def run_files_folder(run: TrainingRun, database: str | Path) -> Path:
    """Where the run's checkpoints and policy are: train-grpo's `--out` when it was given one, else its folder."""
    out = run.config.get("out")
    return Path(out) if isinstance(out, str) and out else run_folder(run.id, database)


def run_checkpoints(run: TrainingRun, database: str | Path) -> list[Path]:
    """The run's complete checkpoints, oldest first (where `run_files_folder` says they are)."""
    return complete_checkpoints(run_files_folder(run, database))


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


def drop_episodes_after(run_id: int, database: str | Path, step: int) -> int:
    """Remove the episodes logged after `step` (a resumed run plays those steps again) and any torn line; returns
    how many lines went. The file is rewritten beside itself and swapped in, so a kill leaves one or the other."""
    path = run_folder(run_id, database) / EPISODES_FILE
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


def latest_episodes(run_id: int, database: str | Path, n: int = 5) -> list[dict[str, Any]]:
    """The last `n` episodes the run logged, oldest first; a line torn by a kill mid-write is skipped."""
    path = run_folder(run_id, database) / EPISODES_FILE
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


def run_result(run: TrainingRun, database: str | Path) -> dict[str, Any] | None:
    """What a finished run's final policy records of it (`policy.json`: steps, held-out success before and after,
    overall and by family), or None before there is one."""
    path = run_files_folder(run, database) / POLICY_DIR / POLICY_MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def log_tail(run_id: int, database: str | Path, lines: int = 30) -> str:
    """The last lines of the run's log.txt (what the training process printed), or "" when there is none."""
    path = run_folder(run_id, database) / LOG_FILE
    return "\n".join(_tail_lines(path, lines)) if path.is_file() else ""


def move_aside_leftovers(run_id: int, database: str | Path) -> None:
    """A new run's folder that already holds files belongs to an earlier run of the same id (its database was
    deleted and made again): keep it, renamed."""
    folder = run_folder(run_id, database)
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
