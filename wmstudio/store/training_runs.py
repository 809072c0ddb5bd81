"""Training runs on a curriculum version: config, process id, status, log file, and the metrics they log.

The training process writes its own status and metrics through these functions while the studio reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlmodel import select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import is_whole, number_in, whole_in
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.tables import (
    RUN_STATUSES,
    Curriculum,
    RunMetric,
    TrainingRun,
    utcnow,
)

FINAL_STATUSES = ("finished", "failed", "cancelled")


def create_run(store: Store, curriculum_id: int, config: Mapping[str, Any], log_path: str | None = None) -> TrainingRun:
    """Record a queued run of `config` (JSON-serialisable settings) on a curriculum version."""
    config = _json_object(config, "config")
    with store.write() as session:
        fetch_row(session, Curriculum, curriculum_id, "curriculum_id")
        run = TrainingRun(curriculum_id=curriculum_id, config=config, log_path=_path_text(log_path))
        session.add(run)
        session.flush()
        return run


def update_run(store: Store, run_id: int, *, status: str | None = None, pid: int | None = None,
               log_path: str | None = None, error: str | None = None,
               config: dict[str, Any] | None = None) -> TrainingRun:
    """Change what is given; `running` stamps started_at, finished/failed/cancelled stamp finished_at."""
    if status is not None and status not in RUN_STATUSES:
        raise InvalidInput(Problem("status", f"{status!r} is not a run status: use {', '.join(RUN_STATUSES)}"))
    if pid is not None and not whole_in(pid, 1):
        raise InvalidInput(Problem("pid", f"must be a process id (a positive whole number), got {pid!r}"))
    with store.write() as session:
        run = fetch_row(session, TrainingRun, run_id, "run_id")
        if status is not None:
            run.status = status
            if status == "running" and run.started_at is None:
                run.started_at = utcnow()
            if status in FINAL_STATUSES:
                run.finished_at = utcnow()
        if pid is not None:
            run.pid = pid
        if log_path is not None:
            run.log_path = _path_text(log_path)
        if error is not None:
            run.error = str(error)
        if config is not None:
            run.config = dict(config)
        session.add(run)
        return run


def add_metrics(store: Store, run_id: int, step: int, values: Mapping[str, float]) -> None:
    """Log named values (`{"loss": 0.8, "reward": 0.4}`) at a training step; non-finite values are refused."""
    if not whole_in(step, 0):
        raise InvalidInput(Problem("step", f"must be a training step (a whole number from 0), got {step!r}"))
    if not isinstance(values, Mapping):
        raise InvalidInput(Problem("values", "must map metric names to numbers"))
    rows = []
    for name, value in values.items():
        if not isinstance(name, str) or not name:
            raise InvalidInput(Problem("values", f"metric name {name!r} must be non-empty text"))
        if not number_in(value):
            raise InvalidInput(Problem(f"values.{name}", f"must be a finite number, got {value!r}"))
        rows.append(RunMetric(run_id=run_id, step=step, name=name, value=float(value)))
    with store.write() as session:
        fetch_row(session, TrainingRun, run_id, "run_id")
        session.add_all(rows)


def drop_metrics_after(store: Store, run_id: int, step: int) -> int:
    """Delete the run's values logged after `step`: a run resumed from the checkpoint of `step` trains the later
    steps again and logs them anew (one value per name and step). Returns how many went."""
    if not whole_in(step, 0):
        raise InvalidInput(Problem("step", f"must be a training step (a whole number from 0), got {step!r}"))
    with store.write() as session:
        fetch_row(session, TrainingRun, run_id, "run_id")
        gone = session.exec(sa.delete(RunMetric).where(RunMetric.run_id == run_id, RunMetric.step > step))
        return gone.rowcount or 0


def get_run(store: Store, run_id: int) -> TrainingRun:
    """The run with this id; InvalidInput when there is none."""
    with store.read() as session:
        return fetch_row(session, TrainingRun, run_id, "run_id")


def list_runs(store: Store, curriculum_id: int | None = None) -> list[TrainingRun]:
    """Runs, newest first, optionally only those on one curriculum version."""
    query = select(TrainingRun).order_by(TrainingRun.created_at.desc(), TrainingRun.id.desc())
    if curriculum_id is not None:
        query = query.where(TrainingRun.curriculum_id == curriculum_id)
    with store.read() as session:
        return list(session.exec(query))


def run_metrics(store: Store, run_id: int, name: str | None = None) -> list[RunMetric]:
    """A run's logged values by name then step (only `name` when given)."""
    query = select(RunMetric).where(RunMetric.run_id == run_id).order_by(RunMetric.name, RunMetric.step, RunMetric.id)
    if name is not None:
        query = query.where(RunMetric.name == name)
    with store.read() as session:
        return list(session.exec(query))


def logged_steps(store: Store, run_ids: Sequence[int]) -> dict[int, int]:
    """How many distinct steps each run has logged metrics at (0 for none): the runs table's progress column."""
    ids = [rid for rid in run_ids if is_whole(rid)]
    query = (select(RunMetric.run_id, sa.func.count(sa.distinct(RunMetric.step)))
             .where(RunMetric.run_id.in_(ids)).group_by(RunMetric.run_id))
    with store.read() as session:
        counts = dict(session.exec(query).all())
    return {rid: counts.get(rid, 0) for rid in ids}


def _json_object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(Problem(field, "must be an object of settings"))
    try:
        return json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as err:
        raise InvalidInput(Problem(field, f"must hold JSON values only ({err})")) from None


def _path_text(path: Any) -> str | None:
    return None if path is None else str(path)
