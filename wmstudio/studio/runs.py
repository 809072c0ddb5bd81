"""GRPO training runs behind the Train tab, the named API's start_run/run_status, and `wmstudio runs` and
`train-grpo`: start, cancel, resume, list and show runs, and train one as a recorded run.

A run's whole life is `train/agent/jobs.py`'s (the studio starts `wmstudio train-grpo` in the background; that process
trains through `train_recorded`); this module is the door the tabs and commands use, with the run as JSON."""

from __future__ import annotations

from typing import Any

from wmstudio.store import (  # noqa: F401 - re-exported: the door to the store's runs
    Store,
    TrainingRun,
    get_run,
    list_runs,
    logged_steps,
    run_metrics,
)
from wmstudio.train.agent.jobs import (  # noqa: F401 - re-exported: a run's life
    DEMO_CURRICULUM,
    ENVIRONMENT_HELP,
    ENVIRONMENTS,
    LIVE_STATUSES,
    MAX_STEPS,
    cancel_job,
    refresh_jobs,
    resume_job,
    run_checkpoints,
    start_job,
    train_recorded,
)
from wmstudio.train.agent.run_files import latest_episodes, log_tail, run_files_folder, run_result  # noqa: F401


def run_json(store: Store, run: TrainingRun, detail: bool = False) -> dict[str, Any]:
    """A run as `wmstudio runs list` / `runs show` print it (show adds the last values, checkpoints and the log's
    tail)."""
    when = lambda moment: moment.isoformat(timespec="seconds") if moment else None  # noqa: E731
    data = {"id": run.id, "status": run.status, "curriculum": run.config.get("curriculum"),
            "env": run.config.get("env"), "max_steps": run.config.get("max_steps"),
            "steps_logged": logged_steps(store, [run.id])[run.id], "pid": run.pid, "created": when(run.created_at),
            "started": when(run.started_at), "finished": when(run.finished_at), "error": run.error}
    if detail:
        last: dict[str, dict[str, float]] = {}
        for metric in run_metrics(store, run.id):
            last[metric.name] = {"step": metric.step, "value": metric.value}
        data.update({"config": run.config, "folder": str(run_files_folder(run, store.path)), "last_values": last,
                     "checkpoints": [p.name for p in run_checkpoints(run, store.path)],
                     "log_tail": log_tail(run.id, store.path, 20)})
    return data


def runs_now(store: Store) -> list[TrainingRun]:
    """Every run, newest first, as it is now: a run whose process is gone (after a restart, a kill) is marked
    failed first."""
    refresh_jobs(store)
    return list_runs(store)
