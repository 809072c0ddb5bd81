"""GRPO training runs as background jobs, with real SQLite files and real child processes: what a killed process
leaves behind, what cancelling records, when resuming is refused, and the built-in demo curriculum.

The children are small Python programs that report through JobReporter (the contract `train-grpo` follows);
the slow test at the end trains a real policy with `wmstudio train-grpo` and resumes it after a SIGKILL."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wmstudio.locations import REPO_ROOT
from wmstudio.problems import InvalidInput
from wmstudio.store import (
    create_run,
    get_run,
    list_curricula,
    open_store,
    run_metrics,
    update_run,
)
from wmstudio.train import jobs
from wmstudio.train.agent_config import DEFAULT_POLICY, AgentTrainConfig
from wmstudio.train.jobs import (
    ENDED_UNREPORTED,
    JobReporter,
    cancel_job,
    demo_curriculum,
    job_alive,
    refresh_jobs,
    resume_job,
    start_job,
)
from wmstudio.train.run_files import checkpoints, latest_episodes, run_folder

# A stand-in trainer: takes train-grpo's options, reports `--max-steps` steps through JobReporter (printing
# "wrote N" once step N's metrics are committed), saves a checkpoint folder every 2 steps, pauses between steps.
FAKE_TRAINER = r"""
import sys, time
from wmstudio.store import open_store
from wmstudio.train.jobs import JobReporter
from wmstudio.train.run_files import checkpoints, run_folder
args = sys.argv[1:]
option = lambda name, default=None: args[args.index(name) + 1] if name in args else default
run_id, steps, pause = int(option("--run-id")), int(option("--max-steps")), float(option("--pause", "0.3"))
first = 0
if "--resume" in args:
    first = int(checkpoints(run_id)[-1].name.split("-")[1])
with JobReporter(open_store(option("--db")), run_id) as reporter:
    for step in range(first, steps):
        reporter.metrics(step, {"reward": step / 10, "success": step % 2, "kl": float("nan"), "loss": 1.0 / (step + 1)})
        reporter.episodes(step, [{"scenario": f"retail-train-{step}", "task": "Refund order ORD-1.",
                                  "transcript": ["agent: refund_order {}", "world: {\"status\": \"ok\"}"],
                                  "reward": step / 10, "success": bool(step % 2)}])
        print(f"wrote {step}", flush=True)
        if step % 2 == 1:
            saved = run_folder(run_id) / "checkpoints" / f"checkpoint-{step + 1}"
            saved.mkdir(parents=True, exist_ok=True)
            (saved / "trainer_state.json").write_text("{}")
        time.sleep(pause)
    if option("--fail"):
        raise RuntimeError(option("--fail"))
"""


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    return open_store(tmp_path / "studio.db")


@pytest.fixture
def fake_trainer(monkeypatch):
    """Jobs run FAKE_TRAINER with train-grpo's options instead of the real trainer."""
    real = jobs.training_command

    def command(run_id, config, db_path, resume=False):
        return [sys.executable, "-c", FAKE_TRAINER, *real(run_id, config, db_path, resume)[4:], "--pause", "0.2"]

    monkeypatch.setattr(jobs, "training_command", command)


def spawn(store, run_id: int, steps: int, out: Path, *extra: str) -> subprocess.Popen:
    """FAKE_TRAINER as a child of this test (not registered with jobs), its prints in `out`."""
    with out.open("w") as handle:
        return subprocess.Popen([sys.executable, "-c", FAKE_TRAINER, "--db", str(store.path), "--run-id", str(run_id),
                                 "--max-steps", str(steps), *extra], stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_until(condition, seconds: float = 60.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def new_run(store, **config) -> int:
    return create_run(store, demo_curriculum(store).id, {"curriculum": "demo", "env": "simulator", "max_steps": 5,
                                                          "seed": 0, **config}).id


def wrote_steps(out: Path) -> list[int]:
    return [int(line.split()[1]) for line in out.read_text().splitlines() if line.startswith("wrote ")]


def test_a_killed_process_keeps_every_metric_it_wrote_and_is_marked_failed(store, tmp_path):
    run_id = new_run(store)
    out = tmp_path / "child.txt"
    child = spawn(store, run_id, 1000, out, "--pause", "0.01")
    try:
        wait_until(lambda: len(wrote_steps(out)) >= 5, what="five steps")
        assert get_run(store, run_id).status == "running" and get_run(store, run_id).pid == child.pid
        assert job_alive(child.pid, run_id)
        os.kill(child.pid, signal.SIGKILL)
        wait_until(lambda: not job_alive(child.pid, run_id), what="the kill")  # a zombie (not reaped yet) is dead
        written = wrote_steps(out)  # read after the kill: everything the child confirmed before it died
        rewards = {m.step: m.value for m in run_metrics(store, run_id, "reward")}
        assert set(written) <= set(rewards), f"steps confirmed but lost: {sorted(set(written) - set(rewards))}"
        assert all(math.isclose(rewards[s], s / 10) for s in written)
        assert run_metrics(store, run_id, "kl") == []  # NaN is left out, not raised
        assert get_run(store, run_id).status == "running"  # nobody told the store yet

        changed = refresh_jobs(store)
        run = get_run(store, run_id)
        assert [r.id for r in changed] == [run_id]
        assert (run.status, run.error) == ("failed", ENDED_UNREPORTED) and run.finished_at is not None
        assert refresh_jobs(store) == []
    finally:
        child.kill()
        child.wait()


def test_cancel_records_cancelled_and_the_process_exits(store, tmp_path):
    run_id = new_run(store)
    child = spawn(store, run_id, 1000, tmp_path / "child.txt", "--pause", "0.05")
    try:
        wait_until(lambda: len(run_metrics(store, run_id, "reward")) >= 2, what="two steps")
        run = cancel_job(store, run_id, grace_s=20)
        assert child.wait(timeout=10) == jobs.CANCELLED_EXIT_CODE  # the reporter's SIGTERM handler ended it
        assert (run.status, run.error) == ("cancelled", "")
        assert "cancelled (SIGTERM)" in (tmp_path / "child.txt").read_text()
        assert refresh_jobs(store) == [] and get_run(store, run_id).status == "cancelled"  # not "failed" after
        with pytest.raises(InvalidInput, match="already cancelled"):
            cancel_job(store, run_id)
    finally:
        child.kill()
        child.wait()


def test_a_process_that_ignores_sigterm_is_killed_and_a_stranger_is_never_signalled(store, tmp_path):
    stubborn_run, stranger_run = new_run(store), new_run(store)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)",
                                 "--run-id", str(stubborn_run)], stdout=subprocess.PIPE, start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a reused pid: not a training process
    try:
        assert stubborn.stdout.readline() == b"ready\n"
        update_run(store, stubborn_run, status="running", pid=stubborn.pid)
        update_run(store, stranger_run, status="running", pid=stranger.pid)
        started = time.monotonic()
        assert cancel_job(store, stubborn_run, grace_s=0.5).status == "cancelled"
        assert stubborn.wait(timeout=10) == -signal.SIGKILL and time.monotonic() - started < 8

        assert not job_alive(stranger.pid, stranger_run)
        assert cancel_job(store, stranger_run).status == "cancelled"
        assert stranger.poll() is None, "cancel_job signalled a process that is not the run's"
    finally:
        for process in (stubborn, stranger):
            process.kill()
            process.wait()


def test_a_cancelled_run_is_never_overwritten_by_the_trainer(store):
    run_id = new_run(store)
    update_run(store, run_id, status="cancelled")
    reporter = JobReporter(store, run_id)
    reporter.fail("RuntimeError: the trainer noticed it was stopped")
    reporter.finish()
    assert (get_run(store, run_id).status, get_run(store, run_id).error) == ("cancelled", "")


def test_reporter_logs_finite_numbers_only_and_records_failures(store):
    run_id = new_run(store)
    reporter = JobReporter(store, run_id)
    reporter.metrics(3, {"reward": float("nan"), "kl": float("inf"), "loss": "x", "success": True, "valid_call_rate": 0.5})
    assert [(m.step, m.name, m.value) for m in run_metrics(store, run_id)] == [(3, "valid_call_rate", 0.5)]
    reporter.fail("ValueError: bad batch")
    assert (get_run(store, run_id).status, get_run(store, run_id).error) == ("failed", "ValueError: bad batch")


def test_start_job_runs_the_trainer_in_the_background_to_the_end(store, fake_trainer):
    run = start_job(store, env="hybrid", max_steps=4, seed=7)
    assert run.config == {"curriculum": "demo", "env": "hybrid", "max_steps": 4, "seed": 7, "curriculum_version": 1}
    assert run.curriculum_id == demo_curriculum(store).id and run.pid is not None
    assert run.log_path == str(run_folder(run.id) / "log.txt")
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the run to finish")
    assert sorted({m.step for m in run_metrics(store, run.id, "reward")}) == [0, 1, 2, 3]
    episodes = latest_episodes(run.id, n=3)
    assert [e["step"] for e in episodes] == [1, 2, 3] and episodes[-1]["transcript"][0] == "agent: refund_order {}"
    log = Path(run.log_path).read_text()
    assert "--env hybrid --max-steps 4" in log and "--seed 7" in log and "wrote 3" in log
    assert [p.name for p in checkpoints(run.id)] == ["checkpoint-2", "checkpoint-4"]
    wait_until(lambda: not job_alive(run.pid, run.id), what="the process to end")


def test_resume_is_refused_for_live_finished_and_checkpointless_runs_and_continues_a_failed_one(store, fake_trainer):
    finished, running, bare = new_run(store), new_run(store), new_run(store)
    update_run(store, finished, status="finished")
    update_run(store, running, status="running")
    update_run(store, bare, status="failed", error="boom")
    for run_id in (finished, bare):
        (run_folder(run_id) / "checkpoints" / "checkpoint-2").mkdir(parents=True)  # bare's is partial: no state
    (run_folder(finished) / "checkpoints" / "checkpoint-2" / "trainer_state.json").write_text("{}")
    with pytest.raises(InvalidInput, match="run_id: run .* already finished: start a new run"):
        resume_job(store, finished)
    with pytest.raises(InvalidInput, match="no checkpoint to resume from"):
        resume_job(store, bare)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--run-id", str(running)],
                               start_new_session=True)
    try:
        update_run(store, running, pid=sleeper.pid)
        with pytest.raises(InvalidInput, match="still running: cancel it first"):
            resume_job(store, running)
    finally:
        sleeper.kill()
        sleeper.wait()

    run = start_job(store, max_steps=6)
    wait_until(lambda: len(checkpoints(run.id)) >= 1, what="a checkpoint")
    cancel_job(store, run.id)
    resumed = resume_job(store, run.id)
    assert (resumed.status, resumed.error) in (("queued", ""), ("running", ""))
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the resumed run to finish")
    assert sorted({m.step for m in run_metrics(store, run.id, "reward")}) == [0, 1, 2, 3, 4, 5]
    assert "resuming:" in Path(get_run(store, run.id).log_path).read_text()


def test_refresh_fails_runs_that_never_got_a_process(store, monkeypatch):
    run_id = new_run(store)
    assert refresh_jobs(store) == []  # just made: it may be starting
    monkeypatch.setattr(jobs, "START_GRACE_S", -1.0)
    assert [(r.id, r.status, r.error) for r in refresh_jobs(store)] == [(run_id, "failed", jobs.NEVER_STARTED)]


def test_bad_settings_name_the_field(store):
    with pytest.raises(InvalidInput) as err:
        start_job(store, env="cloud", max_steps=0, seed=-1)
    assert {p.path for p in err.value.problems} == {"env", "max_steps", "seed"}
    with pytest.raises(InvalidInput, match="curriculum: no curriculum 'nope'"):
        start_job(store, curriculum="nope")


def test_no_more_than_max_live_jobs_train_at_once(store, fake_trainer):
    sleepers, runs = [], []
    try:
        for _ in range(jobs.MAX_LIVE_JOBS):
            runs.append(new_run(store))
            sleepers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                              "--run-id", str(runs[-1])], start_new_session=True))
            update_run(store, runs[-1], status="running", pid=sleepers[-1].pid)
        with pytest.raises(InvalidInput, match="run: 2 runs are training already .*cancel one"):
            start_job(store, max_steps=1)
        assert len(jobs.list_runs(store)) == jobs.MAX_LIVE_JOBS  # nothing was recorded
        cancel_job(store, runs[0])
        finished = start_job(store, max_steps=1)
        wait_until(lambda: get_run(store, finished.id).status == "finished", what="the run to finish")
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_demo_curriculum_is_made_once(store):
    first, second = demo_curriculum(store), demo_curriculum(store)
    assert first.id == second.id and (first.name, first.version) == ("demo", 1)
    assert "retail" in first.description and "demo_scenarios" in first.description
    assert [s.curriculum.name for s in list_curricula(store)] == ["demo"]


def test_latest_episodes_skips_a_torn_last_line_and_leftovers_are_moved_aside(store, fake_trainer):
    path = run_folder(41) / "episodes.jsonl"
    lines = [json.dumps({"step": s, "scenario": "x", "task": "t", "transcript": [], "reward": 0, "success": False})
             for s in range(7)]
    path.write_text("\n".join(lines) + '\n{"step": 7, "scen')
    assert [e["step"] for e in latest_episodes(41, n=3)] == [4, 5, 6]
    assert latest_episodes(42) == [] and latest_episodes(41, n=0) == []

    (run_folder(1) / "log.txt").write_text("a run of another database\n")
    run = start_job(store, max_steps=1)
    assert run.id == 1 and "another database" not in Path(run.log_path).read_text()
    moved = [p for p in run_folder(1).parent.iterdir() if p.name.startswith("1.moved-")]
    assert len(moved) == 1 and (moved[0] / "log.txt").read_text() == "a run of another database\n"
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the run to finish")


def policy_for_tests(folder: Path) -> str | None:
    """None (train-grpo's default) when the shipped agent policy is there; until it ships, a policy trained by
    SFT for 300 steps (about 25 s on one thread) in `folder`."""
    if (REPO_ROOT / DEFAULT_POLICY / "policy.json").is_file():
        return None
    from wmstudio.train.agent_sft import train_agent

    train_agent(AgentTrainConfig(out=folder, minutes=5, steps=300, episodes=300), log=lambda _: None)
    return str(folder)


@pytest.mark.slow
def test_a_real_grpo_run_killed_after_its_first_checkpoint_resumes_from_it(store, tmp_path, one_thread):
    policy = policy_for_tests(tmp_path / "policy")
    run = start_job(store, env="simulator", max_steps=40, save_every=2, policy=policy)
    wait_until(lambda: checkpoints(run.id) or get_run(store, run.id).status not in ("queued", "running"), 300,
               "the first checkpoint")
    os.kill(run.pid, signal.SIGKILL)
    assert checkpoints(run.id), Path(run.log_path).read_text()[-3000:]
    wait_until(lambda: not job_alive(run.pid, run.id), what="the kill")
    logged_before = {m.step for m in run_metrics(store, run.id, "reward")}
    assert logged_before and max(logged_before) < 40
    assert [r.id for r in refresh_jobs(store)] == [run.id] and get_run(store, run.id).status == "failed"

    newest = int(checkpoints(run.id)[-1].name.split("-")[1])
    resumed = resume_job(store, run.id)
    assert resumed.pid != run.pid and resumed.error == ""
    wait_until(lambda: get_run(store, run.id).status not in ("queued", "running"), 600, "the resumed run")
    final = get_run(store, run.id)
    assert final.status == "finished", f"{final.error}\n{Path(final.log_path).read_text()[-3000:]}"
    steps = {m.step for m in run_metrics(store, run.id, "reward")}
    assert set(range(newest + 1, 41)) <= steps  # every step after the checkpoint, the killed ones trained again
    assert max(logged_before) < 40 == max(steps)
    assert "resuming:" in Path(final.log_path).read_text() and (run_folder(run.id) / "policy").is_dir()
    assert latest_episodes(run.id, 1)[0]["step"] == 40


def test_the_train_tabs_policy_field_takes_a_folder_or_a_hub_id_and_names_the_fix_otherwise(store, tmp_path):
    from wmstudio.ui.train_tab import read_policy, start_run

    assert read_policy("") is None and read_policy("  ") is None  # the shipped policy
    assert read_policy(str(tmp_path)) == str(tmp_path)
    assert read_policy("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    with pytest.raises(InvalidInput, match="Policy") as refused:
        start_run(store, "demo", "simulator", "2", "no such folder")
    assert "hub id" in str(refused.value) and not jobs.list_runs(store)  # nothing was started
