"""A GRPO run's side inside its training process: `train_recorded` (what `wmstudio train-grpo` does) makes or takes
the run, claims it for this process (`begin_job`: a second trainer on it is refused) and reports through
`JobReporter`: running with its pid, metrics per step, episodes, and how it ended (SIGTERM: cancelled). The studio's
side, which launches and watches these processes, is train/agent/jobs.py."""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wmstudio.model.serving.remote_world_model import WorldModelUnavailable
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import Store, add_metrics, create_run, drop_metrics_after, get_run, open_store, update_run
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.curriculum_scenarios import curriculum_row, curriculum_scenarios
from wmstudio.train.agent.run_files import (
    append_episodes,
    checkpoint_step,
    drop_episodes_after,
    move_aside_leftovers,
    run_folder,
)
from wmstudio.train.agent.run_owner import Claim, claim_run
from wmstudio.train.agent.scenarios import batch_problems

LIVE_STATUSES = ("queued", "running")
CANCELLED_EXIT_CODE = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM
MAX_ERROR_CHARS = 4000
RECORDED_SETTINGS = ("policy", "save_every", "generations", "scenarios_per_step", "minutes", "learning_rate", "beta",
                     "temperature", "threads", "lora_rank", "model", "world_model_url", "out")  # passed on when set


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
    further = resume and status == "finished" and recorded_steps(config) > recorded_steps(run.config)
    if status == "queued" or (resume and status != "finished") or further:
        if further:  # train a finished run on to a larger --max-steps, from its newest checkpoint
            update_run(store, run_id, config={**run.config, "max_steps": recorded_steps(config)})
        return reporter
    reporter.release()
    if status == "finished":
        raise InvalidInput(Problem("run_id", f"run {run_id} already finished its {recorded_steps(run.config)} steps: "
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
    from wmstudio.train.agent.environments import world_model_for
    from wmstudio.train.agent.grpo import distributed_rank, latest_checkpoint, train_grpo

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


def recorded_steps(config: Mapping[str, Any] | None) -> int:
    """The steps a run's config asks for (0 when it names none)."""
    value = (config or {}).get("max_steps")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
