"""Which process trains a run: the lock it holds on the run's folder while it lives, and the record it writes there
(its pid and the moment that process started), so the studio, the CLI and a restarted studio tell a live trainer from
a dead one the same way, whoever started it; a second trainer on one run is refused.

The kernel drops the lock when the process ends, SIGKILL included, so a held lock means a live trainer. Before the
trainer takes it (while Python starts), the record its launcher wrote says which process to look for; the start time
tells that process from a later one the system gave the same pid."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.train.agent.run_files import RECORD_FILE, resolved_database, run_folder

try:
    import fcntl
except ImportError:  # Windows: no flock; the record alone says who trains
    fcntl = None

LOCK_FILE = "trainer.lock"
CLAIM_WAIT_S = 3.0  # a reader holds the lock for microseconds; a trainer retries this long before it gives up
_PROC = Path("/proc")


@dataclass
class TrainerRecord:
    """The process training a run, as it (or its launcher) wrote it: pid, start time, database."""

    pid: int
    started: str | None  # "<boot id>:<start time in clock ticks>" where /proc tells it, else None
    database: str
    written_at: str = ""

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass
class Claim:
    """A run held by this process: the open lock file (the lock lasts while it is open)."""

    run_id: int
    handle: IO[bytes] | None

    def release(self) -> None:
        if self.handle is not None and not self.handle.closed:
            self.handle.close()


def process_start(pid: int) -> str | None:
    """When process `pid` started ("<boot id>:<clock ticks since boot>"), or None where /proc cannot tell."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{fields[19]}"  # field 22 of stat, counted from the state (field 3)
    except (OSError, IndexError):
        return None


def process_running(pid: int, started: str | None = None) -> bool:
    """Whether process `pid` exists, is not a zombie and (when `started` is given and /proc tells) started then."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except (OverflowError, ValueError):
        return False
    try:
        state = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc here (macOS): existing is all we can tell
    if state in ("Z", "X"):
        return False
    return started is None or process_start(pid) in (None, started)


def write_record(run_id: int, pid: int, database: str | Path) -> TrainerRecord:
    """Write who trains run `run_id` (atomically: a reader sees the old record or the new one)."""
    record = TrainerRecord(pid, process_start(pid), resolved_database(database),
                           datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    target = run_folder(run_id, database) / RECORD_FILE
    partial = target.with_name(f".{RECORD_FILE}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(record.to_json()) + "\n", encoding="utf-8")
    partial.replace(target)
    return record


def read_record(run_id: int, database: str | Path) -> TrainerRecord | None:
    """The run's trainer record, or None when there is none (or it is not one we wrote)."""
    try:
        data = json.loads((run_folder(run_id, database) / RECORD_FILE).read_text(encoding="utf-8"))
        record = TrainerRecord(**data)
    except (OSError, ValueError, TypeError):
        return None
    if not whole_in(record.pid, 1):
        return None
    return record


def lock_held(run_id: int, database: str | Path) -> bool:
    """Whether a live process holds run `run_id`'s lock (it is training the run now)."""
    if fcntl is None:
        return False
    try:
        handle = (run_folder(run_id, database) / LOCK_FILE).open("rb")
    except OSError:
        return False  # no lock file: no trainer ever took it
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: readers never block one another
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def trainer_alive(run_id: int, database: str | Path) -> bool:
    """Whether run `run_id` of `database` has a live trainer: one holds its lock, or the process its record names
    (the launcher's, before the trainer locks) is still the one that started then."""
    record = read_record(run_id, database)
    if record is not None and record.database != resolved_database(database):
        return False  # a folder another database's run of the same id left (a database made again)
    if lock_held(run_id, database):
        return True
    return record is not None and process_running(record.pid, record.started)


def trainer_pid(run_id: int, database: str | Path) -> int | None:
    """The pid of run `run_id`'s live trainer (from its record), or None when none lives."""
    record = read_record(run_id, database)
    if record is None or not process_running(record.pid, record.started):
        return None
    return record.pid


def claim_run(run_id: int, database: str | Path, wait_s: float = CLAIM_WAIT_S) -> Claim:
    """Take run `run_id` for this process: its lock (held until the process ends or `release()`) and its record.
    InvalidInput naming the process that trains it when another one does."""
    if fcntl is None:
        write_record(run_id, os.getpid(), database)
        return Claim(run_id, None)
    handle = (run_folder(run_id, database) / LOCK_FILE).open("ab")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                raise InvalidInput(Problem("run_id", busy_message(run_id, database))) from None
            time.sleep(0.05)
    write_record(run_id, os.getpid(), database)
    return Claim(run_id, handle)


def busy_message(run_id: int, database: str | Path) -> str:
    """Why run `run_id` cannot get another trainer, naming the one it has."""
    record = read_record(run_id, database)
    who = f"process {record.pid} (since {record.written_at})" if record else "another process"
    return (f"run {run_id} is being trained by {who}: one run has one trainer. Wait for it to end, or stop it with "
            f"`wmstudio runs cancel {run_id}` and then `wmstudio runs resume {run_id}`")
