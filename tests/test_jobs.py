"""GRPO training runs as background jobs, with real SQLite files and real child processes: what a killed process
leaves behind, what cancelling records, when resuming is refused, one trainer per run, no zombies, and the built-in
demo curriculum.

The children are small Python programs that claim their run and report through JobReporter (the contract
`train-grpo` follows); the slow tests train a real policy with `wmstudio train-grpo`, started from the CLI, watched
from the studio's code path, refused a second trainer, killed and resumed."""

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
from wmstudio.train.agent import jobs, run_owner
from wmstudio.train.agent.agent_config import DEFAULT_POLICY, AgentTrainConfig
from wmstudio.train.agent.jobs import (
    ENDED_UNREPORTED,
    JobReporter,
    cancel_job,
    demo_curriculum,
    job_alive,
    refresh_jobs,
    resume_job,
    start_job,
)
from wmstudio.train.agent.run_files import checkpoint_step, checkpoints, latest_episodes, run_folder

# A stand-in trainer: takes train-grpo's options, claims its run as train-grpo does (begin_job), reports steps 1 to
# `--max-steps` through JobReporter as TRL numbers them (printing "wrote N" once step N's metrics are committed),
# saves checkpoint-N after every even step N, pauses between steps; `--resume` continues after the newest checkpoint.
FAKE_TRAINER = r"""
import sys, time
from wmstudio.problems import InvalidInput
from wmstudio.store import open_store
from wmstudio.train.agent.jobs import begin_job
from wmstudio.train.agent.run_files import checkpoint_step, checkpoints, run_folder
args = sys.argv[1:]
option = lambda name, default=None: args[args.index(name) + 1] if name in args else default
run_id, steps, pause = int(option("--run-id")), int(option("--max-steps")), float(option("--pause", "0.3"))
resume = "--resume" in args
try:
    reporter = begin_job(open_store(option("--db")), run_id, resume, 0, {})
except InvalidInput as err:
    print(f"error: {err}", flush=True)
    sys.exit(2)
db = option("--db")
first = checkpoint_step(checkpoints(run_id, db)[-1]) if resume and checkpoints(run_id, db) else 0
reporter.start(resumed_from=first if resume else None)
with reporter:
    for step in range(first + 1, steps + 1):
        reporter.metrics(step, {"reward": step / 10, "success": step % 2, "kl": float("nan"), "loss": 1.0 / step})
        reporter.episodes(step, [{"scenario": f"retail-train-{step}", "task": "Refund order ORD-1.",
                                  "transcript": ["agent: refund_order {}", "world: {\"status\": \"ok\"}"],
                                  "reward": step / 10, "success": bool(step % 2)}])
        print(f"wrote {step}", flush=True)
        if step % 2 == 0:
            saved = run_folder(run_id, db) / "checkpoints" / f"checkpoint-{step}"
            saved.mkdir(parents=True, exist_ok=True)
            (saved / "trainer_state.json").write_text("{}")
        time.sleep(pause)
    if option("--fail"):
        raise RuntimeError(option("--fail"))
"""
# A process that claims run argv[1] of database argv[2] and sleeps (with --stubborn it ignores SIGTERM).
HOLDER = r"""
import signal, sys, time
from wmstudio.train.agent.run_owner import claim_run
if "--stubborn" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
claim = claim_run(int(sys.argv[1]), sys.argv[2])
print("ready", flush=True)
time.sleep(60)
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


def hold(store, run_id: int, *extra: str) -> subprocess.Popen:
    """A live process that has claimed run `run_id` (as a trainer does), once it says so."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_id), str(store.path), *extra],
                              stdout=subprocess.PIPE, start_new_session=True)
    assert holder.stdout.readline() == b"ready\n"
    return holder


def process_state(pid: int) -> str | None:
    """The state letter /proc gives process `pid` (Z: a zombie nobody reaped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


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
        assert job_alive(run_id, store.path)
        os.kill(child.pid, signal.SIGKILL)
        wait_until(lambda: not job_alive(run_id, store.path), what="the kill")  # a zombie (not reaped yet) is dead
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
    stubborn_run, stranger_run, reused_run = new_run(store), new_run(store), new_run(store)
    stubborn = hold(store, stubborn_run, "--stubborn")
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a reused pid: not a training process
    try:
        update_run(store, stubborn_run, status="running", pid=stubborn.pid)
        update_run(store, stranger_run, status="running", pid=stranger.pid)
        update_run(store, reused_run, status="running", pid=stranger.pid)
        record = run_owner.write_record(reused_run, stranger.pid, store.path)  # its trainer had this pid once...
        record.started = "another boot:12345"  # ...but that process started at another time
        (run_folder(reused_run, store.path) / run_owner.RECORD_FILE).write_text(json.dumps(record.to_json()))
        started = time.monotonic()
        assert cancel_job(store, stubborn_run, grace_s=0.5).status == "cancelled"
        assert stubborn.wait(timeout=10) == -signal.SIGKILL and time.monotonic() - started < 8

        assert not job_alive(stranger_run, store.path) and not job_alive(reused_run, store.path)
        assert cancel_job(store, stranger_run).status == "cancelled"
        assert cancel_job(store, reused_run).status == "cancelled"
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


def test_start_job_runs_the_trainer_in_the_background_to_the_end_and_reaps_it(store, fake_trainer):
    run = start_job(store, env="hybrid", max_steps=4, seed=7)
    assert run.config == {"curriculum": "demo", "env": "hybrid", "max_steps": 4, "seed": 7, "curriculum_version": 1}
    assert run.curriculum_id == demo_curriculum(store).id and run.pid is not None
    assert run.log_path == str(run_folder(run.id, store.path) / "log.txt")
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the run to finish")
    assert sorted({m.step for m in run_metrics(store, run.id, "reward")}) == [1, 2, 3, 4]
    episodes = latest_episodes(run.id, store.path, n=3)
    assert [e["step"] for e in episodes] == [2, 3, 4] and episodes[-1]["transcript"][0] == "agent: refund_order {}"
    log = Path(run.log_path).read_text()
    assert "--env hybrid --max-steps 4" in log and "--seed 7" in log and "wrote 4" in log
    assert [p.name for p in checkpoints(run.id, store.path)] == ["checkpoint-2", "checkpoint-4"]
    wait_until(lambda: not job_alive(run.id, store.path), what="the process to end")
    wait_until(lambda: process_state(run.pid) is None, 10, "the studio to reap its finished child")  # no zombie


def test_resume_is_refused_for_live_finished_and_checkpointless_runs_and_continues_a_failed_one(store, fake_trainer):
    finished, running, bare = new_run(store), new_run(store), new_run(store)
    update_run(store, finished, status="finished")
    update_run(store, running, status="running")
    update_run(store, bare, status="failed", error="boom")
    for run_id in (finished, bare):
        (run_folder(run_id, store.path) / "checkpoints" / "checkpoint-2").mkdir(parents=True)  # bare's is partial: no state
    (run_folder(finished, store.path) / "checkpoints" / "checkpoint-2" / "trainer_state.json").write_text("{}")
    with pytest.raises(InvalidInput, match="run_id: run .* already finished: start a new run"):
        resume_job(store, finished)
    with pytest.raises(InvalidInput, match="no checkpoint to resume from"):
        resume_job(store, bare)
    sleeper = hold(store, running)
    try:
        update_run(store, running, pid=sleeper.pid)
        with pytest.raises(InvalidInput, match="still running: cancel it first"):
            resume_job(store, running)
        update_run(store, running, status="failed", error="marked failed while it trained")  # an old studio did so
        (run_folder(running, store.path) / "checkpoints" / "checkpoint-2").mkdir(parents=True)
        (run_folder(running, store.path) / "checkpoints" / "checkpoint-2" / "trainer_state.json").write_text("{}")
        with pytest.raises(InvalidInput, match=f"run {running} is being trained by process {sleeper.pid}"):
            resume_job(store, running)
    finally:
        sleeper.kill()
        sleeper.wait()

    run = start_job(store, max_steps=6)
    wait_until(lambda: len(checkpoints(run.id, store.path)) >= 1, what="a checkpoint")
    cancel_job(store, run.id)
    wait_until(lambda: process_state(run.pid) is None, 10, "the studio to reap its cancelled child")  # no zombie
    resumed = resume_job(store, run.id)
    assert (resumed.status, resumed.error) in (("queued", ""), ("running", ""))
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the resumed run to finish")
    rows = [(m.step, m.name) for m in run_metrics(store, run.id)]
    assert sorted({step for step, _ in rows}) == [1, 2, 3, 4, 5, 6] and len(rows) == len(set(rows))
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
            sleepers.append(hold(store, runs[-1]))
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
    path = run_folder(41, store.path) / "episodes.jsonl"
    lines = [json.dumps({"step": s, "scenario": "x", "task": "t", "transcript": [], "reward": 0, "success": False})
             for s in range(7)]
    path.write_text("\n".join(lines) + '\n{"step": 7, "scen')
    assert [e["step"] for e in latest_episodes(41, store.path, n=3)] == [4, 5, 6]
    assert latest_episodes(42, store.path) == [] and latest_episodes(41, store.path, n=0) == []

    (run_folder(1, store.path) / "log.txt").write_text("a run of a deleted database of the same path\n")
    run = start_job(store, max_steps=1)
    assert run.id == 1 and "deleted database" not in Path(run.log_path).read_text()
    moved = [p for p in run_folder(1, store.path).parent.iterdir() if p.name.startswith("1.moved-")]
    assert len(moved) == 1 and "deleted database" in (moved[0] / "log.txt").read_text()
    wait_until(lambda: get_run(store, run.id).status == "finished", what="the run to finish")


def test_two_databases_in_one_home_never_share_a_run_folder(store, tmp_path, fake_trainer):
    """Run 1 of a second database (one WMSTUDIO_HOME) once renamed the first database's live run folder and
    overwrote its final policy; each database's runs now live in a folder of their own."""
    other = open_store(tmp_path / "other" / "studio.db")  # the same file name in another folder
    first = start_job(store, max_steps=30)
    wait_until(lambda: len(run_metrics(store, first.id, "reward")) >= 2, what="the first run's steps")
    second = start_job(other, max_steps=1)
    assert first.id == second.id == 1
    assert run_folder(1, store.path) != run_folder(1, other.path)
    assert Path(first.log_path).parent == run_folder(1, store.path) and Path(first.log_path).is_file()
    wait_until(lambda: get_run(other, 1).status == "finished", what="the second run")
    assert not any(p.name.startswith("1.moved-") for p in run_folder(1, store.path).parent.iterdir())
    wait_until(lambda: not job_alive(1, other.path), what="the second run's process to end")
    assert job_alive(1, store.path) and get_run(store, 1).status == "running"  # the first trains on, unmoved
    cancel_job(store, 1, grace_s=10)
    assert [e["step"] for e in latest_episodes(1, other.path, n=5)] == [1]  # its own episodes only


def test_a_run_started_outside_the_studio_stays_running_has_one_trainer_and_resumes_once_per_step(store, tmp_path,
                                                                                                     fake_trainer):
    from wmstudio.ui.train_tab import refresh

    run_id = new_run(store, max_steps=8)
    out = tmp_path / "first.txt"
    first = spawn(store, run_id, 8, out, "--pause", "0.3")  # its own process, as `train-grpo` in a terminal
    try:
        wait_until(lambda: len(wrote_steps(out)) >= 3, what="three steps")  # checkpoint-2, then step 3
        os.kill(first.pid, signal.SIGSTOP)  # frozen mid-run: alive and holding its run
        assert refresh_jobs(store) == [] and get_run(store, run_id).status == "running"
        refresh(store, run_id, None)  # the Train tab's timer
        assert get_run(store, run_id).status == "running" and job_alive(run_id, store.path)
        second = subprocess.run([sys.executable, "-c", FAKE_TRAINER, "--db", str(store.path), "--run-id",
                                 str(run_id), "--max-steps", "8", "--resume"], capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2 and f"run {run_id} is being trained by process {first.pid}" in second.stdout
        with pytest.raises(InvalidInput, match="still running: cancel it first"):
            resume_job(store, run_id)
        newest = checkpoint_step(checkpoints(run_id, store.path)[-1])
        assert max(wrote_steps(out)) > newest  # steps past the newest checkpoint: a resume trains them again
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert [r.id for r in refresh_jobs(store)] == [run_id]
        assert (get_run(store, run_id).status, get_run(store, run_id).error) == ("failed", ENDED_UNREPORTED)

        resume_job(store, run_id)
        wait_until(lambda: get_run(store, run_id).status == "finished", what="the resumed run to finish")
        assert get_run(store, run_id).error == ""  # the kill's message went with it
        rows = [(m.step, m.name) for m in run_metrics(store, run_id)]
        assert len(rows) == len(set(rows)) and {step for step, _ in rows} == set(range(1, 9))
        episode_steps = [json.loads(line)["step"] for line in (run_folder(run_id, store.path) / "episodes.jsonl").open()]
        assert episode_steps == list(range(1, 9))
    finally:
        first.kill()
        first.wait()


def test_the_runs_commands_list_show_cancel_and_resume_as_the_train_tab_does(store, fake_trainer):
    from typer.testing import CliRunner

    from wmstudio.cli import app

    runner, db = CliRunner(), ["--db", str(store.path)]
    run = start_job(store, max_steps=60)
    wait_until(lambda: checkpoints(run.id, store.path), what="a checkpoint")
    listed = runner.invoke(app, ["runs", "list", *db])
    assert listed.exit_code == 0 and [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [(1, "running")]
    shown = json.loads(runner.invoke(app, ["runs", "show", "1", *db]).stdout)
    assert shown["checkpoints"][0] == "checkpoint-2" and "reward" in shown["last_values"]
    assert "wrote 1" in shown["log_tail"] and shown["config"]["max_steps"] == 60
    cancelled = runner.invoke(app, ["runs", "cancel", "1", *db])
    assert cancelled.exit_code == 0 and json.loads(cancelled.stdout)["status"] == "cancelled"
    wait_until(lambda: process_state(run.pid) is None, 10, "the cancelled process to be reaped")

    resumed = runner.invoke(app, ["runs", "resume", "1", *db])
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["from_checkpoint"].startswith("checkpoint-")
    wait_until(lambda: get_run(store, 1).status == "running", what="the resumed run")
    assert runner.invoke(app, ["runs", "cancel", "1", *db]).exit_code == 0
    for argv, message in ((["runs", "show", "7"], "run_id: no training run with id 7"),
                          (["runs", "cancel", "1"], "run 1 already cancelled"),
                          (["runs", "resume", str(10**30)], "run_id"),
                          (["runs", "show", "-1"], "run_id")):
        refused = runner.invoke(app, [*argv, *db])
        assert refused.exit_code == 2 and isinstance(refused.exception, (SystemExit, type(None)))
        assert message in refused.stderr and "Traceback" not in refused.output, (argv, refused.output)


def policy_for_tests(folder: Path) -> str | None:
    """None (train-grpo's default) when the shipped agent policy is there; until it ships, a policy trained by
    SFT for 300 steps (about 25 s on one thread) in `folder`."""
    if (REPO_ROOT / DEFAULT_POLICY / "policy.json").is_file():
        return None
    from wmstudio.train.agent.agent_sft import train_agent

    train_agent(AgentTrainConfig(out=folder, minutes=5, steps=300, episodes=300), log=lambda _: None)
    return str(folder)


@pytest.mark.slow
def test_a_real_run_started_from_the_cli_stays_running_has_one_trainer_and_resumes_once_per_step(store, tmp_path,
                                                                                                  one_thread):
    """The issue's sequence with the real `wmstudio train-grpo` (the shipped policy, simulator, 9 tiny steps)."""
    from typer.testing import CliRunner

    from wmstudio.cli import app
    from wmstudio.ui.train_tab import refresh

    policy = policy_for_tests(tmp_path / "policy")
    tiny = ["--env", "simulator", "--max-steps", "9", "--save-every", "3", "--generations", "4",
            "--scenarios-per-step", "2", "--db", str(store.path), *(["--policy", policy] if policy else [])]
    command = [sys.executable, "-m", "wmstudio.cli", "train-grpo", *tiny]
    log = tmp_path / "first.txt"
    with log.open("w") as out:
        first = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: jobs.list_runs(store) and get_run(store, 1).status == "running", 180, "the CLI's run")
        assert refresh_jobs(store) == []  # started in a terminal, no --run-id on its command line: still running
        refresh(store, 1, None)  # the Train tab's timer
        assert get_run(store, 1).status == "running"

        def past_checkpoint() -> bool:
            steps = {m.step for m in run_metrics(store, 1, "reward")}
            assert first.poll() is None, log.read_text()[-3000:]
            return bool(checkpoints(1, store.path)) and max(steps, default=0) > 3
        wait_until(past_checkpoint, 180, "a step past checkpoint-3")
        os.kill(first.pid, signal.SIGSTOP)  # frozen mid-run: alive and holding its run
        assert refresh_jobs(store) == [] and get_run(store, 1).status == "running"
        second = subprocess.run([*command, "--run-id", "1", "--resume"], capture_output=True, text=True, timeout=300)
        assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr[-3000:]
        assert f"run 1 is being trained by process {first.pid}" in second.stderr
        with pytest.raises(InvalidInput, match="still running: cancel it first"):
            resume_job(store, 1)

        assert [p.name for p in checkpoints(1, store.path)] == ["checkpoint-3"]
        logged_before = {m.step for m in run_metrics(store, 1, "reward")}
        assert max(logged_before) > 3  # the steps a resume from checkpoint-3 trains again
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        runner = CliRunner()
        shown = runner.invoke(app, ["runs", "show", "1", "--db", str(store.path)])  # the next status read
        assert shown.exit_code == 0 and json.loads(shown.stdout)["status"] == "failed"
        assert json.loads(shown.stdout)["error"] == ENDED_UNREPORTED

        resumed = runner.invoke(app, ["runs", "resume", "1", "--db", str(store.path)])
        assert resumed.exit_code == 0, resumed.output
        assert json.loads(resumed.stdout)["from_checkpoint"] == "checkpoint-3"
        wait_until(lambda: get_run(store, 1).status not in ("queued", "running"), 300, "the resumed run")
        final = get_run(store, 1)
        assert (final.status, final.error) == ("finished", ""), Path(final.log_path).read_text()[-3000:]
        rows = [(m.step, m.name) for m in run_metrics(store, 1)]
        assert len(rows) == len(set(rows)), "a step has two rows of one metric"
        assert {step for step, name in rows if name == "reward"} == set(range(1, 10))
        episode_steps = [json.loads(line)["step"] for line in (run_folder(1, store.path) / "episodes.jsonl").open()]
        assert episode_steps == sorted(episode_steps) and set(episode_steps) == set(range(1, 10))
        assert all(episode_steps.count(step) == 4 for step in range(1, 10))  # four shown per step, once
        resumed_log = Path(final.log_path).read_text()
        assert "resuming:" in resumed_log and "--generations 4" in resumed_log and "--save-every 3" in resumed_log
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_the_train_tabs_policy_field_takes_a_folder_or_a_hub_id_and_names_the_fix_otherwise(store, tmp_path):
    from wmstudio.ui.train_tab import read_policy, start_run

    assert read_policy("") is None and read_policy("  ") is None  # the shipped policy
    assert read_policy(str(tmp_path)) == str(tmp_path)
    assert read_policy("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    with pytest.raises(InvalidInput, match="Policy") as refused:
        start_run(store, "demo", "simulator", "2", "no such folder")
    assert "hub id" in str(refused.value) and not jobs.list_runs(store)  # nothing was started
