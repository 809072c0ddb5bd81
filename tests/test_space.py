"""The Hugging Face Space (spaces/, serve/space.py): `wmstudio space build` assembles a folder whose front matter
matches what we test, whose app starts locally and serves the studio, and whose database export commits a
consistent snapshot (the hub itself is faked: it lies outside)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import gradio
import httpx
import pytest
from serving import free_port

from wmstudio.serve.space import (
    EXPORT_FILE,
    package_requirements,
    read_front_matter,
    snapshot_database,
    start_database_export,
)
from wmstudio.store import open_store
from wmstudio.store.seeding import seed_first_run


def build(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wmstudio.cli", "space", "build", str(out), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_built_space_has_the_front_matter_and_files_a_space_needs(tmp_path):
    done = build(tmp_path / "space", "--model-repo", "someone/wm-mdlm-small")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "space"
    front = read_front_matter(out / "README.md")
    assert front["sdk"] == "gradio" and front["sdk_version"] == gradio.__version__
    assert front["app_file"] == "app.py" and (out / front["app_file"]).is_file()
    assert front["python_version"] == "3.11" and front["hf_oauth"] is True
    assert front["suggested_hardware"] == "cpu-upgrade" and front["models"] == ["someone/wm-mdlm-small"]
    assert (out / "requirements.txt").read_text().split() == package_requirements()
    assert (out / "assets/models/wm-mdlm-small/model.safetensors").is_file()
    assert (out / "wmstudio/serve/space.py").is_file() and not list(out.rglob("__pycache__"))
    zero = build(tmp_path / "zero", "--hardware", "zero-a10g")
    assert "spaces" in (tmp_path / "zero/requirements.txt").read_text() and zero.returncode == 0
    again = build(out)
    assert again.returncode == 2 and "not an empty folder" in again.stderr
    assert build(tmp_path / "x", "--hardware", "quantum").returncode == 2


@pytest.mark.slow
def test_the_built_spaces_app_starts_and_serves_the_studio(tmp_path):
    out = tmp_path / "space"
    assert build(out).returncode == 0
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("WMSTUDIO_")}
    env.update(GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False")
    app = subprocess.Popen([sys.executable, "app.py"], cwd=out, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        deadline, config = time.monotonic() + 120, None
        while time.monotonic() < deadline and config is None:
            try:
                config = httpx.get(f"http://127.0.0.1:{port}/config", timeout=2).json()
            except (httpx.HTTPError, json.JSONDecodeError):
                assert app.poll() is None, app.stderr.read().decode()
                time.sleep(0.5)
        assert config is not None and config["title"] == "World Model Studio"
        assert (out / "data/studio.db").is_file()  # the database on the Space's local disk, beside the app
    finally:
        app.terminate()
        app.wait(30)


class FakeHub:
    """The few HfApi calls CommitScheduler makes, recorded instead of sent (the hub is outside this machine)."""

    def __init__(self):
        self.commits: list[list[str]] = []

    def create_repo(self, **kwargs):
        return type("RepoUrl", (), {"repo_id": kwargs["repo_id"]})()

    def create_commit(self, operations, **kwargs):
        self.commits.append([op.path_in_repo for op in operations])

    def run_as_future(self, function, *args, **kwargs) -> Future:
        done: Future = Future()
        done.set_result(function(*args, **kwargs))
        return done


def test_the_database_export_commits_a_consistent_snapshot(tmp_path):
    store = open_store(tmp_path / "studio.db")
    seed_first_run(store)
    snapshot = snapshot_database(store.path, tmp_path / "export")
    with sqlite3.connect(snapshot) as copy:
        assert copy.execute("select count(*) from world").fetchone()[0] == 5
    hub = FakeHub()
    scheduler = start_database_export(store.path, tmp_path / "export", "me/studio-data", "token",
                                      every_minutes=60, hf_api=hub)
    try:
        deadline = time.monotonic() + 60
        while not hub.commits and time.monotonic() < deadline:  # the first export runs at start
            time.sleep(0.1)
    finally:
        scheduler.stop()
    assert hub.commits and hub.commits[0] == [EXPORT_FILE]


def git_clone_like(folder: Path) -> Path:
    """A Space repository as `git clone` leaves it: .git, the hub's README.md and .gitattributes, a note."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "README.md").write_text("---\ntitle: mine\n---\nmy Space\n")
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    (folder / "notes.txt").write_text("my notes\n")
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
                   check=True)
    return folder


def test_space_build_never_overwrites_or_deletes_what_it_did_not_write(tmp_path):
    from typer.testing import CliRunner

    from wmstudio.cli import app
    from wmstudio.problems import InvalidInput
    from wmstudio.serve.space import build_space
    from wmstudio.studio.written_files import MARKER, file_digest

    runner = CliRunner()
    clone = git_clone_like(tmp_path / "clone")
    refused = runner.invoke(app, ["space", "build", str(clone), "--force"])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "already holds README.md, which `wmstudio space build` did not write" in refused.stderr
    assert (clone / "README.md").read_text().endswith("my Space\n") and not (clone / "app.py").exists()
    assert subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""  # nothing touched

    (clone / "README.md").unlink()  # the user moves the hub's README away
    built = runner.invoke(app, ["space", "build", str(clone), "--force"])
    assert built.exit_code == 0, built.output
    assert (clone / "app.py").is_file() and (clone / ".git" / "HEAD").is_file()
    assert (clone / "notes.txt").read_text() == "my notes\n" and (clone / ".gitattributes").is_file()
    written = json.loads((clone / MARKER).read_text())["files"]
    assert "README.md" in written and "wmstudio/serve/space.py" in written and not any(".git" in f for f in written)

    (clone / "wmstudio" / "mine.py").write_text("# the user's\n")  # beside the build's files: kept
    (clone / "wmstudio" / "gone.py").write_text("# an earlier build's file no longer built\n")
    record = json.loads((clone / MARKER).read_text())
    (tmp_path / "outside.txt").write_text("not the build's\n")
    (clone / MARKER).write_text(json.dumps({**record, "files": {
        **record["files"], "wmstudio/gone.py": file_digest(clone / "wmstudio" / "gone.py"),
        "../outside.txt": file_digest(tmp_path / "outside.txt")}}))
    build_space(clone, force=True)
    assert (clone / "wmstudio" / "mine.py").read_text() == "# the user's\n"
    assert (clone / "wmstudio" / "gone.py").is_file()  # not one of this build's files: a record's word is not enough
    assert (tmp_path / "outside.txt").read_text() == "not the build's\n"  # a record never reaches outside
    assert (clone / ".git" / "HEAD").is_file() and (clone / "notes.txt").is_file()

    (clone / "app.py").unlink()
    (clone / "app.py").mkdir()  # a folder where the build writes a file
    with pytest.raises(InvalidInput, match="already holds app.py"):
        build_space(clone, force=True)
    assert (clone / "app.py").is_dir()

    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    for out, message in ((tmp_path / "link", "is a symbolic link"), (tmp_path / "dangling", "is a symbolic link"),
                         (tmp_path / "file", "is a file, not a folder"),
                         (tmp_path / "file" / "space", "is a file, not a folder")):
        result = runner.invoke(app, ["space", "build", str(out), "--force"])
        assert result.exit_code == 2 and message in result.stderr, (out, result.output)
        assert "Traceback" not in result.output and isinstance(result.exception, (SystemExit, type(None)))
    assert list(target.iterdir()) == [] and (tmp_path / "file").read_text() == "x"


def test_a_planted_or_stale_record_never_deletes_git_or_an_edited_file(tmp_path):
    """The record lists each file with the hash of what was written: `--force` replaces only files that still hold
    it, never anything under .git, whatever a planted `.wmstudio-written.json` says (once it deleted .git/HEAD,
    .git/config and .git/index)."""
    from wmstudio.problems import InvalidInput
    from wmstudio.serve.space import build_space
    from wmstudio.studio.written_files import MARKER, file_digest

    clone = git_clone_like(tmp_path / "clone")
    (clone / "README.md").unlink()
    git_files = [".git/HEAD", ".git/config", ".git/index"]
    before = {name: (clone / name).read_bytes() for name in git_files}
    (clone / MARKER).write_text(json.dumps({"written_by": "wmstudio space build", "files": git_files}))  # old form
    build_space(clone, force=True)
    assert {name: (clone / name).read_bytes() for name in git_files} == before
    record = json.loads((clone / MARKER).read_text())  # with hashes that match, beside the build's own files
    planted = {**record["files"], **{name: file_digest(clone / name) for name in git_files}, ".GIT/HEAD": "0" * 64}
    (clone / MARKER).write_text(json.dumps({**record, "files": planted}))
    build_space(clone, force=True)
    assert {name: (clone / name).read_bytes() for name in git_files} == before
    assert subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True,
                          text=True).returncode == 0
    assert not any(".git" in name.lower() for name in json.loads((clone / MARKER).read_text())["files"])

    record = json.loads((clone / MARKER).read_text())  # a user's file, listed with its true hash: not the Space's
    (clone / MARKER).write_text(json.dumps({**record, "files": {**record["files"],
                                                                "notes.txt": file_digest(clone / "notes.txt")}}))
    build_space(clone, force=True)
    assert (clone / "notes.txt").read_text() == "my notes\n"
    assert "notes.txt" not in json.loads((clone / MARKER).read_text())["files"]

    (clone / "app.py").write_text("# edited by the user after the build\n")
    with pytest.raises(InvalidInput, match="already holds app.py"):
        build_space(clone, force=True)
    assert (clone / "app.py").read_text() == "# edited by the user after the build\n"

    old_style = {"written_by": "wmstudio space build", "files": ["app.py", "notes.txt"]}  # a list: no hashes
    (clone / MARKER).write_text(json.dumps(old_style))
    with pytest.raises(InvalidInput, match="already holds"):
        build_space(clone, force=True)
    assert (clone / "notes.txt").read_text() == "my notes\n"
