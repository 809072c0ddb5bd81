"""The Hugging Face Space: `build_space(OUT)` assembles a deployable folder, and `DatabaseExport` keeps the
Space's SQLite (on its ephemeral local disk) exported to a dataset repo.

The folder holds the package, the embedded models and demo worlds, the entry `app.py` (from `spaces/`), a
requirements file made from pyproject's dependencies (one list to keep), and a README whose front matter says
which Gradio we test, the entry, Python, hardware, Hugging Face login for annotators and the models."""

from __future__ import annotations

import re
import shutil
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmstudio.locations import ASSETS_DIR, REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store.database import backup_database

SPACE_SOURCE = REPO_ROOT / "spaces"
HARDWARE = ("cpu-basic", "cpu-upgrade", "zero-a10g", "t4-small", "a10g-small")
SHIPPED_ASSETS = ("models", "worlds", "examples")
EXPORT_EVERY_MINUTES = 10
EXPORT_FILE = "wmstudio.sqlite"
ZERO_GPU_REQUIREMENT = "spaces>=0.30"


@dataclass
class SpaceBuild:
    """What `build_space` wrote: the folder, its front matter and the requirements."""

    folder: Path
    front_matter: dict[str, Any]
    requirements: list[str]


def build_space(out: Path, hardware: str = "cpu-upgrade", models: list[str] | None = None,
                force: bool = False) -> SpaceBuild:
    """Assemble the Space in `out` (refused when it exists and is not empty, unless `force`)."""
    import gradio

    if hardware not in HARDWARE:
        raise InvalidInput(Problem("hardware", f"{hardware!r} is not a Space hardware we build for: use "
                                               f"{', '.join(HARDWARE)}"))
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force or not out.is_dir():
            raise InvalidInput(Problem("out", f"{out} exists and is not an empty folder: choose a new folder "
                                              "(or --force to replace its contents)"))
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "wmstudio", out / "wmstudio", ignore=ignore)
    for name in SHIPPED_ASSETS:
        shutil.copytree(ASSETS_DIR / name, out / "assets" / name, ignore=ignore)
    shutil.copy2(SPACE_SOURCE / "app.py", out / "app.py")
    requirements = package_requirements()
    if hardware.startswith("zero"):
        requirements.append(ZERO_GPU_REQUIREMENT)
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
    front = {"title": "World Model Studio", "emoji": "🌍", "colorFrom": "indigo", "colorTo": "blue",
             "sdk": "gradio", "sdk_version": gradio.__version__, "python_version": "3.11", "app_file": "app.py",
             "suggested_hardware": hardware, "hf_oauth": True, "models": list(models or []), "pinned": False}
    body = (SPACE_SOURCE / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(front_matter_text(front) + body, encoding="utf-8")
    return SpaceBuild(out, front, requirements)


def package_requirements() -> list[str]:
    """The package's dependencies as pyproject lists them (the Space installs them from requirements.txt)."""
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [re.sub(r"\s+", "", item) for item in data["project"]["dependencies"]]


def front_matter_text(front: dict[str, Any]) -> str:
    """The README's YAML front matter block."""
    import yaml

    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n"


def read_front_matter(readme: Path) -> dict[str, Any]:
    """The front matter of a Space README (InvalidInput when it has none)."""
    import yaml

    text = Path(readme).read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    if match is None:
        raise InvalidInput(Problem(str(readme), "no front matter (a block between --- lines at the top)"))
    return yaml.safe_load(match.group(1))


def snapshot_database(db_path: Path, folder: Path) -> Path:
    """A consistent copy of the live database in `folder` (SQLite's online backup: writers may keep writing)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / EXPORT_FILE
    partial = folder / f".{EXPORT_FILE}.partial"
    partial.unlink(missing_ok=True)
    backup_database(db_path, partial).replace(target)
    return target


def start_database_export(db_path: Path, folder: Path, repo_id: str, token: str | None,
                          every_minutes: float = EXPORT_EVERY_MINUTES, hf_api: Any = None):
    """Export the studio's database to dataset repo `repo_id` now and every `every_minutes` after (a snapshot is
    taken right before each commit), so ratings and rollouts outlive the Space's ephemeral disk."""
    from huggingface_hub import CommitScheduler

    class DatabaseExport(CommitScheduler):
        snapshot_lock = threading.Lock()  # the scheduler's own thread and a manual trigger may push at once

        def push_to_hub(self):
            with self.snapshot_lock:
                snapshot_database(db_path, folder)
                return super().push_to_hub()

    return DatabaseExport(repo_id=repo_id, repo_type="dataset", folder_path=folder, every=every_minutes,
                          token=token, private=True, allow_patterns=[EXPORT_FILE], hf_api=hf_api)
