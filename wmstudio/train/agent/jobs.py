"""GRPO training runs as background jobs: start, cancel, resume and watch `wmstudio train-grpo` processes.

The one owner of a run's life, whoever starts it (the Train tab, `wmstudio runs`, `wmstudio train-grpo`): the
studio launches the process (`start_job`, `resume_job`) and reads the store; the process trains
(train/agent/job_process.py: `train_recorded`), claims its run (`run_owner`: a lock on the run folder and a record of its
pid and start time) and reports through `JobReporter`; `refresh_jobs` marks the runs whose process is gone after a
restart. The store row says what state a run is in; its files (log, episodes, checkpoints, policy) are
`run_files`'."""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from wmstudio.locations import REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import setting_specs
from wmstudio.store import (
    Curriculum,
    Store,
    TrainingRun,
    create_run,
    get_run,
    list_runs,
    update_run,
)
from wmstudio.train.agent.agent_config import MAX_SEED, MAX_STEPS, GrpoSettings  # noqa: F401 - bounds named here
from wmstudio.train.agent.curriculum_scenarios import (  # noqa: F401 - DEMO_CURRICULUM re-exported
    DEMO_CURRICULUM,
    curriculum_row,
    curriculum_scenarios,
    seed_demo_scenarios,
)
from wmstudio.train.agent.environment_kinds import ENVIRONMENT_HELP, ENVIRONMENTS, environment_kind  # noqa: F401
from wmstudio.train.agent.job_process import (  # noqa: F401 - the process's side, named here too
    CANCELLED_EXIT_CODE,
    LIVE_STATUSES,
    MAX_ERROR_CHARS,
    RECORDED_SETTINGS,
    JobReporter,
    begin_job,
    train_recorded,
)
from wmstudio.train.agent.run_files import (
    CHECKPOINTS_DIR,
    LOG_FILE,
    move_aside_leftovers,
    run_checkpoints,
    run_files_folder,
    run_folder,
)
from wmstudio.train.agent.run_owner import (
    RECORD_FILE,
    busy_message,
    trainer_alive,
    trainer_pid,
    write_record,
)
from wmstudio.train.agent.scenarios import batch_problems, policy_words, tool_problems

ENDED_UNREPORTED = "the training process ended without reporting (killed?)"
NEVER_STARTED = "the training process never started (the studio stopped while starting it?)"
START_GRACE_S = 60.0  # a queued run without a process this long after it was made never got one
CANCEL_GRACE_S = 10.0  # how long a cancelled process may take to stop before it is killed
MAX_LIVE_JOBS = 2  # runs training at once (each takes a core or more); a shared studio cannot be flooded with them

_cancelling: set[tuple[str, int]] = set()  # (database, run id) being cancelled here: refresh_jobs leaves them alone
_registry_lock = threading.Lock()


def demo_curriculum(store: Store) -> Curriculum:
    """The built-in `demo` curriculum row (made once) with its scenarios saved in it (once, then edited in the
    studio): demo runs' episodes come from scenarios, not from rollouts."""
    return seed_demo_scenarios(store)


# --- in the studio: start, cancel, resume, watch ----------------------------------------------------------------


def training_command(run_id: int, config: Mapping[str, Any], db_path: str | Path, resume: bool = False) -> list[str]:
    """The `wmstudio train-grpo` command line that trains run `run_id` with its saved settings."""
    command = [sys.executable, "-m", "wmstudio.cli", "train-grpo", "--curriculum", str(config["curriculum"]),
               "--env", str(config["env"]), "--max-steps", str(config["max_steps"]), "--db", str(db_path),
               "--run-id", str(run_id), "--seed", str(config.get("seed", 0))]
    for key in RECORDED_SETTINGS:
        if config.get(key) is not None:
            command += ["--" + key.replace("_", "-"), str(config[key])]
    return command + (["--resume"] if resume else [])


_DEFAULTS = {spec.name: spec.default for spec in setting_specs(GrpoSettings)}  # the one declaration's


def job_settings(curriculum: Any = _DEFAULTS["curriculum"], env: Any = _DEFAULTS["env"],
                 max_steps: Any = _DEFAULTS["max_steps"], seed: Any = _DEFAULTS["seed"], policy: Any = None,
                 save_every: Any = None, scenarios_per_step: Any = None, generations: Any = None) -> dict[str, Any]:
    """The settings of a run, checked by GrpoSettings (the declaration `wmstudio train-grpo`, the Train tab and the
    API share: its defaults, bounds and choices): InvalidInput names each bad one and what to give instead.
    `policy`, `save_every` and the batch (`scenarios_per_step`, `generations`) are left to train-grpo's defaults
    when None."""
    settings = {"curriculum": curriculum.strip() if isinstance(curriculum, str) else curriculum, "env": env,
                "max_steps": max_steps, "seed": seed}
    settings.update({name: value for name, value in (("policy", policy), ("save_every", save_every),
                                                     ("scenarios_per_step", scenarios_per_step),
                                                     ("generations", generations)) if value is not None})
    GrpoSettings(**settings)
    if "policy" in settings:
        settings["policy"] = str(settings["policy"])
    return settings


def start_job(store: Store, *, curriculum: str = _DEFAULTS["curriculum"], env: str = _DEFAULTS["env"],
              max_steps: int = _DEFAULTS["max_steps"], seed: int = _DEFAULTS["seed"],
              db_path: str | Path | None = None, policy: str | Path | None = None,
              save_every: int | None = None, scenarios_per_step: int | None = None,
              generations: int | None = None) -> TrainingRun:
    """Record a run of these settings and start `wmstudio train-grpo` for it in the background (its own session,
    so it outlives the studio); output goes to the run folder's log.txt. Returns the run with its pid. A run that
    could not build a step from the curriculum is refused here, before anything is recorded."""
    config = job_settings(curriculum, env, max_steps, seed, policy, save_every, scenarios_per_step, generations)
    _refuse_when_busy(store)
    refuse_untrainable(store, config["curriculum"], config.get("scenarios_per_step"), config.get("policy"))
    row = curriculum_row(store, config["curriculum"])
    config["curriculum_version"] = row.version
    run = create_run(store, row.id, config)
    move_aside_leftovers(run.id, store.path)
    return _launch(store, run, db_path or store.path, resume=False)


def resume_job(store: Store, run_id: int) -> TrainingRun:
    """Start a failed or cancelled run again from its newest checkpoint (same run id, same settings)."""
    refresh_jobs(store)
    run = get_run(store, run_id)
    if run.status in LIVE_STATUSES:
        raise InvalidInput(Problem("run_id", f"run {run_id} is still {run.status}: cancel it first, or let it end"))
    if run.status == "finished":
        raise InvalidInput(Problem("run_id", f"run {run_id} already finished: start a new run to train further"))
    if trainer_alive(run_id, store.path):  # marked ended, yet a process still trains it: never a second one
        raise InvalidInput(Problem("run_id", busy_message(run_id, store.path)))
    if not run_checkpoints(run, store.path):
        raise InvalidInput(Problem("run_id", f"run {run_id} has no checkpoint to resume from (none in "
                                             f"{run_files_folder(run, store.path) / CHECKPOINTS_DIR}): start a new run instead"))
    job_settings(**{k: run.config.get(k) for k in ("curriculum", "env", "max_steps", "seed", "policy", "save_every")})
    _refuse_when_busy(store)
    run = update_run(store, run_id, status="queued", error="")
    return _launch(store, run, store.path, resume=True)


def cancel_job(store: Store, run_id: int, grace_s: float = CANCEL_GRACE_S) -> TrainingRun:
    """Stop a queued or running run: SIGTERM, SIGKILL after `grace_s` if it is still there, and the row says
    cancelled (unless it finished first). InvalidInput for a run that already ended."""
    run = get_run(store, run_id)
    if run.status not in LIVE_STATUSES:
        raise InvalidInput(Problem("run_id", f"run {run_id} already {run.status}: only a queued or running run "
                                             "can be cancelled"))
    key = (str(store.path), run_id)
    with _registry_lock:
        _cancelling.add(key)
    try:
        if job_alive(run_id, store.path):
            pid = trainer_pid(run_id, store.path)
            if pid is None:
                raise InvalidInput(Problem("run_id", f"run {run_id} is training but its process is not recorded "
                                                     f"in {run_folder(run_id, store.path)}: stop that process yourself"))
            _stop(pid, run_id, store.path, grace_s)
        now = get_run(store, run_id)
        if now.status in LIVE_STATUSES or (now.status == "failed" and now.error == ENDED_UNREPORTED):
            update_run(store, run_id, status="cancelled", error="")
        return get_run(store, run_id)
    finally:
        with _registry_lock:
            _cancelling.discard(key)


def refresh_jobs(store: Store) -> list[TrainingRun]:
    """Mark queued or running runs whose process is gone (killed, crashed, machine restarted) as failed, so
    the store says what is true after a restart of the studio; returns the runs it changed. A run's process is
    the one that claimed it, whoever started it (the studio, `wmstudio runs`, `train-grpo` in a terminal)."""
    changed = []
    for run in list_runs(store):
        if run.status not in LIVE_STATUSES:
            continue
        with _registry_lock:
            if (str(store.path), run.id) in _cancelling:
                continue
        if job_alive(run.id, store.path):
            continue
        if run.pid is None and not (run_folder(run.id, store.path) / RECORD_FILE).is_file():
            if _age(run.created_at) > START_GRACE_S:
                changed.append(update_run(store, run.id, status="failed", error=NEVER_STARTED))
        elif get_run(store, run.id).status in LIVE_STATUSES:
            changed.append(update_run(store, run.id, status="failed", error=ENDED_UNREPORTED))
    return changed


def job_alive(run_id: int, database: str | Path) -> bool:
    """Whether run `run_id` of `database` has a live training process: the process that claimed
    it holds its lock, or the one the studio launched for it is still starting (the same pid and start time, so
    a pid the system gave to another process since does not count)."""
    return trainer_alive(run_id, database)


def _launch(store: Store, run: TrainingRun, db_path: str | Path, resume: bool) -> TrainingRun:
    log_path = run_folder(run.id, store.path) / LOG_FILE
    command = training_command(run.id, run.config, db_path, resume)
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
    with log_path.open("ab") as log:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        log.write(f"[{stamp}] {'resuming' if resume else 'starting'}: {shlex.join(command)}\n".encode())
        log.flush()
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
        except OSError as err:
            update_run(store, run.id, status="failed", error=f"could not start the training process: {err}")
            raise InvalidInput(Problem("run", f"could not start {command[0]} ({err.strerror}): check the "
                                              "Python installation the studio runs on")) from None
    write_record(run.id, child.pid, db_path)  # who to look for until the process claims the run itself
    threading.Thread(target=child.wait, name=f"reap-run-{run.id}", daemon=True).start()  # never a zombie
    return update_run(store, run.id, pid=child.pid, log_path=str(log_path))


def refuse_untrainable(store: Store, curriculum: str, scenarios_per_step: int | None, policy: str | None = None
                       ) -> None:
    """InvalidInput, with the fix, when GRPO could not build one step from the curriculum's latest scenarios
    (none to train on, or fewer than a step plays), or the policy names none of their worlds' tools."""
    per_step = scenarios_per_step if scenarios_per_step is not None else GrpoSettings.scenarios_per_step
    scenarios = curriculum_scenarios(store, curriculum)
    problems = batch_problems(scenarios, per_step, repr(curriculum))
    problems += tool_problems(scenarios, policy_words(policy or GrpoSettings.policy), repr(curriculum))
    if problems:
        raise InvalidInput(problems)


def _refuse_when_busy(store: Store) -> None:
    """InvalidInput when MAX_LIVE_JOBS runs are already queued or running (after marking dead ones failed)."""
    refresh_jobs(store)
    live = [run.id for run in list_runs(store) if run.status in LIVE_STATUSES]
    if len(live) >= MAX_LIVE_JOBS:
        shown = ", ".join(f"#{rid}" for rid in sorted(live))
        raise InvalidInput(Problem("run", f"{len(live)} runs are training already ({shown}), the most at once: "
                                          "wait for one to end, or cancel one"))


def _stop(pid: int, run_id: int, database: str | Path, grace_s: float) -> None:
    """SIGTERM, wait, SIGKILL; then kill whatever the process left in its own process group when the studio
    started it in a session of its own (a run started in a terminal shares its group with the shell's pipeline)."""
    try:
        group = pid if os.getpgid(pid) == pid and os.getsid(pid) == pid else None
    except ProcessLookupError:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while job_alive(run_id, database) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not job_alive(run_id, database):
            break
    if group is not None:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _age(when: datetime | None) -> float:
    if when is None:
        return math.inf
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return (datetime.now(UTC) - when) / timedelta(seconds=1)
