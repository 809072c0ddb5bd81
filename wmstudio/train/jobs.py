"""GRPO training runs as background jobs: start, cancel, resume and watch `wmstudio train-grpo` processes.

The one owner of a run's life, whoever starts it (the Train tab, `wmstudio runs`, `wmstudio train-grpo`): the
studio launches the process (`start_job`, `resume_job`) and reads the store; the process trains (`train_recorded`),
claims its run (`run_owner`: a lock on the run folder and a record of its pid and start time) and reports through
`JobReporter`; `refresh_jobs` marks the runs whose process is gone after a restart. The store row says what state
a run is in; its files (log, episodes, checkpoints, policy) are `run_files`'."""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from wmstudio.locations import REPO_ROOT
from wmstudio.model.remote_world_model import WorldModelUnavailable
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.store import (
    Curriculum,
    Store,
    TrainingRun,
    add_metrics,
    create_run,
    drop_metrics_after,
    get_run,
    list_runs,
    open_store,
    update_run,
)
from wmstudio.train.agent_config import ENVIRONMENTS, MAX_BATCH, GrpoSettings
from wmstudio.train.curriculum_scenarios import (
    DEMO_CURRICULUM,
    curriculum_row,
    curriculum_scenarios,
    seed_demo_scenarios,
)
from wmstudio.train.run_files import (
    CHECKPOINTS_DIR,
    LOG_FILE,
    append_episodes,
    checkpoint_step,
    drop_episodes_after,
    move_aside_leftovers,
    run_checkpoints,
    run_files_folder,
    run_folder,
)
from wmstudio.train.run_owner import (
    RECORD_FILE,
    Claim,
    busy_message,
    claim_run,
    trainer_alive,
    trainer_pid,
    write_record,
)
from wmstudio.train.scenarios import batch_problems, policy_words, tool_problems

MAX_STEPS = 10_000
MAX_SEED = 2**31 - 1
LIVE_STATUSES = ("queued", "running")
ENDED_UNREPORTED = "the training process ended without reporting (killed?)"
NEVER_STARTED = "the training process never started (the studio stopped while starting it?)"
START_GRACE_S = 60.0  # a queued run without a process this long after it was made never got one
CANCEL_GRACE_S = 10.0  # how long a cancelled process may take to stop before it is killed
CANCELLED_EXIT_CODE = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM
MAX_ERROR_CHARS = 4000
RECORDED_SETTINGS = ("policy", "save_every", "generations", "scenarios_per_step", "minutes", "learning_rate", "beta",
                     "temperature", "threads", "lora_rank", "model", "world_model_url", "out")  # passed on when set
MAX_LIVE_JOBS = 2  # runs training at once (each takes a core or more); a shared studio cannot be flooded with them

_cancelling: set[tuple[str, int]] = set()  # (database, run id) being cancelled here: refresh_jobs leaves them alone
_registry_lock = threading.Lock()


def demo_curriculum(store: Store) -> Curriculum:
    """The built-in `demo` curriculum row (made once) with its scenarios saved in it (once, then edited in the
    studio): demo runs' episodes come from scenarios, not from rollouts."""
    return seed_demo_scenarios(store)


# --- inside the training process ------------------------------------------------------------------------------


class JobReporter:
    """What a training process tells the store about its run: running (with its pid), metrics per step,
    episode transcripts, and how it ended; SIGTERM records `cancelled` and exits at once (code 143).

    Use `with JobReporter(store, run_id) as reporter:` (start, then finish, or fail on an exception) or call
    `start()` / `finish()` / `fail(message)` yourself. `start` first claims the run for this process, so a
    second trainer on it is refused. Each metrics call is committed when it returns."""

    def __init__(self, store: Store, run_id: int):
        self.store = store
        self.run_id = run_id
        self._writing = 0  # inside one of our store writes: a SIGTERM then waits until it is committed
        self._cancel_pending = False
        self._claim: Claim | None = None

    def __enter__(self) -> JobReporter:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, _tb: Any) -> None:
        if kind is None or (kind is SystemExit and err is not None and err.code in (0, None)):
            self.finish()
        else:
            self.fail(f"{kind.__name__}: {err}" if str(err) else kind.__name__)

    def claim(self) -> None:
        """Take the run for this process (held until it ends); InvalidInput naming the process that trains it
        when another one does."""
        if self._claim is None:
            self._claim = claim_run(self.run_id, self.store.path)

    def release(self) -> None:
        """Let go of the run (another process may train it from now on)."""
        if self._claim is not None:
            self._claim.release()
            self._claim = None

    def start(self, resumed_from: int | None = None) -> None:
        """Claim the run, mark it running with this process's id and no error, and make SIGTERM mean
        "cancelled" (main thread only). `resumed_from`: the step of the checkpoint training continues from
        (0: none); what was logged after it goes, since those steps are trained and logged again."""
        self.claim()
        try:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread: SIGTERM keeps its default (cancel_job still records it)
            pass
        if resumed_from is not None:
            self._write(lambda: drop_metrics_after(self.store, self.run_id, resumed_from))
            drop_episodes_after(self.run_id, self.store.path, resumed_from)
        self._write(lambda: update_run(self.store, self.run_id, status="running", pid=os.getpid(), error=""))

    def metrics(self, step: int, values: Mapping[str, Any]) -> None:
        """Log this step's values; names with a non-finite or non-numeric value are left out, not raised."""
        finite = {}
        for name, value in values.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if isinstance(name, str) and name and math.isfinite(number) and not isinstance(value, bool):
                finite[name] = number
        if finite:
            self._write(lambda: add_metrics(self.store, self.run_id, int(step), finite))

    def episodes(self, step: int, episodes: Sequence[Mapping[str, Any]]) -> None:
        """Append each episode (`scenario`, `task`, `transcript`, `reward`, `success`, ...) with its step to the
        run's episodes.jsonl."""
        append_episodes(self.run_id, self.store.path, step, episodes)

    def finish(self) -> None:
        """Mark the run finished (a run already recorded as cancelled stays cancelled)."""
        self._end("finished", "")

    def fail(self, message: str) -> None:
        """Mark the run failed with this message (a run already recorded as cancelled stays cancelled)."""
        self._end("failed", str(message)[-MAX_ERROR_CHARS:] or "failed")

    def _end(self, status: str, error: str) -> None:
        def record() -> None:
            if get_run(self.store, self.run_id).status != "cancelled":
                update_run(self.store, self.run_id, status=status, error=error)
        try:
            self._write(record)
        finally:
            self.release()

    def _write(self, action) -> None:
        self._writing += 1
        try:
            action()
        finally:
            self._writing -= 1
        if self._cancel_pending and not self._writing:
            self._cancel_and_exit()

    def _on_sigterm(self, _signum: int, _frame: Any) -> None:
        if self._writing:  # this thread holds the write lock: record the cancel once that write commits
            self._cancel_pending = True
        else:
            self._cancel_and_exit()

    def _cancel_and_exit(self) -> None:
        """Record `cancelled` (on a connection of its own, waiting at most 5 s) and end the process now; a run
        that already finished or failed keeps what it said."""
        def record() -> None:
            own = Store(self.store.path)  # not this thread's engine: it may be mid-use
            try:
                if get_run(own, self.run_id).status in LIVE_STATUSES:
                    update_run(own, self.run_id, status="cancelled")
            finally:
                own.close()
        writer = threading.Thread(target=record, daemon=True)
        writer.start()
        writer.join(timeout=5.0)
        print(f"run {self.run_id}: cancelled (SIGTERM)", file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(CANCELLED_EXIT_CODE)


def begin_job(store: Store, run_id: int | None, resume: bool, curriculum_id: int,
              config: Mapping[str, Any]) -> JobReporter:
    """Inside `train-grpo`: the reporter of the run it trains, claimed for this process. The run is made now
    unless the studio made it (`run_id`); a given run must be queued, or with `resume` anything but finished (a
    finished one only when `config` asks for more steps than it trained).
    InvalidInput (nothing recorded) when another process trains the run or it is not one to train now."""
    if run_id is None:
        run_id = create_run(store, curriculum_id, config).id
        move_aside_leftovers(run_id, store.path)
    get_run(store, run_id)  # one that exists, before its folder is made
    reporter = JobReporter(store, run_id)
    reporter.claim()
    run = get_run(store, run_id)
    status = run.status
    further = resume and status == "finished" and _steps(config) > _steps(run.config)
    if status == "queued" or (resume and status != "finished") or further:
        if further:  # train a finished run on to a larger --max-steps, from its newest checkpoint
            update_run(store, run_id, config={**run.config, "max_steps": _steps(config)})
        return reporter
    reporter.release()
    if status == "finished":
        raise InvalidInput(Problem("run_id", f"run {run_id} already finished its {_steps(run.config)} steps: "
                                             "resume it with a larger --max-steps, or start a new run"))
    raise InvalidInput(Problem("run_id", f"run {run_id} is {status}: continue it from its newest checkpoint with "
                                         f"--resume (or `wmstudio runs resume {run_id}`), or start a new run"))


def train_recorded(settings: GrpoSettings, log: Callable[[str], None],
                   on_step: Callable[[int, dict[str, float]], None] | None = None) -> dict[str, Any] | None:
    """What `wmstudio train-grpo` does: train GRPO as a recorded run. The run row (made here unless the studio made
    it: `settings.run_id`) is claimed for this process, so a second trainer on it is refused; its status, metrics
    and episodes go through the job reporter, and `on_step(step, values)` hears each logged step. Returns the run
    id and the result; None in torchrun's other processes, which train beside rank 0 (it records the run)."""
    store = open_store(settings.db)
    row = curriculum_row(store, settings.curriculum)  # a wrong name is refused before the model libraries load
    scenarios = curriculum_scenarios(store, settings.curriculum)
    problems = batch_problems(scenarios, settings.scenarios_per_step, repr(settings.curriculum))
    if problems and settings.run_id is None:  # refused before a run is recorded (the studio's own run: failed below)
        raise InvalidInput(problems)
    from wmstudio.train.environments import world_model_for
    from wmstudio.train.grpo import distributed_rank, latest_checkpoint, train_grpo

    if distributed_rank() > 0:
        if settings.out is None:
            raise InvalidInput(Problem("--out", "under torchrun give the run folder, which every process shares"))
        backend = world_model_for(settings.env, settings.model, settings.world_model_url)
        train_grpo(settings, settings.out, backend, log=lambda _: None, curriculum=scenarios)
        return None
    config = {"curriculum": settings.curriculum, "curriculum_version": row.version, "env": settings.env,
              "max_steps": settings.max_steps, "seed": settings.seed}
    config.update({key: _as_recorded(value) for key in RECORDED_SETTINGS
                   if (value := getattr(settings, key)) is not None})  # `wmstudio runs resume` passes them on
    reporter = begin_job(store, settings.run_id, settings.resume, row.id, config)
    folder = settings.out or run_folder(reporter.run_id, store.path)
    folder.mkdir(parents=True, exist_ok=True)
    newest = latest_checkpoint(folder) if settings.resume else None

    def on_metrics(step: int, values: dict[str, float]) -> None:
        reporter.metrics(step, values)
        if on_step is not None:
            on_step(step, values)

    reporter.start(resumed_from=(checkpoint_step(newest) if newest else 0) if settings.resume else None)
    try:
        backend = world_model_for(settings.env, settings.model, settings.world_model_url)
        result = train_grpo(settings, folder, backend, on_metrics, reporter.episodes, log=log, curriculum=scenarios)
    except BaseException as err:  # bad input or an unreachable world model is said as it is; the rest with its kind
        said = isinstance(err, (InvalidInput, WorldModelUnavailable))
        reporter.fail(str(err) if said else f"{type(err).__name__}: {err}")
        raise
    reporter.finish()
    return {"run_id": reporter.run_id, **result.to_json()}


def _as_recorded(value: Any) -> Any:
    """A setting as a run records it: a local path made absolute (a resume may start from another folder)."""
    if isinstance(value, Path) or (isinstance(value, str) and value and Path(value).exists()):
        return str(Path(value).resolve())
    return value


# --- in the studio: start, cancel, resume, watch ----------------------------------------------------------------


def _steps(config: Mapping[str, Any] | None) -> int:
    value = (config or {}).get("max_steps")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def training_command(run_id: int, config: Mapping[str, Any], db_path: str | Path, resume: bool = False) -> list[str]:
    """The `wmstudio train-grpo` command line that trains run `run_id` with its saved settings."""
    command = [sys.executable, "-m", "wmstudio.cli", "train-grpo", "--curriculum", str(config["curriculum"]),
               "--env", str(config["env"]), "--max-steps", str(config["max_steps"]), "--db", str(db_path),
               "--run-id", str(run_id), "--seed", str(config.get("seed", 0))]
    for key in RECORDED_SETTINGS:
        if config.get(key) is not None:
            command += ["--" + key.replace("_", "-"), str(config[key])]
    return command + (["--resume"] if resume else [])


def job_settings(curriculum: Any = DEMO_CURRICULUM, env: Any = "simulator", max_steps: Any = 20, seed: Any = 0,
                 policy: Any = None, save_every: Any = None, scenarios_per_step: Any = None,
                 generations: Any = None) -> dict[str, Any]:
    """The settings of a run, checked: InvalidInput names each bad one and what to give instead. `policy`,
    `save_every` and the batch (`scenarios_per_step`, `generations`) are left to train-grpo's defaults (the shipped
    policy, its checkpoint interval, 4 x 8) when None."""
    problems = []
    for name, value, low in (("scenarios_per_step", scenarios_per_step, 1), ("generations", generations, 2)):
        if value is not None and not whole_in(value, low, MAX_BATCH):
            problems.append(Problem(name, f"must be a whole number from {low} to {MAX_BATCH}, got {value!r}"))
    if policy is not None and (not isinstance(policy, (str, Path)) or not str(policy).strip()):
        problems.append(Problem("policy", "give the folder of a policy `wmstudio train-agent` made, or leave it out"))
    if save_every is not None and not whole_in(save_every, 1):
        problems.append(Problem("save_every", f"must be a whole number of steps from 1, got {save_every!r}"))
    if not isinstance(curriculum, str) or not curriculum.strip():
        problems.append(Problem("curriculum", f"give a curriculum name, e.g. {DEMO_CURRICULUM!r}"))
    if env not in ENVIRONMENTS:
        problems.append(Problem("env", f"{env!r} is not an environment: use {', '.join(ENVIRONMENTS)}"))
    for name, value, high in (("max_steps", max_steps, MAX_STEPS), ("seed", seed, MAX_SEED)):
        low = 1 if name == "max_steps" else 0
        if not whole_in(value, low, high):
            problems.append(Problem(name, f"must be a whole number from {low} to {high:,}, got {value!r}"))
    if problems:
        raise InvalidInput(problems)
    settings = {"curriculum": curriculum.strip(), "env": env, "max_steps": max_steps, "seed": seed}
    if policy is not None:
        settings["policy"] = str(policy)
    for name, value in (("save_every", save_every), ("scenarios_per_step", scenarios_per_step),
                        ("generations", generations)):
        if value is not None:
            settings[name] = value
    return settings


def start_job(store: Store, *, curriculum: str = DEMO_CURRICULUM, env: str = "simulator", max_steps: int = 20,
              seed: int = 0, db_path: str | Path | None = None, policy: str | Path | None = None,
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
